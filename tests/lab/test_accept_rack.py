"""`dltestbed accept --level quick` with its defaults (every node at once) on a rack's three common faults, on lab
hosts that each have a share of the cores of their own (`lab up --capacity`, as nodes of a rack have): two dead nodes
beside four good ones (one mended later and resumed), a node left with one CPU among two-CPU peers, and a healthy
node slowed by a load beside its workload in the first pass only. Every node judged; the dead ones named; the
mended one measured beside controls on --resume; the one-CPU node failed on drift and on speed against controls
that ran beside it; the loaded node cleared by its controls, which ran at the same time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
import yaml

from dltestbed import lab
from dltestbed.lab import LabSpec
from dltestbed.lab.state import LabState
from tests.lab.conftest import accept_argv, leftovers, ssh, this_checkout

NAME = "tr"
SUBNET = "10.213.85.0/24"  # its own: test 1 runs beside the other stream's labs
GOOD = [f"{NAME}-h{i}" for i in range(1, 5)]
ONE_CPU = f"{NAME}-h5"  # its processes pinned to CPU 0, as cores disabled in firmware would leave it
DOWN = f"{NAME}-h6"  # a healthy host whose link is down: dead, until it is mended
DEAD = f"{NAME}-d1"  # an address with no host behind it
DEAD_IP = "10.213.85.201"
# the healthy nodes' img/s differ by up to about 12 % between passes on these shared cores; the faults here take
# a third or more
SLOWDOWN = "20"
# the dead nodes' test runs in a CI stream, beside the other stream's tests: its nodes are measured at once (the
# mended one beside controls), so a load from outside slows them alike; only its healthy nodes' speed is judged
BESIDE_SLOWDOWN = "50"


@pytest.fixture(scope="module")
def rack(lab_dir: Path) -> Iterator[LabState]:
    """Six lab hosts, each with a fixed share of the cores in proportion to its CPUs, sharing this checkout's
    venv; host 5 on CPU 0 alone (half the others' share)."""
    assert len(os.sched_getaffinity(0)) >= 2, "the one-CPU node needs peers with more: 2 or more CPUs here"
    lab.down(NAME)
    state = lab.up(
        LabSpec(name=NAME, hosts=6, subnet=SUBNET, cpus=(("5", "0"),), shares=this_checkout(), capacity=True)
    )
    yield state
    lab.down(NAME)
    assert not leftovers(NAME)


def _inventory(state: LabState, folder: Path, nodes: list[str], dead: bool = False) -> Path:
    """The lab's inventory narrowed to `nodes` (with the dead addresses beside them), its venv this checkout's."""
    doc = yaml.safe_load(state.inventory.read_text())
    hosts = doc["all"]["children"]["bare_metal"]["hosts"]
    kept = {n: hosts[n] for n in nodes}
    if dead:
        kept[DEAD] = {"ansible_host": DEAD_IP}
    doc["all"]["children"]["bare_metal"]["hosts"] = kept
    doc["all"]["vars"] |= {"dltestbed_venv": sys.prefix, "dltestbed_venv_shared": True}
    path = folder / "rack.yml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _accept(inv: Path, out: Path, results: Path, *more: str, slowdown: str = SLOWDOWN) -> list[str]:
    return accept_argv(inv, out, results, "--slowdown", slowdown, *more)


def _verdicts(doc: dict) -> dict[str, str]:
    return {n["node"]: n["verdict"] for n in doc["nodes"]}


def _reasons(doc: dict, node: str) -> list[dict]:
    return next(n["reasons"] for n in doc["nodes"] if n["node"] == node)


def _link(state: LabState, node: str, up: bool) -> None:
    """A lab host's link on the bridge, up or down (down: nothing reaches it, as a dead node)."""
    veth = next(h.veth for h in state.hosts if h.name == node)
    subprocess.run(["ip", "link", "set", veth, "up" if up else "down"], check=True)


@pytest.mark.timeout(1800)  # three acceptances: about 5 min alone, longer beside the other CI stream
def test_two_dead_nodes_are_named_the_four_good_ones_judged_and_a_mended_one_resumed(
    rack: LabState, tmp_path: Path
) -> None:
    inv = _inventory(rack, tmp_path, [*GOOD, DOWN], dead=True)
    out, results = tmp_path / "pack", tmp_path / "results.sqlite"
    _link(rack, DOWN, up=False)
    try:
        proc = subprocess.run(
            _accept(inv, out, results, slowdown=BESIDE_SLOWDOWN), capture_output=True, text=True, timeout=1500
        )
        print(proc.stderr[-5000:])  # shown with -s, or when it fails
        assert proc.returncode == 3, proc.stderr[-4000:]
        doc = json.loads(proc.stdout)
        assert _verdicts(doc) == {**dict.fromkeys(GOOD, "pass"), DOWN: "cannot judge", DEAD: "cannot judge"}
        for node in (DOWN, DEAD):
            (r,) = _reasons(doc, node)
            assert r["check"] == "stage provision"
            assert (
                r["why"].startswith("not measured: left out at stage provision: ") and "accept --resume" in r["action"]
            )
        assert "provision: 2 of 6 node(s) not provisioned" in proc.stderr
        cases = {(s.get("name"), c.get("name")): c for s in ET.parse(out / "junit.xml").getroot() for c in s}
        for node in (DOWN, DEAD):
            assert cases[(f"node {node}", "stage provision")].find("error") is not None  # cannot judge: never a pass
        assert all(cases[(f"node {n}", "runs")].find("failure") is None for n in GOOD)
        # the pairs: each good node in one pair, both pairs in one round, at the same time
        stages = json.loads((out / "accept-state.json").read_text())["stages"]
        (pairs_bench,) = stages["pairs"]["benches"]
        pairs = sorted(sorted(p[:2]) for p in stages["pairs"]["data"]["pairs"])
        assert pairs == [GOOD[:2], GOOD[2:]]
        spans = _spans(results, pairs_bench)
        assert len(spans) == 4 and _overlap(list(spans.values())), spans

        # the site's choice: a dead node fails. Nothing of the good nodes is measured again
        again = _accept(inv, out, results, "--resume", "--unreachable", "fail", slowdown=BESIDE_SLOWDOWN)
        proc = subprocess.run(again, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 1, proc.stderr[-3000:]
        doc = json.loads(proc.stdout)
        assert _verdicts(doc) == {**dict.fromkeys(GOOD, "pass"), DOWN: "fail", DEAD: "fail"}
        assert "stage measure: done before" in proc.stderr and "stage rejoin: the nodes left out" in proc.stderr
        assert _reasons(doc, DOWN)[0]["check"] == "stage rejoin"  # tried again, still down
    finally:
        _link(rack, DOWN, up=True)

    # mended: resumed, it is provisioned, read and measured beside controls at the same time, and passes
    proc = subprocess.run(
        _accept(inv, out, results, "--resume", slowdown=BESIDE_SLOWDOWN), capture_output=True, text=True, timeout=1500
    )
    print(proc.stderr[-5000:])
    assert proc.returncode == 3, proc.stderr[-4000:]  # the dead address is still dead
    doc = json.loads(proc.stdout)
    assert _verdicts(doc) == {**dict.fromkeys(GOOD, "pass"), DOWN: "pass", DEAD: "cannot judge"}, doc["nodes"]
    mended = [r for r in _reasons(doc, DOWN) if "once mended (--resume)" in r["why"]]
    assert mended and all("measured at the same time" in r["why"] for r in mended), _reasons(doc, DOWN)
    assert any(r["check"] == "drift" and r["verdict"] == "pass" for r in _reasons(doc, DOWN))
    rejoin = json.loads((out / "accept-state.json").read_text())["stages"]["rejoin"]["data"]
    assert rejoin["rejoined"] == [DOWN] and len(rejoin["controls"]) >= 2
    # a measure slow beside the controls (noise on these shared cores, or a fault) is measured again beside them
    assert all(b["nodes"] == [DOWN] for b in rejoin["again"]["batches"]), rejoin["again"]
    model = next(b for b in rejoin["measure"] if _spans(results, b, models_only=True))
    spans = _spans(results, model, models_only=True)
    assert set(spans) == {DOWN, *rejoin["controls"]} and _overlap(list(spans.values())), spans


@pytest.mark.quiet
def test_one_cpu_fails_on_drift_and_speed_and_a_loaded_node_is_cleared_by_its_controls(
    rack: LabState, tmp_path: Path
) -> None:
    """Five nodes: three healthy; one left with one CPU (drift and speed, in both passes); one healthy node slowed
    by a busy loop in its own share of the cores during the first pass only. Both suspects are rerun at the same
    time as the three healthy ones, their controls: the one-CPU node fails, the loaded one is cleared."""
    loaded = GOOD[3]
    inv = _inventory(rack, tmp_path, [*GOOD, ONE_CPU])
    out, results = tmp_path / "pack", tmp_path / "results.sqlite"
    busy = "setsid nohup taskset -c 0 sh -c 'while :; do :; done' >/dev/null 2>&1 </dev/null & echo $!"
    hog = ssh(rack, loaded, busy)  # in that host's cgroup: it takes from that host's share alone
    assert hog.returncode == 0 and hog.stdout.strip().isdigit(), hog.stderr
    err_path = tmp_path / "accept.err"
    with err_path.open("w") as err:
        proc = subprocess.Popen(_accept(inv, out, results), stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            deadline = time.monotonic() + 1200
            while "stage pairs:" not in err_path.read_text():  # the first pass has ended: the load goes
                assert proc.poll() is None and time.monotonic() < deadline, err_path.read_text()[-3000:]
                time.sleep(0.5)
            assert ssh(rack, loaded, f"kill {hog.stdout.strip()}").returncode == 0
            stdout, _ = proc.communicate(timeout=1200)
        finally:
            if proc.poll() is None:
                proc.kill()
    said = err_path.read_text()
    print(said[-5000:])
    assert proc.returncode == 1, said[-4000:]
    doc = json.loads(stdout)
    assert _verdicts(doc) == {**dict.fromkeys(GOOD, "pass"), ONE_CPU: "fail"}, doc["nodes"]
    failed = {r["check"]: r for r in _reasons(doc, ONE_CPU) if r["verdict"] == "fail"}
    assert failed["drift cpus_usable"]["why"] == "CPUs usable 1, where 4 of 5 nodes have 2", failed
    controls = doc["second_pass"]["controls"]
    assert sorted(controls) == GOOD[:3], doc["second_pass"]
    slow = [r for c, r in failed.items() if c.endswith("img/s")]
    assert slow, failed
    for r in slow:
        assert "the second pass measured it" in r["why"] and "measured at the same time" in r["why"], r
        assert all(c in r["why"] for c in controls)
    cleared = [r for r in _reasons(doc, loaded) if "cleared by the second pass" in r["why"]]
    assert cleared and all("measured at the same time" in r["why"] for r in cleared), _reasons(doc, loaded)
    (batch,) = doc["second_pass"]["batches"]
    assert sorted(batch["suspects"]) == sorted([loaded, ONE_CPU])
    # the controls ran at the same time as the suspects, not after: every model run of the batch overlaps the others
    model = next(b for b in batch["benches"] if _spans(results, b, models_only=True))
    spans = _spans(results, model, models_only=True)
    assert set(spans) == {loaded, ONE_CPU, *controls} and _overlap(list(spans.values())), spans


def _spans(results: Path, bench: str, models_only: bool = False) -> dict[str, tuple[float, float]]:
    """Each host's run of a bench (its model runs only, when asked): (started, finished), seconds since the epoch."""
    from datetime import datetime

    from dltestbed.results.store import Store

    store = Store.open(results, read_only=True)
    try:
        runs = [r for r in store.runs(bench_id=bench) if r.role == "foreground" and r.finished_at]
    finally:
        store.close()
    return {
        r.host: (
            datetime.fromisoformat(r.started_at).timestamp(),
            datetime.fromisoformat(str(r.finished_at)).timestamp(),
        )
        for r in runs
        if not models_only or not r.is_probe
    }


def _overlap(spans: list[tuple[float, float]]) -> bool:
    """Whether every span overlaps every other: the latest start comes before the earliest end."""
    return max(s for s, _ in spans) < min(f for _, f in spans)
