"""Trends judged against the machine's wander (report/trends.py), on inputs with known answers: the pooled sd
by hand, and seeded benches whose steps wander as this project's VM does (AR(1)), or climb in every repetition."""

from __future__ import annotations

import math
import random

import pytest
from scipy import stats as st

from dltestbed.report import fleet, trends
from dltestbed.report import inference as inf
from dltestbed.results.records import RunRecord
from tests.conftest import make_run


def test_the_wander_is_the_pooled_within_setting_sd() -> None:
    changes = {"a": {"r1": 1.0, "r2": 3.0}, "b": {"r3": 10.0, "r4": 14.0, "r5": 12.0}, "c": {"r6": 50.0}}
    w = trends.wander(changes)  # squares 2 + 8, df 1 + 2; a setting that ran once says nothing
    assert w is not None and (w.sd_pct, w.df, w.runs, w.settings) == (pytest.approx(math.sqrt(10 / 3)), 3, 5, 2)
    assert w.bound(1, 0.95) == pytest.approx(st.t.ppf(0.975, 3) * math.sqrt(10 / 3))
    assert w.bound(4, 0.95) == pytest.approx(st.t.ppf(1 - 0.05 / 8, 3) * math.sqrt(10 / 3))
    left = trends.wander(changes, leave_out="r4")  # b: 10 and 12, squares 2 + 2, df 2
    assert left is not None and left.sd_pct == pytest.approx(math.sqrt(2.0))
    assert trends.wander(changes, leave_out="r1") is not None and trends.wander({"a": {"r1": 1.0, "r2": 3.0}}) is None


def test_a_setting_is_flagged_when_its_runs_trend_together() -> None:
    changes = {"warm": {"r1": 30.0, "r2": 34.0, "r3": 32.0}, "flat": {"r4": -3.0, "r5": 1.0, "r6": 2.0}}
    w = trends.wander(changes)
    assert w is not None and w.df == 4
    flagged = trends.settings(changes, w, 0.975, 2.0)
    assert list(flagged) == ["warm"]
    half = st.t.ppf(1 - 0.025 / 4, 4) * w.sd_pct / math.sqrt(3)  # two settings judged together
    assert (flagged["warm"].lo_pct, flagged["warm"].hi_pct) == (pytest.approx(32 - half), pytest.approx(32 + half))
    assert flagged["warm"].words().startswith("its setting's 3 runs still speeding up together: +32.0 % [")
    assert trends.settings(changes, None, 0.975, 2.0) == {}


def _wandering(rng: random.Random, n: int = 20, phi: float = 0.7, cv: float = 0.12) -> list[float]:
    """images/sec of n steps whose speed wanders: AR(1) with step-to-step correlation phi, marginal cv."""
    x, out = rng.gauss(0, cv), []
    for _ in range(n):
        x = phi * x + rng.gauss(0, cv * math.sqrt(1 - phi * phi))
        out.append(100 * (1 + x))
    return out


def _bench(rng: random.Random, climb: float = 0.0) -> tuple[list[RunRecord], dict[str, list[float]]]:
    """8 settings (4 models × 2 kinds) × 3 repetitions; the first setting's runs climbing `climb` a step."""
    runs = [
        make_run(model=m, target_kind=k, repetition=i, status="ok")
        for m in ("alexnet", "resnet50", "inception3", "vgg")
        for k in ("bm", "cbm")
        for i in (1, 2, 3)
    ]
    timed = {r.id: _wandering(rng) for r in runs}
    for r in runs[:3]:
        timed[r.id] = [v * (1 + climb * i) for i, v in enumerate(timed[r.id])]
    return runs, timed


def test_a_wandering_machine_is_not_flagged_and_a_short_warmup_is() -> None:
    """20 seeded benches of steady runs whose speed wanders (step-to-step correlation 0.7, 12 % cv): each run's
    own interval (Bonferroni over the 24 runs) flags a trend in most benches; against the wander, in 2 or fewer
    (5 % is 1 in 20). A setting climbing 4 % a step in all 3 runs (+76 % over 20 steps) is flagged as a setting
    in most benches all the same."""
    own = flagged = caught = 0
    for seed in range(20):
        runs, timed = _bench(random.Random(seed))
        own += any(inf.steady_state(timed[r.id], 1 - 0.05 / len(runs)).trend() is not None for r in runs)
        flags, w = fleet.steady(runs, timed)
        assert w is not None and w.df == 16 and w.settings == 8
        flagged += any("speeding" in x or "slowing" in x for _, words in flags for x in words)
        runs, timed = _bench(random.Random(100 + seed), climb=0.04)
        flags, _ = fleet.steady(runs, timed)
        warm = {r.id for r in runs[:3]}
        caught += any(r.id in warm and any("speeding up together" in x for x in words) for r, words in flags)
    assert own >= 15 and flagged <= 2 and caught >= 16


def test_without_a_second_run_a_run_is_judged_alone() -> None:
    runs = [make_run(model=m, status="ok") for m in ("alexnet", "resnet50")]
    timed = {runs[0].id: [100.0 + 2 * i for i in range(20)], runs[1].id: [100.0 + math.sin(i) for i in range(20)]}
    flags, w = fleet.steady(runs, timed)
    assert w is None and [(r.id, words[0][:19]) for r, words in flags] == [(runs[0].id, "still speeding up: ")]


def test_three_runs_of_one_setting_judge_each_other_and_a_jobs_workers_are_one() -> None:
    """README's `-m alexnet --targets bm` (one setting, 3 repetitions): leaving a run out leaves df 1, a wide
    wander but one, so a 28 % climb among wandering repetitions is not called a trend, while a run that never
    warmed up is.
    A distributed job's workers ran in lock step: they are one repetition of the setting."""
    runs = [make_run(repetition=i, status="ok") for i in (1, 2, 3)]
    flat = [100.0 + 3 * math.sin(i) for i in range(20)]
    timed = {runs[0].id: [100.0 + 1.5 * i for i in range(20)], runs[1].id: flat, runs[2].id: flat[::-1]}
    flags, w = fleet.steady(runs, timed)
    assert w is not None and w.df == 2 and flags == []
    timed[runs[0].id] = [10.0 * 1.5**i for i in range(20)]  # a run that never warmed up: +1406 % over its steps
    flags, _ = fleet.steady(runs, timed)
    assert [r.id for r, words in flags if "still speeding up" in words[0]] == [runs[0].id]
    job = [make_run(job_id="j1", worker_index=i, workers=2, status="ok") for i in (0, 1)]
    changes = fleet._changes(job, {job[0].id: 4.0, job[1].id: 6.0})
    assert list(changes.values()) == [{"j1": 5.0}]
