"""Group runs and summarise repetitions: mean, min, max, std, overhead % against bare metal. Pure."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from dltestbed.kinds import KINDS
from dltestbed.report.environment import env_diff, shared_environment, unlike
from dltestbed.report.inference import (
    MIN_N,
    Effect,
    cv,
    mean_interval,
    paired,
    tost,
    verdict,
    welch,
)
from dltestbed.report.keys import GroupKey
from dltestbed.report.reference import Against, against
from dltestbed.results.records import REFERENCE, RunRecord

NO_INTERVAL = "too few runs for an interval (2 per side)"  # a layer's verdict below 2 runs a side
OVERHEAD_ESTIMATE = (
    "overhead: 1 − layer ÷ bm images/sec, as the geometric mean of the per-repetition ratios (paired runs) "
    "or the ratio of geometric means (unpaired) — the estimate its 95 % interval (t on log ratios) is about"
)


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

    key: GroupKey
    runs: int  # stored runs in the group, failed ones included
    failed: int
    images_per_sec: Spread | None  # over ok runs: total timed images / timed seconds
    elapsed_seconds: Spread | None  # over ok runs: warm-up + timed wall time
    overhead_percent: float | None  # images/sec lost against the bm group of the same key (OVERHEAD_ESTIMATE); bm: 0
    effect: Effect | None = None  # the overhead with its interval (inference.py); None for bm or too few runs
    verdict: str | None = None  # the effect in words
    equivalence: str | None = None  # with a margin: equivalent, not equivalent or undecided (TOST)
    cv: float | None = None  # run-to-run coefficient of variation of images/sec
    env: tuple[str, ...] = ()  # environment facts that differ from the baseline's runs, one line each
    images_per_sec_ci: tuple[float, float] | None = None  # 95 % t-interval of the mean images/sec (MEAN_T)
    environment: dict[str, str] = field(default_factory=dict)  # the ok runs' environment ("; " joins unlike values)
    wall_seconds: Spread | None = None  # over ok runs: launch to finish as the controller saw it (CLOSER'18)
    gpu_memory_peak_bytes: Spread | None = None  # over ok runs: the most TensorFlow's GPU allocator held at once
    compile_cache: dict[str, int] = field(default_factory=dict)  # ok compiled runs by outcome: hit, miss, partial
    reference: Against | None = None  # against a loop written outside dltestbed in the same benches (reference.py)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self) | {"key": self.key.to_dict()}


def spread(values: Sequence[float | None]) -> Spread | None:
    """The Spread of the values that are there, or None when none is."""
    have = [v for v in values if v is not None]
    return Spread.of(have) if have else None


def pair_key(run: RunRecord, by_host: bool = False) -> tuple[Any, ...]:
    """Which baseline run a run is paired with: the same bench and repetition (interleaved, so they ran
    side by side), on the same machine when hosts are compared, and always on the same GPU (--gpus per-gpu)."""
    if by_host or run.spec.get("gpu"):
        return (run.bench_id, run.repetition, run.unit)
    return (run.bench_id, run.repetition)


def images_per_sec(run: RunRecord) -> float:
    """A model run's throughput (what `samples` compares by default; only ok runs, which have one)."""
    if run.images_per_sec is None:
        raise ValueError(f"run {run.id} has no images/sec")
    return run.images_per_sec


Samples = tuple[list[float], list[float], bool]


def keyed_samples(
    baseline: Sequence[tuple[Hashable, float]], layer: Sequence[tuple[Hashable, float]]
) -> Samples | None:
    """Values, each with the key that pairs it (pair_key's, or a job's), as the two groups to compare and whether
    they are paired: paired when every layer value has exactly one baseline partner of its key (and no partner
    serves twice), else the two groups as they are; None below MIN_N values a side."""
    base: dict[Hashable, list[float]] = {}
    for k, v in baseline:
        base.setdefault(k, []).append(v)
    pairs = [(base[k][0], v) for k, v in layer if len(base.get(k, [])) == 1]
    keys = [k for k, _ in layer]
    if len(pairs) == len(layer) >= MIN_N and len(set(keys)) == len(keys):
        return [b for b, _ in pairs], [x for _, x in pairs], True
    if len(baseline) >= MIN_N and len(layer) >= MIN_N:
        return [v for _, v in baseline], [v for _, v in layer], False
    return None


def samples(
    baseline: Sequence[RunRecord],
    layer: Sequence[RunRecord],
    by_host: bool = False,
    value: Callable[[RunRecord], float] = images_per_sec,
) -> Samples | None:
    """The runs' values to compare (images/sec, or a probe's rate), paired by pair_key where they pair up
    (keyed_samples)."""
    return keyed_samples(
        [(pair_key(r, by_host), value(r)) for r in baseline], [(pair_key(r, by_host), value(r)) for r in layer]
    )


def compared(s: Samples) -> Effect:
    """The layer's overhead against the baseline in two samples: paired t on log ratios when they are paired,
    else Welch."""
    return paired(s[0], s[1]) if s[2] else welch(s[0], s[1])


def effect(baseline: Sequence[RunRecord], layer: Sequence[RunRecord], by_host: bool = False) -> Effect | None:
    """The layer's overhead against the baseline's ok runs: paired t on log ratios when the runs pair up
    (see samples), else Welch; None below 2 runs a side."""
    s = samples(baseline, layer, by_host)
    return compared(s) if s is not None else None


def overhead_percent(baseline_ips: float, ips: float) -> float:
    """How much slower than the baseline, in % of the baseline's images/sec (negative: faster)."""
    return (baseline_ips - ips) / baseline_ips * 100.0


def summarise(runs: Iterable[RunRecord], by_host: bool = False, equivalence: float | None = None) -> list[GroupStats]:
    """Per group: counts, spreads over ok runs, overhead against the matching bm group.

    by_host: one group per host too (and overhead against bare metal on the same host), to find the
    node that is slower than its peers. The host is the physical machine (`machine`): a VM and its
    containers sit beside the host they run on.
    equivalence: a margin in %: each layer is also judged equivalent to bare metal within ±margin (TOST).
    """
    groups: dict[GroupKey, list[RunRecord]] = {}
    references: dict[GroupKey, list[RunRecord]] = {}
    for r in runs:
        if r.role == REFERENCE and r.status == "ok":
            references.setdefault(GroupKey.of(r, by_host), []).append(r)
        if not r.measured or r.is_probe:
            continue  # a co-tenant is the load, not a measurement: see `shared`; probes: see micro.py
        groups.setdefault(GroupKey.of(r, by_host), []).append(r)
    ok = {k: [r for r in members if r.status == "ok" and r.images_per_sec is not None] for k, members in groups.items()}
    base_runs = {k.workload: ok[k] for k in groups if not k.against_baseline and ok[k]}
    out = [
        _group(k, members, ok[k], base_runs.get(k.workload, []), by_host, equivalence, references.get(k, []))
        for k, members in groups.items()
    ]
    kinds = list(KINDS)
    out.sort(
        key=lambda g: (
            orderable(g.key.workload),
            kinds.index(g.key.target_kind) if g.key.target_kind in kinds else len(kinds),
        )
    )
    return out


def orderable(values: Sequence[Any]) -> tuple[tuple[bool, Any], ...]:
    """A key's values in an order that never compares None with a number (a run that left its warm-up to the
    preset beside one that named it, in one store): each None last among its position's values."""
    return tuple((v is None, 0 if v is None else v) for v in values)


def _group(
    k: GroupKey,
    members: Sequence[RunRecord],
    ok: Sequence[RunRecord],
    base_ok: Sequence[RunRecord],
    by_host: bool,
    equivalence: float | None,
    references: Sequence[RunRecord] = (),
) -> GroupStats:
    """One group's row: its spreads, against the baseline's ok runs its overhead, interval and verdict, and against
    a reference loop of the same benches its efficiency."""
    values = [r.images_per_sec for r in ok if r.images_per_sec is not None]
    ips = Spread.of(values) if values else None
    base = [r.images_per_sec for r in base_ok if r.images_per_sec is not None]
    over = (
        overhead_percent(statistics.geometric_mean(base), statistics.geometric_mean(values))
        if base and values
        else None
    )
    eff, equiv, words = None, None, None
    env: tuple[str, ...] = ()
    if k.against_baseline:
        env = tuple(env_diff(base_ok, ok, "bm", k.target_kind)) if base_ok and ok else ()
        words = unlike(base_ok, ok, "bm", k.target_kind)
        s = samples(base_ok, ok, by_host) if words is None else None
        if words is not None:
            over = None  # a GPU run against a CPU run, or another TensorFlow, is no layer's overhead
        elif s is not None:
            eff = compared(s)
            equiv = tost(s[0], s[1], equivalence, s[2]) if equivalence is not None else None
            words = verdict(eff)
            over = eff.overhead_pct  # the one estimate the interval is about (OVERHEAD_ESTIMATE)
    return GroupStats(
        k,
        len(members),
        sum(1 for r in members if r.status != "ok"),
        ips,
        spread([r.elapsed_seconds for r in ok]),
        over,
        eff,
        words,
        equiv,
        cv(values),
        env,
        mean_interval(values),
        shared_environment(ok or members),
        spread([r.wall_seconds for r in ok]),
        spread([r.gpu_memory_peak_bytes for r in ok]),
        dict(Counter(r.compile_cache for r in ok if r.compile_cache)),
        against(ok, references),
    )
