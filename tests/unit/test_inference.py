"""The statistics on inputs with known answers (worked by hand below), and properties they must keep."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from dltestbed.report import fleet
from dltestbed.report import inference as inf
from tests.conftest import make_run

T_975_2 = 4.302652729911275  # Student t, 0.975 quantile, 2 degrees of freedom (tables)
T_975_4 = 2.7764451051977987
T_80_4 = 0.9409646980070277


def test_paired_t_interval_on_log_ratios_by_hand() -> None:
    d = [0.0, 0.1, 0.2]  # log ratios: mean 0.1, sd 0.1, n 3
    e = inf.paired([1.0, 1.0, 1.0], [math.exp(x) for x in d])
    half = T_975_2 * 0.1 / math.sqrt(3)  # 0.248414…
    assert e.method == "paired t on log ratios" and e.n == 3 and e.df == 2
    assert e.overhead_pct == pytest.approx((1 - math.exp(0.1)) * 100)  # faster by 10.5 %
    assert e.lo_pct == pytest.approx((1 - math.exp(0.1 + half)) * 100)
    assert e.hi_pct == pytest.approx((1 - math.exp(0.1 - half)) * 100)
    assert e.lo_pct == pytest.approx(-41.68, abs=0.01) and e.hi_pct == pytest.approx(13.79, abs=0.01)
    assert not e.excludes_zero


def test_welch_interval_by_hand() -> None:
    a, b = [math.exp(x) for x in (1, 2, 3)], [math.exp(x) for x in (2, 4, 6)]  # logs: means 2, 4; vars 1, 4
    e = inf.welch(a, b)
    se, df = math.sqrt(1 / 3 + 4 / 3), 50 / 17  # Welch–Satterthwaite: (5/3)² / ((1/3)²/2 + (4/3)²/2)
    assert e.method == "Welch t on log throughput" and e.df == pytest.approx(df)
    from scipy import stats

    half = stats.t.ppf(0.975, df) * se
    assert e.overhead_pct == pytest.approx((1 - math.exp(2)) * 100)
    assert (e.lo_pct, e.hi_pct) == (
        pytest.approx((1 - math.exp(2 + half)) * 100),
        pytest.approx((1 - math.exp(2 - half)) * 100),
    )


def test_sign_test_interval_of_the_median() -> None:
    # n = 10: P(B ≤ 1) = 11/1024, doubled 0.0215 ≤ 0.05; P(B ≤ 2) = 56/1024, doubled 0.109: bounds x(2), x(9)
    assert inf.median_interval(list(range(10, 0, -1))) == (2.0, 9.0, 1 - 2 * 11 / 1024)
    assert inf.median_interval([1, 2, 3, 4, 5]) is None  # n = 5 cannot reach 95 % (2/32 = 0.0625)


def test_bootstrap_is_repeatable_and_covers_the_mean() -> None:
    x = list(range(10))
    lo, hi = inf.bootstrap_interval(x, seed=7)
    assert (lo, hi) == inf.bootstrap_interval(x, seed=7)
    assert lo < 4.5 < hi and hi - lo < 9
    assert inf.bootstrap_interval([3.0] * 5) == (3.0, 3.0)


def test_minimum_detectable_effect_by_hand() -> None:
    delta = (T_975_4 + T_80_4) * 0.02 / math.sqrt(5)  # 0.033249…
    assert inf.mde_pct(0.02, 5) == pytest.approx((1 - math.exp(-delta)) * 100)
    assert inf.mde_pct(0.02, 5) == pytest.approx(3.27, abs=0.01)
    n2 = inf.repetitions_needed(0.02, 2.0)
    assert n2 is not None and inf.mde_pct(0.02, n2) <= 2.0 < inf.mde_pct(0.02, n2 - 1)


def test_verdicts_in_words() -> None:
    slower = inf.paired([100.0] * 4, [90.0, 91.0, 89.0, 90.0])
    assert inf.verdict(slower).startswith("slower by 10.0 % [") and slower.excludes_zero
    faster = inf.paired([90.0, 91.0, 89.0, 90.0], [100.0] * 4)
    assert inf.verdict(faster).startswith("faster by 11.1 % [")
    same = inf.paired([100.0, 101.0, 99.0, 100.0], [100.5, 100.0, 99.5, 100.2])
    assert inf.verdict(same).startswith(
        "no difference detectable (smallest detectable: "
    ) and "at n = 4)" in inf.verdict(same)


def test_a_a_on_identical_inputs_contains_zero() -> None:
    x = [100.0, 97.0, 103.0, 99.0]
    e = inf.paired(x, x)
    assert e.lo_pct == e.hi_pct == 0.0 and not e.excludes_zero
    assert inf.verdict(e) == "no difference detectable (smallest detectable: 0.0 % at n = 4)"


def test_an_interval_narrows_as_n_grows() -> None:
    rng = np.random.default_rng(1)
    widths = []
    for n in (4, 16, 64, 256):
        base = np.full(n, 100.0)
        layer = 97.0 * np.exp(rng.normal(0, 0.02, n))
        e = inf.paired(base, layer)
        widths.append(e.hi_pct - e.lo_pct)
    assert widths == sorted(widths, reverse=True)


def test_tost_decisions() -> None:
    base = [100.0, 100.0, 100.0, 100.0, 100.0]
    assert inf.tost(base, [99.5, 100.5, 100.0, 99.8, 100.2], 2.0) == "equivalent"
    assert inf.tost(base, [90.0, 90.5, 89.5, 90.2, 89.8], 2.0) == "not equivalent"
    assert inf.tost(base, [95.0, 105.0, 99.0, 102.0, 97.0], 2.0) == "undecided (need more repetitions)"


def test_mad_flags_the_slow_host_only() -> None:
    hosts = {"a": 100.0, "b": 101.0, "c": 99.0, "d": 100.0, "e": 80.0}  # median 100, MAD 1
    z = inf.robust_z(hosts)
    assert z["e"] == pytest.approx(0.6745 * -20) and z["b"] == pytest.approx(0.6745)
    assert inf.peer_scores(hosts)["e"].z == pytest.approx(0.6745 * -20.0 / 0.5)  # peers a–d: median 100, MAD 0.5
    assert list(inf.slow_outliers(hosts)) == ["e"]
    assert inf.slow_outliers({"a": 100.0, "b": 200.0}) == {}  # two hosts: no peers to judge by


def test_the_slow_host_is_not_masked_by_itself_and_a_fast_peer() -> None:
    """A CI run's four lab hosts: the plain modified z of h4 is −3.35 (all four's median 45.4, MAD 3.1: the
    mean of h1's and h2's deviations), so h4 went unflagged; against its peers (median 45.7, MAD 0.6) it is
    −17.6."""
    hosts = {"h1": 51.3, "h2": 45.7, "h3": 45.1, "h4": 30.0}
    assert inf.robust_z(hosts)["h4"] == pytest.approx(0.6745 * (30.0 - 45.4) / 3.1)
    scores = inf.peer_scores(hosts)
    assert scores["h4"] == (pytest.approx(0.6745 * (30.0 - 45.7) / 0.6), 45.7)
    assert scores["h3"].z == pytest.approx(0.6745 * (45.1 - 45.7) / 5.6)  # peers h1, h2, h4: median 45.7, MAD 5.6
    assert list(inf.slow_outliers(hosts)) == ["h4"]


def test_a_tight_spread_alone_makes_no_alarm() -> None:
    hosts = {"a": 100.0, "b": 100.2, "c": 99.0}  # c: peers' MAD 0.1, z −7.4, but only 1.1 % slower
    assert inf.peer_scores(hosts)["c"].z == pytest.approx(0.6745 * -1.1 / 0.1)
    assert inf.slow_outliers(hosts) == {}
    assert list(inf.slow_outliers(hosts, min_slowdown=1.0)) == ["c"]
    assert list(inf.slow_outliers({"a": 100.0, "b": 100.0, "c": 94.0})) == ["c"]  # identical peers: MAD 0, z −inf, 6 %


def test_steady_state_flags() -> None:
    rising = inf.steady_state([100 + i for i in range(20)])
    assert rising.drift_pct == pytest.approx(19 / 109.5 * 100)
    assert rising.flags()[0].startswith("still speeding up: +17.4 %")
    flat = inf.steady_state([100 + 0.5 * math.sin(i) for i in range(30)])  # wobbles, no trend, no outlier
    assert flat.flags() == []
    spiky = inf.steady_state([100.0, 100.5, 99.5, 100.2, 40.0, 100.1, 99.9, 100.3, 99.7, 100.0])
    assert spiky.outliers == (4,) and spiky.flags() == ["1 outlier step(s): 4"]


def test_bad_inputs_say_so() -> None:
    with pytest.raises(ValueError, match="at least 2 pairs"):
        inf.paired([1.0], [1.0])
    with pytest.raises(ValueError, match="positive"):
        inf.paired([1.0, 0.0], [1.0, 1.0])


def test_trends_are_judged_together_so_steady_runs_are_not_flagged() -> None:
    """Known answer: 12 steady runs (20 steps, 6 % noise) and one climbing 2 % a step, in 20 seeded benches.
    Judged one by one at 95 %, about half the benches flag a steady run; judged together (Bonferroni, and
    against the runs' wander: report/trends.py) about 1 in 20 do, and the climb is still flagged in most (one
    climbing 1.3 % a step, +25 %, was in 12 of 20: a lone run's trend must stand out from the others')."""
    alone = together = climbs = 0
    for seed in range(20):
        rng = random.Random(seed)
        runs = [make_run(id=f"r{i}", status="ok") for i in range(12)]
        timed = {r.id: [100 * (1 + rng.gauss(0, 0.06)) for _ in range(20)] for r in runs}
        timed["climb"] = [100 * (1 + 0.02 * i) * (1 + rng.gauss(0, 0.06)) for i in range(20)]
        alone += any(inf.steady_state(timed[r.id]).trend() is not None for r in runs)
        flags, _ = fleet.steady([*runs, make_run(id="climb", status="ok")], timed)
        flagged = {r.id: words for r, words in flags}
        together += any(any("speeding" in w or "slowing" in w for w in flagged.get(r.id, ())) for r in runs)
        climbs += any("speeding" in w for w in flagged.get("climb", ()))
    assert alone >= 8 and together <= 2 and climbs >= 15
