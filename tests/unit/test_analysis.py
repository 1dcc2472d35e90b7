"""The one analysis under every report: computed once, read by Markdown, JSON and validate alike."""

from __future__ import annotations

import json

import pytest

from dltestbed.report import render
from dltestbed.report.analysis import analyse
from dltestbed.report.keys import GroupKey
from dltestbed.results.records import RunRecord
from dltestbed.workload.events import MeasureEvent, StepEvent
from tests.conftest import make_run


def _fleet_runs() -> list[RunRecord]:
    """bm on four hosts, three repetitions each; n4 is 30 % slower than the others."""
    return [
        make_run(target_kind="bm", host=host, repetition=rep, status="ok", images_per_sec=ips + wobble)
        for host, ips in (("n1", 100.0), ("n2", 101.0), ("n3", 99.0), ("n4", 70.0))
        for rep, wobble in enumerate((-0.5, 0.0, 0.5), 1)
    ]


def test_three_hosts_bring_the_fleet_check_into_a_report_without_rows_per_host() -> None:
    a = analyse(_fleet_runs(), scope="bench b")
    assert [g.key.host for g in a.groups] == [None]  # the table keeps a row per kind …
    assert sorted(g.key.host or "" for g in a.host_groups) == ["n1", "n2", "n3", "n4"]  # … the fleet sees hosts
    assert a.fleet_compared == 1 and [f.host for f in a.fleet] == ["n4"]
    assert a.fleet[0].key == a.groups[0].key  # the flag names its group, host apart
    two = analyse([r for r in _fleet_runs() if r.host in ("n1", "n4")])
    assert (two.host_groups, two.fleet, two.fleet_compared) == ((), (), 0)  # 2 hosts: no fleet check


def test_probes_go_to_cases_and_models_to_groups() -> None:
    model = [
        make_run(target_kind=k, repetition=i, status="ok", images_per_sec=v)
        for k, v in (("bm", 100.0), ("cbm", 90.0))
        for i in (1, 2)
    ]
    probe = make_run(target_kind="bm", model="micro", mode="probe", status="ok", spec={"scale": "small"})
    measures = {probe.id: [MeasureEvent("membw", "copy", 1, "timed", 2e9, "B/s", 0.1, 1.0)]}
    a = analyse([*model, probe], measures=measures)
    assert probe not in a.runs and len(a.runs) == 4
    assert [c.key.probe for c in a.cases] == ["membw"] and a.cases[0].value.mean == 2e9
    (cbm,) = [g for g in a.groups if g.key.against_baseline]
    assert cbm.overhead_percent == pytest.approx(10.0)


def test_steady_state_comes_from_the_steps_and_reaches_the_json() -> None:
    run = make_run(status="ok", images_per_sec=80.0, steps=20)
    falling = [StepEvent(i, "timed", 8, 8 / (100.0 - 2 * i), 100.0 - 2 * i, float(i)) for i in range(20)]
    a = analyse([run], {run.id: falling})
    assert [r.id for r, _ in a.steady] == [run.id] and "slowing down" in "; ".join(a.steady[0][1])
    out = json.loads(render.as_json(a))
    assert out["steady"] == [{"run": run.id, "flags": a.steady[0][1]}]
    assert out["groups"][0]["key"] == GroupKey.of(run).to_dict() and "host" not in out["groups"][0]["key"]
    assert analyse([run]).steady == ()  # no steps read: nothing to flag


def test_two_frameworks_are_never_averaged_together() -> None:
    """The same model on the same layers, once per framework: a group each, each layer against its own
    framework's bare metal (a second framework is a made-up name here: the key, not the registry, is tested)."""
    runs = [
        make_run(target_kind=k, repetition=i, status="ok", images_per_sec=v * (2 if fw == "other" else 1), framework=fw)
        for fw in ("tensorflow", "other")
        for k, v in (("bm", 100.0), ("cbm", 90.0))
        for i in (1, 2)
    ]
    a = analyse(runs)
    assert sorted((g.key.framework, g.key.target_kind) for g in a.groups) == [
        ("other", "bm"),
        ("other", "cbm"),
        ("tensorflow", "bm"),
        ("tensorflow", "cbm"),
    ]
    means = {(g.key.framework, g.key.target_kind): g.images_per_sec.mean for g in a.groups}
    assert means == {
        ("other", "bm"): 200.0,
        ("other", "cbm"): 180.0,
        ("tensorflow", "bm"): 100.0,
        ("tensorflow", "cbm"): 90.0,
    }
    assert all(g.overhead_percent == pytest.approx(10.0) for g in a.groups if g.key.against_baseline)
    table = render.markdown(a)
    assert "| kind | model | framework |" in table and "| cbm | alexnet | other |" in table
    one = render.markdown(analyse([r for r in runs if r.framework == "tensorflow"]))
    assert "| kind | model | runs |" in one and "framework" not in one.split("| kind |")[1].splitlines()[0]


def test_groups_whose_keys_hold_none_beside_numbers_still_sort() -> None:
    """A run that left its warm-up to the preset (None) beside one that named it (3), in one store: an acceptance
    and a bench into the same store (scripts/gpu-check.sh) once failed the report here."""
    from dltestbed.report.stats import orderable

    keys = [("single", "alexnet", None, 10), ("single", "alexnet", 3, 20), ("single", "alexnet", None, 5)]
    assert sorted(keys, key=orderable) == [keys[1], keys[2], keys[0]]
