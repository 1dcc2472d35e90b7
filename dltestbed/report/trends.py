"""Whether runs are still speeding up or slowing down, judged against the machine's own wander. Pure.

A run's change over its timed steps is its Theil–Sen slope × (steps − 1) ÷ median, in % (inference.steady_state).
Its own interval assumes independent steps. A shared or virtual machine's speed wanders for seconds at a time,
though (on this project's 2-core VM, 300 steps of AlexNet correlated 0.56 step to step and still 0.22 ten steps
apart), and that interval calls the wander a trend: judged alone, 20 of 20 simulated benches of steady runs with
such noise flagged one (tests/unit/test_trends.py). So a trend must also stand out from the wander:

- **the wander**: how much the change varies between repetitions of one setting on one machine (a distributed
  job's workers averaged: one repetition), the pooled within-setting sample sd (one-way ANOVA's residual mean
  square, df = repetitions − settings). It assumes every setting wanders alike;
- **a run** is flagged when its own interval excludes 0 and its change lies beyond t(df) × the wander of the
  other runs (left out, so that one run's large trend cannot hide itself; with its df however few), both over
  every run judged together (Bonferroni);
- **a setting** is flagged when the mean change of its runs has a t-interval (with the pooled wander) that
  excludes 0, over the settings with 2+ runs together (Bonferroni): a warm-up that ends too soon does so in
  every repetition, a wander does not.

The two judgements share the report's 5 %: each is made at half of it, so that a bench of steady runs flags
nothing with 95 % confidence. Without a wander (no setting ran twice) a run is judged by its own interval."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from scipy import stats as st

K = TypeVar("K", bound=Hashable)  # a setting

MIN_DF = 2  # the wander needs this many degrees of freedom (e.g. 3 runs of one setting)


@dataclass(frozen=True)
class Wander:
    """How much a run's change over its timed steps varies between runs of one setting: the pooled sd, in %."""

    sd_pct: float
    df: int
    runs: int
    settings: int

    def bound(self, tests: int, confidence: float) -> float:
        """The largest change (in %, either sign) the wander explains, one of `tests` judged together."""
        return float(st.t.ppf(1 - (1 - confidence) / (2 * max(1, tests)), self.df)) * self.sd_pct

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def wander(
    changes: Mapping[K, Mapping[str, float]], leave_out: str | None = None, min_df: int = MIN_DF
) -> Wander | None:
    """The wander of the changes (setting → repetition → change in %), repetition `leave_out` left out; None
    below `min_df`."""
    ss, df, runs, settings = 0.0, 0, 0, 0
    for per_run in changes.values():
        values = [c for run, c in per_run.items() if run != leave_out]
        if len(values) < 2:
            continue
        mean = sum(values) / len(values)
        ss += sum((c - mean) ** 2 for c in values)
        df += len(values) - 1
        runs += len(values)
        settings += 1
    return Wander(math.sqrt(ss / df), df, runs, settings) if df >= max(1, min_df) else None


@dataclass(frozen=True)
class SettingTrend:
    """The mean change of a setting's runs over their timed steps, with its interval, in %."""

    runs: int
    mean_pct: float
    lo_pct: float
    hi_pct: float

    def words(self) -> str:
        """The flag in a line."""
        what = "still speeding up" if self.mean_pct > 0 else "slowing down"
        why = "warm-up too short?" if self.mean_pct > 0 else "throttling?"
        return (
            f"its setting's {self.runs} runs {what} together: {self.mean_pct:+.1f} % "
            f"[{self.lo_pct:+.1f}, {self.hi_pct:+.1f}] on average over their timed steps ({why})"
        )


def settings(
    changes: Mapping[K, Mapping[str, float]], w: Wander | None, confidence: float, band_pct: float
) -> dict[K, SettingTrend]:
    """The settings whose runs trend together: the t-interval of their mean change (pooled wander) excludes 0
    and the mean is at least band_pct, every setting with 2+ runs judged together (Bonferroni)."""
    if w is None:
        return {}
    judged = {k: list(v.values()) for k, v in changes.items() if len(v) >= 2}
    out = {}
    for k, values in judged.items():
        mean = sum(values) / len(values)
        half = w.bound(len(judged), confidence) / math.sqrt(len(values))
        if (mean - half > 0 or mean + half < 0) and abs(mean) >= band_pct:
            out[k] = SettingTrend(len(values), mean, mean - half, mean + half)
    return out
