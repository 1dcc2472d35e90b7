"""The verdict gate on stored runs: a reference made from a trusted bench passes it, a slower bench fails
with JUnit XML naming the failing case, and what cannot be judged is never a pass."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from dltestbed.errors import ConfigError
from dltestbed.report import validate as v
from dltestbed.report.analysis import analyse
from dltestbed.report.validate_init import init_reference
from dltestbed.results.store import Store
from tests.conftest import make_run, one_error_line, run_cli

KEY = {"model": "alexnet", "mode": "train", "data": "synthetic", "batch_size": 8, "image_size": 64}


def bench(bench_id: str, bm: list[float], cbm: list[float], day: str) -> list:
    runs = []
    for kind, values in (("bm", bm), ("cbm", cbm)):
        for rep, ips in enumerate(values, 1):
            runs.append(
                make_run(
                    target_kind=kind,
                    bench_id=bench_id,
                    repetition=rep,
                    images_per_sec=ips,
                    status="ok",
                    started_at=f"2026-01-{day}T00:00:{rep:02d}+00:00",
                )
            )
    return runs


TRUSTED = bench("b-trusted", [100.0, 101.0, 99.0, 100.5, 99.5], [99.0, 100.2, 98.1, 99.6, 98.4], "01")
SLOWER = bench("b-slower", [100.0, 101.0, 99.0, 100.5, 99.5], [60.0, 61.0, 59.5, 60.5, 59.0], "02")


def test_a_reference_from_a_trusted_bench_passes_it_and_fails_a_slower_one() -> None:
    ref = v.Reference.model_validate(init_reference(analyse(TRUSTED)))
    assert [c.match.kind for c in ref.checks] == ["bm", "cbm"] and ref.checks[1].max_overhead_percent is not None
    ok = v.judge(ref, analyse(TRUSTED))
    assert [j.status for j in ok] == ["pass", "pass", "pass"]
    bad = v.judge(ref, analyse(SLOWER))
    assert [(j.what, j.status) for j in bad] == [
        ("images_per_sec", "pass"),
        ("images_per_sec", "fail"),
        ("max_overhead_percent", "fail"),
    ]
    suite = ET.fromstring(v.junit_xml(bad))
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "2", "0")
    failing = [c.get("name") for c in suite if c.find("failure") is not None]
    assert failing == ["cbm alexnet train synthetic b8 64px", "cbm alexnet train synthetic b8 64px"]


def test_what_cannot_be_judged_is_its_own_status() -> None:
    ref = v.Reference.model_validate(
        {
            "checks": [
                {"name": "one run only", "match": {"kind": "bm", **KEY}, "images_per_sec": 100},
                {"name": "no baseline", "match": {"kind": "vm", **KEY}, "max_overhead_percent": 5},
                {
                    "name": "straddles",
                    "match": {"kind": "cbm", **KEY},
                    "images_per_sec": 100,
                    "lower_tolerance_percent": 1,
                },
            ]
        }
    )
    runs = [
        make_run(target_kind="bm", images_per_sec=100.0, status="ok"),
        *[
            make_run(target_kind="cbm", repetition=i, images_per_sec=x, status="ok")
            for i, x in enumerate([90.0, 110.0, 95.0], 1)
        ],
    ]
    out = v.judge(ref, analyse(runs))
    assert [j.status for j in out] == ["cannot judge"] * 3
    assert out[0].evidence == "1 ok run(s) match; 2 are needed for an interval"
    assert ET.fromstring(v.junit_xml(out)).get("errors") == "3"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("checks: []", "reference r.yml: (top): Value error, give checks and/or health"),
        ("health: {no_xid: maybe}", "reference r.yml: health.no_xid: Input should be a valid boolean"),
        ("health: {power_limit_watts: 0}", "reference r.yml: health.power_limit_watts: Input should be greater than 0"),
        (
            "checks: [{name: a, match: {kind: bm, model: alexnet}}]",
            "reference r.yml: checks.0: Value error, give images_per_sec and/or max_overhead_percent",
        ),
        (
            "checks: [{name: a, match: {kind: bm, model: alexnet}, images_per_sec: 1, eval: x}]",
            "reference r.yml: checks.0.eval: Extra inputs are not permitted",
        ),
        ("checks: [", "reference r.yml: not YAML ("),
    ],
)
def test_bad_references_are_one_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        v.parse_reference(text, "r.yml")
    assert str(err.value).startswith(message)


def test_validate_cli_exit_codes_and_junit(results: Path, tmp_path: Path) -> None:
    store = Store.open(results)
    for r in TRUSTED:
        store.save_run(r)
    store.close()
    ref, junit = tmp_path / "ref.yml", tmp_path / "junit.xml"
    init = run_cli("validate", "--init", "--reference", str(ref), "--results", str(results))
    assert init.returncode == 0 and "reference with 2 check(s) from bench b-trusted" in init.stderr
    proc = run_cli("validate", "--reference", str(ref), "--results", str(results), "--format", "json")
    assert proc.returncode == 0 and "3 passed, 0 failed, 0 cannot be judged" in proc.stderr
    assert [j["status"] for j in json.loads(proc.stdout)["judgements"]] == ["pass"] * 3
    store = Store.open(results)
    for r in SLOWER:
        store.save_run(r)
    store.close()
    proc = run_cli("validate", "--reference", str(ref), "--results", str(results), "--junit", str(junit))
    assert proc.returncode == 1 and "| cbm alexnet train synthetic b8 64px | images_per_sec | fail |" in proc.stdout
    assert ET.parse(junit).getroot().get("failures") == "2"
    line = one_error_line(run_cli("validate", "--results", str(results)))
    assert line == "error: --reference FILE: the reference to judge against (or to write, with --init)"


def test_a_check_on_math_mixed_takes_what_mixed_resolved_to() -> None:
    """A run records the math it used: `match: {math: mixed}` judges runs that computed in mixed_bfloat16."""
    ref = v.Reference.model_validate(
        {"checks": [{"name": "mixed", "match": {"kind": "bm", "math": "mixed", **KEY}, "images_per_sec": 100}]}
    )
    runs = [
        make_run(repetition=i, images_per_sec=x, status="ok", math="mixed_bfloat16")
        for i, x in enumerate([99.0, 101.0, 100.0], 1)
    ]
    (judged,) = v.judge(ref, analyse(runs))
    assert judged.status == "pass", judged
    float32 = [make_run(repetition=i, images_per_sec=100.0 + i, status="ok", math="float32") for i in (1, 2, 3)]
    assert v.judge(ref, analyse(float32))[0].status == "cannot judge"
