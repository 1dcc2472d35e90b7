"""Runs, hosts and GPUs to look at: hosts slower than their peers (leave-one-out median and MAD), GPUs whose
clock or power under load lies below their peers' (the same test), and runs whose timed steps are not
steady. Pure; they change no number."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from dltestbed.report import FLEET_MIN_SLOWDOWN, ROBUST_Z, trends
from dltestbed.report.health import GpuHealth
from dltestbed.report.inference import CONFIDENCE, TREND_BAND_PCT, TREND_MIN_STEPS, slow_outliers, steady_state
from dltestbed.report.keys import GroupKey
from dltestbed.report.stats import GroupStats
from dltestbed.report.trends import Wander
from dltestbed.results.records import RunRecord

FLEET_MIN_GPUS = 3  # GPUs of one model needed to compare their clocks and power


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


def steady(
    runs: Iterable[RunRecord],
    timed: Mapping[str, Sequence[float]],
    cause: Callable[[RunRecord], str | None] = lambda r: None,
) -> tuple[list[tuple[RunRecord, list[str]]], Wander | None]:
    """Runs whose timed steps are still trending or hold outlier steps, with what was seen (no number changes),
    and the machine's wander the trends were judged against (report/trends.py: a run's own Theil–Sen interval
    and its change beyond the wander, and each setting's runs together, over every run and setting judged
    together, each judgement at half of 1 − CONFIDENCE); `cause`: what explains a run that slows down, asked
    of those runs only."""
    judged = [r for r in runs if r.status == "ok"]
    half = 1 - (1 - CONFIDENCE) / 2
    n = sum(len(timed.get(r.id, ())) >= TREND_MIN_STEPS for r in judged)
    states = {r.id: steady_state(timed.get(r.id, ()), 1 - (1 - half) / max(1, n)) for r in judged}
    changes = _changes(judged, {r.id: states[r.id].drift_pct for r in judged})
    w = trends.wander(changes)
    together = trends.settings(changes, w, half, TREND_BAND_PCT)
    out = []
    for r in judged:
        # the other runs' wander: t with its df, however few (3 runs of one setting leave df 1: wide, not none)
        others = trends.wander(changes, leave_out=_unit(r), min_df=1) if w is not None else None
        beyond = others.bound(n, half) if others is not None else 0.0
        drift = states[r.id].trend(TREND_BAND_PCT, beyond)
        because = cause(r) if drift is not None and drift < 0 else None
        words = states[r.id].flags(TREND_BAND_PCT, because, beyond)
        if (setting := together.get(GroupKey.of(r, by_host=True))) is not None:
            words.append(setting.words())
        if words:
            out.append((r, words))
    return out, w


def _unit(r: RunRecord) -> str:
    """What one repetition of a setting is: a run, or a distributed job (its workers ran in lock step, so they
    are one repetition, not several)."""
    return r.job_id if r.job_id and r.worker_index is not None else r.id


def _changes(runs: Sequence[RunRecord], drift: Mapping[str, float | None]) -> dict[GroupKey, dict[str, float]]:
    """Each setting's repetitions (on one machine) and their change over the timed steps in %: a job's workers
    averaged into one."""
    units: dict[GroupKey, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in runs:
        if (d := drift.get(r.id)) is not None:
            units[GroupKey.of(r, by_host=True)][_unit(r)].append(d)
    return {k: {u: sum(v) / len(v) for u, v in per.items()} for k, per in units.items()}


@dataclass(frozen=True)
class GpuFlag:
    """A GPU whose clock or power under load lies below its peers' (the other GPUs of the same model, on
    every host): the likely cause of a slow host, or a GPU to look at."""

    host: str
    gpu: int
    model: str
    what: str  # sm_clock_mhz | power_watts
    value: float
    peers_median: float
    robust_z: float
    peers: int

    def words(self) -> str:
        """The flag in a line."""
        label, unit = {"sm_clock_mhz": ("SM clock", "MHz"), "power_watts": ("power", "W")}[self.what]
        return (
            f"{self.host} GPU {self.gpu} ({self.model}): {label} {self.value:.0f} {unit} under load against its "
            f"{self.peers - 1} peers' median {self.peers_median:.0f} {unit} (robust z {self.robust_z:.1f})"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def gpus(rows: Sequence[GpuHealth], min_slowdown: float = FLEET_MIN_SLOWDOWN) -> list[GpuFlag]:
    """GPUs of one model (FLEET_MIN_GPUS or more, across hosts and within one) compared on their median SM
    clock and power under load, by the fleet check's own test (leave-one-out median and MAD, and at least
    `min_slowdown` % below): a GPU held back by heat or a power cap shows here even when the runs' throughput
    is too noisy to."""
    out = []
    by_model: dict[str, list[GpuHealth]] = {}
    for row in rows:
        by_model.setdefault(row.model, []).append(row)
    for model, group in by_model.items():
        for what in ("sm_clock_mhz", "power_watts"):
            values = {f"{g.host}\0{g.gpu}": v for g in group if (v := getattr(g, what)) is not None}
            if len(values) < FLEET_MIN_GPUS:
                continue
            for name, sc in slow_outliers(values, min_slowdown=min_slowdown).items():
                host, gpu = name.split("\0")
                out.append(GpuFlag(host, int(gpu), model, what, values[name], sc.median, sc.z, len(values)))
    return out
