"""The same answer everywhere: per-step results recorded, carried, stored, and deterministic runs compared
step by step with bare metal (report/agreement.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from dltestbed.config import spec_json, workload_spec
from dltestbed.report import agreement, analysis, render
from dltestbed.results import points
from dltestbed.results.store import Store
from dltestbed.workload.args import parse
from dltestbed.workload.codec import encode, parse_line
from dltestbed.workload.events import StepEvent, Unparsed
from tests.conftest import make_run

FP = {"tensorflow": "2.20.0", "keras": "3.12", "cpu_model": "Xeon", "cpu_affinity": 2, "gpus_visible_to_tf": 0}


def _steps(values: list[float]) -> list[StepEvent]:
    return [StepEvent(i, "timed", 8, 0.1, 80.0, float(i), result=v) for i, v in enumerate(values)]


def _run(kind: str = "bm", fp: dict[str, Any] | None = None, **kw: Any) -> Any:
    return make_run(
        target_kind=kind, math="float32", spec={"deterministic": True, "seed": 0}, fingerprint=fp or FP, **kw
    )


LOSSES = [2.30, 2.28, 2.25, 2.21, 2.18, 2.15, 2.11, 2.09, 2.05, 2.02]


def test_a_step_result_travels_and_is_stored_bit_for_bit_even_nan(tmp_path: Path) -> None:
    loss = 2.3098464012145996
    for value in (loss, math.nan, math.inf):
        ev = parse_line(encode(StepEvent(0, "timed", 8, 0.1, 80.0, 1.0, result=value)))
        assert isinstance(ev, StepEvent)
        assert ev.result == value or (math.isnan(value) and ev.result is not None and math.isnan(ev.result))
    assert isinstance(
        parse_line(
            '{"v":1,"event":"step","index":0,"phase":"timed","images":8,"seconds":0.1,'
            '"images_per_sec":80,"t":1,"result":"bogus"}'
        ),
        Unparsed,
    )
    store = Store.open(tmp_path / "r.sqlite")
    run = make_run()
    store.save_run(run)
    for ev in _steps([loss, math.nan]):
        store.add_step(run.id, ev)
    got = store.steps(run.id)
    assert got[0].result == loss and got[1].result is not None and math.isnan(got[1].result)
    assert f"result={loss!r}" in points.step_line(run, got[0])
    assert "result=" not in points.step_line(run, got[1])  # line protocol has no NaN: left out, never 0


def test_deterministic_travels_to_the_workload_and_back() -> None:
    spec = workload_spec(model="alexnet", image_size=64, deterministic=True)
    assert '"deterministic":true' in spec_json(spec)
    parsed, _ = parse(["--spec", spec_json(spec)])
    assert parsed.deterministic and parsed == spec
    assert "deterministic" not in spec_json(workload_spec(model="alexnet"))


def test_compare_finds_the_first_step_beyond_the_tolerance() -> None:
    drifted = LOSSES[:6] + [v * (1 + 0.05) for v in LOSSES[6:]]  # wrong from step 6 on
    n, identical, max_abs, max_rel, first = agreement.compare(drifted, LOSSES, (1e-5, 1e-3))
    assert (n, identical, first) == (10, False, 6)
    assert math.isclose(max_rel, 0.05 / 1.05, rel_tol=1e-9) and max_abs > 0.1
    tiny = [v * (1 + 1e-7 * i) for i, v in enumerate(LOSSES)]
    assert agreement.compare(tiny, LOSSES, (1e-5, 1e-3))[1] is False
    assert agreement.compare(tiny, LOSSES, (1e-5, 1e-3))[4] is None  # within
    assert agreement.compare(tiny, LOSSES, (0.0, 0.0))[4] == 1  # bit for bit asked: step 1 is the first to differ
    assert agreement.compare(list(LOSSES), LOSSES, (0.0, 0.0))[:2] == (10, True)
    first_off = [LOSSES[0] * (1 + 1e-4), *LOSSES[1:]]
    assert agreement.compare(first_off, LOSSES, (1e-5, 1e-3))[4] == 0  # step 0 is held to the tighter one
    nan = [*LOSSES[:3], math.nan, *LOSSES[4:]]
    assert agreement.compare(nan, LOSSES, (1.0, 1.0))[4] == 3  # a NaN is beyond any tolerance


def test_the_tolerance_follows_the_math_unit_roundoff() -> None:
    assert agreement.tolerance("float32") == (100 * 2.0**-24, agreement.DRIFT)
    assert agreement.tolerance("mixed_bfloat16")[0] == 100 * 2.0**-8
    assert agreement.tolerance("tf32") == agreement.tolerance("mixed_float16") > agreement.tolerance("float32")


def test_each_layer_against_bare_metal_identical_within_diverged_not_reproducible() -> None:
    bm = _run("bm")
    same = _run("cbm")  # same stack: must be bit for bit
    vm = _run("vm", {**FP, "cpu_model": "QEMU TCG", "cpu_affinity": 2})
    bad_vm = _run("vm", {**FP, "cpu_model": "QEMU TCG"}, host="h2")
    flaky = _run("cbm", host="h3")
    other_work = _run("cbm", batch_size=16)  # not the same work: never compared
    steps = {
        bm.id: _steps(LOSSES),
        same.id: _steps(LOSSES),
        vm.id: _steps([v * (1 + 1e-7 + 2e-4 * i) for i, v in enumerate(LOSSES)]),
        bad_vm.id: _steps(LOSSES[:4] + [v + 0.3 for v in LOSSES[4:]]),
        flaky.id: _steps([*LOSSES[:2], LOSSES[2] + 1e-09, *LOSSES[3:]]),
        other_work.id: _steps(LOSSES),
    }
    found = {a.run.id: a for a in agreement.agreements([bm, same, vm, bad_vm, flaky, other_work], steps)}
    assert set(found) == {same.id, vm.id, bad_vm.id, flaky.id}
    assert found[same.id].verdict == agreement.IDENTICAL and found[same.id].tolerance == (0, 0)
    assert found[vm.id].verdict == agreement.WITHIN and found[vm.id].differs == ("cpu_model: Xeon → QEMU TCG",)
    assert found[bad_vm.id].verdict == agreement.DIVERGED and found[bad_vm.id].first == 4
    assert found[flaky.id].verdict == agreement.NOT_REPRODUCIBLE and found[flaky.id].first == 2
    assert "at step 4" in found[bad_vm.id].describe() and "cpu_model" in found[bad_vm.id].describe()
    assert all(a.reference is bm and a.basis == "bare metal" for a in found.values())


def test_without_bare_metal_the_majority_is_the_reference() -> None:
    runs = [_run("cbm"), _run("cbm", host="h2"), _run("cbm", host="h3")]
    steps = {runs[0].id: _steps([*LOSSES[:3], 9.0, *LOSSES[4:]]), **{r.id: _steps(LOSSES) for r in runs[1:]}}
    found = agreement.agreements(runs, steps)
    assert [a.run.id for a in found] == [runs[0].id, runs[2].id]
    assert found[0].basis == "the majority (2 of 3 runs)" and found[0].first == 3
    assert found[0].reference is runs[1]


def test_runs_without_deterministic_or_results_are_not_compared() -> None:
    bm, cbm = make_run(target_kind="bm"), make_run(target_kind="cbm")
    assert agreement.agreements([bm, cbm], {bm.id: _steps(LOSSES), cbm.id: _steps(LOSSES)}) == []
    old = _run("cbm")
    assert agreement.agreements([_run("bm"), old], {old.id: _steps(LOSSES)}) == []


def test_the_report_shows_the_section_and_json() -> None:
    bm, vm = _run("bm"), _run("vm", {**FP, "cpu_model": "QEMU TCG"})
    steps = {bm.id: _steps(LOSSES), vm.id: _steps(LOSSES[:4] + [v + 0.3 for v in LOSSES[4:]])}
    a = analysis.analyse([bm, vm], steps)
    md = render.markdown(a)
    assert "## Same answer (deterministic runs, loss per step)" in md
    assert f"**error** h, vm run {vm.id}: diverged from bm run {bm.id} (bare metal) at step 4" in md
    row = next(line for line in md.splitlines() if line.startswith("| alexnet | vm |"))
    assert "| 0/1 |" in row and "| 4 |" in row and "cpu_model" in row
    got = json.loads(render.as_json(a))["agreement"]
    assert got[0]["verdict"] == "diverged" and got[0]["first_divergent_step"] == 4
