"""Runs and hosts to look at: hosts slower than their peers (leave-one-out median and MAD) and runs whose
timed steps are not steady. Pure; they change no number."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from dltestbed.report import FLEET_MIN_SLOWDOWN, ROBUST_Z
from dltestbed.report.inference import slow_outliers, steady_state
from dltestbed.report.keys import GroupKey
from dltestbed.report.stats import GroupStats
from dltestbed.results.records import RunRecord


@dataclass(frozen=True)
class FleetFlag:
    """A host slower than its peers (the other hosts of the same kind and workload), beyond their spread
    (median and MAD) and by at least the minimum slowdown."""

    key: GroupKey  # the group, host excluded
    host: str
    images_per_sec: float
    peers_median: float  # of the other hosts
    robust_z: float  # 0.6745 · (host − peers' median) / peers' MAD
    hosts: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self) | {"key": self.key.to_dict()}


def rule(min_slowdown: float = FLEET_MIN_SLOWDOWN) -> str:
    """Why a host is flagged, in words (the report's text and the figure's caption say "… when <this>")."""
    return (
        f"its mean images/sec lies below its peers' median (the other hosts') by more "
        f"than {ROBUST_Z:g} robust standard deviations of the peers (leave-one-out modified z-score from their "
        f"median absolute deviation) and by at least {min_slowdown:g} %"
    )


def fleet(
    groups: Sequence[GroupStats], threshold: float = ROBUST_Z, min_slowdown: float = FLEET_MIN_SLOWDOWN
) -> tuple[list[FleetFlag], int]:
    """From `summarise(..., by_host=True)`: per kind and workload, each host's mean images/sec against
    its peers' median and MAD (every other host's); the hosts whose modified z-score is below −threshold
    and that are at least `min_slowdown` % below the peers' median (3 or more hosts needed).
    (flags, how many comparisons of 3+ hosts were made)."""
    by_key: dict[GroupKey, dict[str, float]] = {}
    for g in groups:
        if g.key.host is None or g.images_per_sec is None:
            continue
        by_key.setdefault(g.key.without_host(), {})[g.key.host] = g.images_per_sec.mean
    flags, compared = [], 0
    for k, hosts in by_key.items():
        if len(hosts) < 3:
            continue
        compared += 1
        for host, sc in slow_outliers(hosts, threshold, min_slowdown).items():
            flags.append(FleetFlag(k, host, hosts[host], sc.median, sc.z, len(hosts)))
    return flags, compared


def steady(runs: Iterable[RunRecord], timed: Mapping[str, Sequence[float]]) -> list[tuple[RunRecord, list[str]]]:
    """Runs whose timed steps are still trending or hold outlier steps, with what was seen (no number changes)."""
    out = []
    for r in runs:
        words = steady_state(timed.get(r.id, ())).flags() if r.status == "ok" else []
        if words:
            out.append((r, words))
    return out
