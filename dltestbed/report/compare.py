"""Bench B against bench A, group by group: before and after a change (a driver update). Pure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from dltestbed.report.environment import DEVICE_AND_MATH, env_diff, unlike
from dltestbed.report.inference import Effect, verdict, welch
from dltestbed.report.keys import GroupKey
from dltestbed.report.stats import Spread
from dltestbed.results.records import RunRecord


@dataclass(frozen=True)
class Change:
    """One group of runs in bench B against the same group in bench A (before/after)."""

    key: GroupKey
    a_images_per_sec: Spread | None
    b_images_per_sec: Spread | None
    effect: Effect | None  # B against A: Welch t on log throughput (two benches are not paired)
    verdict: str
    env: list[str]  # environment facts that differ between A's and B's runs

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self) | {"key": self.key.to_dict()}


def _speeds(runs: Iterable[RunRecord]) -> list[float]:
    """The images/s of the runs that have one."""
    return [r.images_per_sec for r in runs if r.images_per_sec is not None]


def compare(a_runs: Iterable[RunRecord], b_runs: Iterable[RunRecord]) -> list[Change]:
    """Per group present in both benches: B's throughput against A's, with its interval and verdict,
    and the environment facts that changed (e.g. a driver update). Across effective devices or math: refused."""

    def grouped(runs: Iterable[RunRecord]) -> dict[GroupKey, list[RunRecord]]:
        out: dict[GroupKey, list[RunRecord]] = {}
        for r in runs:
            if r.measured and r.status == "ok" and r.images_per_sec is not None:
                out.setdefault(GroupKey.of(r), []).append(r)
        return out

    ga, gb = grouped(a_runs), grouped(b_runs)
    out = []
    for key in [k for k in ga if k in gb]:
        a, b = ga[key], gb[key]
        refused = unlike(a, b, "A", "B", DEVICE_AND_MATH)
        eff = None
        if refused is None and len(a) >= 2 and len(b) >= 2:
            eff = welch(_speeds(a), _speeds(b))
        words = refused or (verdict(eff) if eff else "too few runs for an interval (2 per bench)")
        out.append(
            Change(
                key,
                Spread.of(_speeds(a)),
                Spread.of(_speeds(b)),
                eff,
                words,
                env_diff(a, b),
            )
        )
    return out
