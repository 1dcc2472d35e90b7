"""How sure an overhead is: intervals, verdicts in words, detectable effects, equivalence, steady state,
fleet outliers. Pure functions of numbers; distributions from scipy. Every result names its method.

Conventions. Throughput is compared as a ratio layer ÷ baseline, on the log scale (a layer's cost
is multiplicative, and log ratios are closer to normal than ratios): d = ln(layer / baseline).
An overhead in % is (1 − e^d) × 100: positive when the layer is slower, as in the report's tables.

Methods (the names rows carry):
- `paired t on log ratios`: repetition i of the baseline and of the layer ran side by side
  (interleaved), so d_i = ln(layer_i / baseline_i); interval mean(d) ± t(1−α/2, n−1)·s/√n.
- `Welch t on log throughput`: unpaired groups; the difference of mean logs with Welch's
  standard error and Welch–Satterthwaite degrees of freedom.
- `sign-test interval of the median`: distribution-free interval of the median log ratio from order
  statistics (binomial), where n allows it (n ≥ 6 at 95 %).
- `percentile bootstrap`: of the mean log ratio, a fixed seed (repeatable).
- `t-interval of the mean`: a group's mean images/sec over its repetitions, mean ± t(1−α/2, n−1)·s/√n
  (the error bars of the report's throughput figure).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

import numpy as np
from scipy import stats as st

from dltestbed.report import FLEET_MIN_SLOWDOWN, ROBUST_Z

CONFIDENCE = 0.95  # of every interval the report prints
POWER = 0.80  # for the minimum detectable effect
PAIRED_T = "paired t on log ratios"
WELCH_T = "Welch t on log throughput"
MEAN_T = "t-interval of the mean"
MIN_N = 2  # an interval needs at least two repetitions per side
TREND_MIN_STEPS = 8  # fewer timed steps say nothing about a trend
TREND_BAND_PCT = 2.0  # a change over the timed steps smaller than this is no trend, however sure


def to_percent(d: float) -> float:
    """A log ratio ln(layer / baseline) as an overhead in % (positive: the layer is slower)."""
    return (1.0 - math.exp(d)) * 100.0


@dataclass(frozen=True)
class Effect:
    """A layer's overhead against its baseline, with its interval and how it was computed."""

    method: str
    n: int  # pairs (paired) or the smaller group (Welch)
    overhead_pct: float  # point estimate, positive: slower
    lo_pct: float  # interval on the overhead, lo <= hi
    hi_pct: float
    confidence: float
    sd_log: float | None  # spread of the log ratios (paired) or pooled spread (Welch)
    df: float | None = None

    @property
    def excludes_zero(self) -> bool:
        """The interval does not contain 0: a difference is detected."""
        return self.lo_pct > 0 or self.hi_pct < 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def ratio_interval(effect: Effect) -> tuple[float, float, float]:
    """An effect as ratios of layer ÷ baseline images/sec: its estimate and its interval's low and high ends."""
    return 1 - effect.overhead_pct / 100, 1 - effect.hi_pct / 100, 1 - effect.lo_pct / 100


def _interval(method: str, n: int, mean: float, se: float, df: float, sd: float, conf: float) -> Effect:
    if se == 0.0:  # identical ratios: the interval is the point
        lo_d = hi_d = mean
    else:
        half = float(st.t.ppf(1 - (1 - conf) / 2, df)) * se
        lo_d, hi_d = mean - half, mean + half
    # a larger log ratio is a faster layer, so the interval's ends swap on the overhead scale
    return Effect(method, n, to_percent(mean), to_percent(hi_d), to_percent(lo_d), conf, sd, df)


def log_ratios(baseline: Sequence[float], layer: Sequence[float]) -> np.ndarray:
    """ln(layer_i / baseline_i) for pairs of positive throughputs."""
    b, x = np.asarray(baseline, dtype=float), np.asarray(layer, dtype=float)
    if b.shape != x.shape:
        raise ValueError("paired samples need the same length")
    if (b <= 0).any() or (x <= 0).any():
        raise ValueError("throughputs must be positive")
    return np.log(x / b)


def paired(baseline: Sequence[float], layer: Sequence[float], conf: float = CONFIDENCE) -> Effect:
    """The overhead from paired repetitions: t-interval of the mean log ratio."""
    d = log_ratios(baseline, layer)
    n = len(d)
    if n < MIN_N:
        raise ValueError(f"a paired interval needs at least {MIN_N} pairs; got {n}")
    sd = float(np.std(d, ddof=1))
    return _interval(PAIRED_T, n, float(np.mean(d)), sd / math.sqrt(n), n - 1, sd, conf)


def welch(baseline: Sequence[float], layer: Sequence[float], conf: float = CONFIDENCE) -> Effect:
    """The overhead from unpaired groups: Welch's t-interval of the difference of mean logs."""
    b, x = np.log(np.asarray(baseline, dtype=float)), np.log(np.asarray(layer, dtype=float))
    diff, se, df = welch_terms(b, x)
    pooled = math.sqrt((float(np.var(b, ddof=1)) + float(np.var(x, ddof=1))) / 2)
    return _interval(WELCH_T, min(len(b), len(x)), diff, se, df, pooled, conf)


def welch_terms(baseline: Sequence[float], layer: Sequence[float]) -> tuple[float, float, float]:
    """(layer's mean − baseline's, Welch's standard error of it, Welch–Satterthwaite degrees of freedom); a
    ValueError below MIN_N values a side."""
    b, x = np.asarray(baseline, dtype=float), np.asarray(layer, dtype=float)
    nb, nx = len(b), len(x)
    if min(nb, nx) < MIN_N:
        raise ValueError(f"a Welch interval needs at least {MIN_N} runs per side; got {nb} and {nx}")
    vb, vx = float(np.var(b, ddof=1)) / nb, float(np.var(x, ddof=1)) / nx
    se = math.sqrt(vb + vx)
    df = (vb + vx) ** 2 / (vb**2 / (nb - 1) + vx**2 / (nx - 1)) if se > 0 else float(nb + nx - 2)
    return float(np.mean(x) - np.mean(b)), se, df


def t_interval(mean: float, se: float, df: float, conf: float = CONFIDENCE) -> tuple[float, float]:
    """mean ± Student t's two-sided quantile × se (the point itself when se is 0)."""
    half = float(st.t.ppf(1 - (1 - conf) / 2, df)) * se if se > 0 else 0.0
    return mean - half, mean + half


def mean_interval(values: Sequence[float], conf: float = CONFIDENCE) -> tuple[float, float] | None:
    """Student t-interval of the mean of repeated measurements; None below MIN_N values."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n < MIN_N:
        return None
    mean, se = float(np.mean(x)), float(np.std(x, ddof=1)) / math.sqrt(n)
    half = float(st.t.ppf(1 - (1 - conf) / 2, n - 1)) * se
    return mean - half, mean + half


def median_interval(values: Sequence[float], conf: float = CONFIDENCE) -> tuple[float, float, float] | None:
    """Distribution-free interval of the median (sign test): (lo, hi, confidence reached), or None when
    n is too small to reach `conf` (n < 6 at 95 %)."""
    x = np.sort(np.asarray(values, dtype=float))
    n = len(x)
    alpha = 1 - conf
    k = 0  # the largest k with P(B <= k-1) * 2 <= alpha, B ~ Binomial(n, 1/2); bounds x_(k), x_(n-k+1)
    for j in range(1, n // 2 + 1):
        if 2 * st.binom.cdf(j - 1, n, 0.5) <= alpha:
            k = j
    if k == 0:
        return None
    return float(x[k - 1]), float(x[n - k]), float(1 - 2 * st.binom.cdf(k - 1, n, 0.5))


def bootstrap_interval(
    values: Sequence[float], conf: float = CONFIDENCE, resamples: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean, repeatable (fixed seed)."""
    x = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = rng.choice(x, size=(resamples, len(x)), replace=True).mean(axis=1)
    return float(np.quantile(means, (1 - conf) / 2)), float(np.quantile(means, 1 - (1 - conf) / 2))


def mde_pct(sd_log: float, n: int, conf: float = CONFIDENCE, power: float = POWER) -> float:
    """The smallest slowdown (in %) a paired comparison of n repetitions detects with this power, given
    the spread of log ratios: (t(1−α/2, n−1) + t(power, n−1)) · s/√n on the log scale."""
    if n < MIN_N:
        return math.inf
    delta = (float(st.t.ppf(1 - (1 - conf) / 2, n - 1)) + float(st.t.ppf(power, n - 1))) * sd_log / math.sqrt(n)
    return to_percent(-delta)


def repetitions_needed(
    sd_log: float, effect_pct: float, conf: float = CONFIDENCE, power: float = POWER, limit: int = 10_000
) -> int | None:
    """The fewest paired repetitions that detect a slowdown of effect_pct %; None past `limit`."""
    if sd_log == 0:
        return MIN_N
    for n in range(MIN_N, limit + 1):
        if mde_pct(sd_log, n, conf, power) <= effect_pct:
            return n
    return None


def estimate_cell(effect: Effect | None) -> str:
    """An effect in a table's cell: its estimate and interval, in %, e.g. `12.3 [8.1, 16.2]`; `—` where there is
    none."""
    return f"{effect.overhead_pct:.1f} [{effect.lo_pct:.1f}, {effect.hi_pct:.1f}]" if effect else "—"


def verdict(effect: Effect, power: float = POWER) -> str:
    """The row's answer in words; a difference is called real only when its interval excludes 0."""
    if effect.lo_pct > 0:
        return f"slower by {effect.overhead_pct:.1f} % [{effect.lo_pct:.1f}, {effect.hi_pct:.1f}]"
    if effect.hi_pct < 0:
        return f"faster by {-effect.overhead_pct:.1f} % [{-effect.hi_pct:.1f}, {-effect.lo_pct:.1f}]"
    if effect.sd_log is None:
        return "no difference detectable"
    sd = effect.sd_log * (math.sqrt(2) if effect.method == WELCH_T else 1.0)  # two groups' noise, not one
    mde = mde_pct(sd, effect.n, effect.confidence, power)
    return f"no difference detectable (smallest detectable: {mde:.1f} % at n = {effect.n})"


def tost(
    baseline: Sequence[float], layer: Sequence[float], margin_pct: float, paired_runs: bool = True, alpha: float = 0.05
) -> str:
    """Two one-sided tests at level alpha: is the layer within ±margin_pct % of the baseline?
    equivalent: the (1−2α) interval lies inside the margin; not equivalent: the (1−α) interval lies
    wholly outside it; undecided otherwise (more repetitions would decide)."""
    f = paired if paired_runs else welch
    inner, outer = f(baseline, layer, 1 - 2 * alpha), f(baseline, layer, 1 - alpha)
    if -margin_pct < inner.lo_pct and inner.hi_pct < margin_pct:
        return "equivalent"
    if outer.lo_pct > margin_pct or outer.hi_pct < -margin_pct:
        return "not equivalent"
    return "undecided (need more repetitions)"


def cv(values: Sequence[float]) -> float | None:
    """Coefficient of variation (sample std ÷ mean); None below two values."""
    x = np.asarray(values, dtype=float)
    if len(x) < MIN_N or float(np.mean(x)) == 0:
        return None
    return float(np.std(x, ddof=1) / np.mean(x))


def robust_z(values: Mapping[str, float]) -> dict[str, float]:
    """Modified z-score of each value against all the values' median and MAD: 0.6745·(x − median) / MAD
    (Iglewicz & Hoaglin). A MAD of 0 (identical values) gives 0 for the median's equals and ±inf for the rest."""
    names = list(values)
    x = np.asarray([values[k] for k in names], dtype=float)
    med = float(np.median(x))
    mad = float(np.median(np.abs(x - med)))
    return {k: _z(float(v), med, mad) for k, v in zip(names, x, strict=True)}


class PeerScore(NamedTuple):
    """A value against its peers (every other value): the leave-one-out modified z and the peers' median."""

    z: float
    median: float


def peer_scores(values: Mapping[str, float]) -> dict[str, PeerScore]:
    """Leave-one-out modified z-score: each value against its peers' median and MAD (every value but its
    own). With few values the plain score is masked by the outlier itself: with 4 hosts, the MAD is the
    mean of the 2nd and 3rd smallest deviations, so one slow host and one fast one make the MAD. Needs 3+."""
    if len(values) < 3:
        return {}
    out = {}
    for k, v in values.items():
        x = np.asarray([p for name, p in values.items() if name != k], dtype=float)
        med = float(np.median(x))
        out[k] = PeerScore(_z(v, med, float(np.median(np.abs(x - med)))), med)
    return out


def _z(v: float, med: float, mad: float) -> float:
    if mad == 0:
        return 0.0 if v == med else math.copysign(math.inf, v - med)
    return 0.6745 * (v - med) / mad


def slow_outliers(
    values: Mapping[str, float], threshold: float = ROBUST_Z, min_slowdown: float = FLEET_MIN_SLOWDOWN
) -> dict[str, PeerScore]:
    """The names below their peers beyond the peers' spread (leave-one-out modified z < −threshold) and by
    at least `min_slowdown` % of the peers' median (a spread of 0.1 % must not make 1 % an alarm), with
    their scores; needs 3+."""
    return {
        k: sc
        for k, sc in peer_scores(values).items()
        if sc.z < -threshold and sc.median > 0 and (1 - values[k] / sc.median) * 100 >= min_slowdown
    }


@dataclass(frozen=True)
class SteadyState:
    """What the timed steps of one run show."""

    steps: int
    drift_pct: float | None  # Theil–Sen slope × (steps − 1) ÷ median, in % of the median: the change over the run
    drift_lo_pct: float | None
    drift_hi_pct: float | None
    outliers: tuple[int, ...]  # indices of steps whose images/sec is beyond ROBUST_Z from the median

    def trend(self, min_drift_pct: float = TREND_BAND_PCT, beyond_pct: float = 0.0) -> float | None:
        """The change over the run in %, where it is a trend: the slope's interval excludes 0 and the change
        is at least min_drift_pct % and more than beyond_pct % (what the machine's wander explains,
        report/trends.py). None: no trend."""
        if self.drift_pct is None or self.drift_lo_pct is None or self.drift_hi_pct is None:
            return None
        size = abs(self.drift_pct)
        trending = (self.drift_lo_pct > 0 or self.drift_hi_pct < 0) and size >= min_drift_pct and size > beyond_pct
        return self.drift_pct if trending else None

    def flags(
        self, min_drift_pct: float = TREND_BAND_PCT, slower_because: str | None = None, beyond_pct: float = 0.0
    ) -> list[str]:
        """Words for what is wrong: a trend (beyond `beyond_pct`, see trend), outlier steps. `slower_because`:
        what explains a slowing run (its GPU's samples), said instead of the question "throttling?"."""
        out = []
        drift = self.trend(min_drift_pct, beyond_pct)
        if drift is not None and drift > 0:
            out.append(f"still speeding up: +{drift:.1f} % over its timed steps (warm-up too short?)")
        elif drift is not None:
            out.append(f"slowing down: {drift:.1f} % over its timed steps ({slower_because or 'throttling?'})")
        if self.outliers:
            out.append(f"{len(self.outliers)} outlier step(s): {', '.join(map(str, self.outliers[:5]))}")
        return out


def steady_state(images_per_sec: Sequence[float], confidence: float = CONFIDENCE) -> SteadyState:
    """Trend (Theil–Sen slope with its interval at `confidence`) and outlier steps (modified z) of a run's timed
    steps."""
    y = np.asarray(images_per_sec, dtype=float)
    n = len(y)
    z = robust_z({str(i): float(v) for i, v in enumerate(y)}) if n >= 3 else {}
    outliers = tuple(int(k) for k, v in z.items() if abs(v) > ROBUST_Z)
    if n < TREND_MIN_STEPS:
        return SteadyState(n, None, None, None, outliers)
    slope, _, lo, hi = st.theilslopes(y, np.arange(n), alpha=confidence)
    med = float(np.median(y))
    scale = (n - 1) / med * 100.0
    return SteadyState(n, float(slope) * scale, float(lo) * scale, float(hi) * scale, outliers)
