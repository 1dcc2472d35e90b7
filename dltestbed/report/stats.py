"""Group runs and summarise repetitions: mean, min, max, std, overhead % against bare metal. Pure."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from dltestbed.results.records import RunRecord

BASELINE_KIND = "bm"

# A group holds runs that measured the same thing on the same kind of target. Runs that differ in
# batch size, image size or device are never averaged together.
GROUP_FIELDS = ("target_kind", "model", "data", "mode", "device", "batch_size", "image_size", "contention")
COMPARE_FIELDS = tuple(f for f in GROUP_FIELDS if f != "target_kind")


@dataclass(frozen=True)
class Spread:
    """mean, min, max and sample std (None below 2 values) of a list of numbers."""

    n: int
    mean: float
    min: float
    max: float
    std: float | None

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        """Summarise at least one value."""
        if not values:
            raise ValueError("no values")
        std = statistics.stdev(values) if len(values) > 1 else None
        return cls(len(values), statistics.fmean(values), min(values), max(values), std)


@dataclass(frozen=True)
class GroupStats:
    """One line of the report."""

    key: dict[str, Any]
    runs: int  # stored runs in the group, failed ones included
    failed: int
    images_per_sec: Spread | None  # over ok runs: total timed images / timed seconds
    elapsed_seconds: Spread | None  # over ok runs: warm-up + timed wall time
    overhead_percent: float | None  # images/sec lost against the bm group of the same key; bm: 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def group_key(run: RunRecord, fields: tuple[str, ...] = GROUP_FIELDS) -> tuple[Any, ...]:
    """The values of the grouping fields for a run."""
    return tuple(getattr(run, f) for f in fields)


def overhead_percent(baseline_ips: float, ips: float) -> float:
    """How much slower than the baseline, in % of the baseline's images/sec (negative: faster)."""
    return (baseline_ips - ips) / baseline_ips * 100.0


def summarise(runs: Iterable[RunRecord], by_host: bool = False) -> list[GroupStats]:
    """Per group: counts, spreads over ok runs, overhead against the matching bm group.

    by_host: one group per host too (and overhead against bare metal on the same host), to find the
    node that is slower than its peers.
    """
    fields = (*GROUP_FIELDS, "host") if by_host else GROUP_FIELDS
    compare = tuple(f for f in fields if f != "target_kind")
    groups: dict[tuple[Any, ...], list[RunRecord]] = {}
    for r in runs:
        groups.setdefault(group_key(r, fields), []).append(r)
    partial: list[tuple[dict[str, Any], list[RunRecord], Spread | None, Spread | None]] = []
    baselines: dict[tuple[Any, ...], float] = {}
    for key, members in groups.items():
        ok = [r for r in members if r.status == "ok" and r.images_per_sec is not None]
        ips = Spread.of([r.images_per_sec for r in ok]) if ok else None  # type: ignore[misc]
        elapsed = [r.elapsed_seconds for r in ok if r.elapsed_seconds is not None]
        el = Spread.of(elapsed) if elapsed else None
        k = dict(zip(fields, key, strict=True))
        partial.append((k, members, ips, el))
        if k["target_kind"] == BASELINE_KIND and ips is not None:
            baselines[tuple(k[f] for f in compare)] = ips.mean
    out = []
    for k, members, ips, el in partial:
        base = baselines.get(tuple(k[f] for f in compare))
        over = overhead_percent(base, ips.mean) if base and ips is not None else None
        failed = sum(1 for r in members if r.status != "ok")
        out.append(GroupStats(k, len(members), failed, ips, el, over))
    kinds = ["bm", "vm", "cbm", "cvm"]
    out.sort(key=lambda g: (
        tuple(g.key[f] for f in compare),
        kinds.index(g.key["target_kind"]) if g.key["target_kind"] in kinds else len(kinds),
    ))  # fmt: skip
    return out
