"""Warm-up until steady: a run's warm-up ends once its last WINDOW steps show no trend by the test the report
flags a run with, taken alone ("still speeding up"; the report judges its runs together): the Theil–Sen
slope of images/sec with its 95 % interval (Sen 1968, the normal approximation of Kendall's S, as
scipy.stats.theilslopes computes it), a trend being an interval
that excludes 0 and a change over the window of at least BAND_PCT %. At most CAP warm-up steps. Pure Python:
the workload does not load scipy."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist, median

# the last steps judged: 10 ended the warm-up of a run climbing 1.3 % a step under 6 % noise at once (the slope's
# interval over 10 steps is the middle half of their pairwise slopes), and its timed steps were flagged; 20 sees
# such a climb (tests/unit/test_steady.py), and costs a flat run 10 more steps
WINDOW = 20
BAND_PCT = 2.0  # a change over the window smaller than this is no trend (the report's own bar)
CAP = 200  # at most this many warm-up steps: a run that never settles is measured, and flagged by the report
CONFIDENCE = 0.95


def theil_sen(y: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """The Theil–Sen slope of y over 0..n−1 and its interval at `confidence` (scipy.stats.theilslopes's
    'separate' method, ties in y counted)."""
    n = len(y)
    slopes = sorted((y[j] - y[i]) / (j - i) for i in range(n) for j in range(i + 1, n))
    if not slopes:
        raise ValueError("the Theil–Sen slope needs 2 or more points")
    z = NormalDist().inv_cdf((1 - confidence) / 2)  # negative
    ties = sum(k * (k - 1) * (2 * k + 5) for k in Counter(y).values() if k > 1)
    sigma = math.sqrt((n * (n - 1) * (2 * n + 5) - ties) / 18.0)
    nt = len(slopes)
    upper = min(round((nt - z * sigma) / 2.0), nt - 1)
    lower = max(round((nt + z * sigma) / 2.0) - 1, 0)
    return median(slopes), slopes[lower], slopes[upper]


@dataclass(frozen=True)
class Warmup:
    """How a run warms up: a fixed number of steps, or (`steady`) until its last WINDOW steps show no trend,
    at most CAP steps."""

    steps: int | None  # None: until steady

    @property
    def steady(self) -> bool:
        """Whether it warms up until steady."""
        return self.steps is None

    def done(self, images_per_sec: Sequence[float]) -> bool:
        """Whether the warm-up steps so far (their images/sec, in order) end the warm-up."""
        if self.steps is not None:
            return len(images_per_sec) >= self.steps
        if len(images_per_sec) >= CAP:
            return True
        return len(images_per_sec) >= WINDOW and not trend(images_per_sec[-WINDOW:])


def trend(images_per_sec: Sequence[float], band_pct: float = BAND_PCT) -> bool:
    """Whether steps show a trend: the slope's interval excludes 0 and the change over them (slope × (n − 1)
    in % of the median) is at least band_pct."""
    slope, lo, hi = theil_sen(images_per_sec)
    mid = median(images_per_sec)
    change = slope * (len(images_per_sec) - 1) / mid * 100.0 if mid > 0 else 0.0
    return (lo > 0 or hi < 0) and abs(change) >= band_pct
