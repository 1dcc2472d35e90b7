"""One analysis under every report: what the stored runs say, computed once (the groups and their
overheads, the hosts and the fleet check, steady state, distributed jobs, shared pairs, the probes).
Markdown, HTML, JSON, the figures and `validate` read it; none of them computes a statistic of its own.
`analyse` is pure; `read` gathers its inputs from a store."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from dltestbed.report import (
    FLEET_MIN_SLOWDOWN,
    accuracy,
    agreement,
    fleet,
    health,
    jobs,
    micro,
    runtimes,
    stats,
    versus,
    warmup,
)
from dltestbed.report.accuracy import AccuracyRow
from dltestbed.report.agreement import Agreement
from dltestbed.report.checks import CheckRow, Mismatch
from dltestbed.report.checks import summarise as summarise_checks
from dltestbed.report.fleet import FleetFlag, GpuFlag
from dltestbed.report.health import Finding, GpuHealth
from dltestbed.report.jobs import DistributedStats, SharedStats
from dltestbed.report.micro import CaseStats, Skipped
from dltestbed.report.runtimes import RuntimeRow
from dltestbed.report.stats import GroupStats
from dltestbed.report.trends import Wander
from dltestbed.report.versus import Versus
from dltestbed.report.warmup import WarmupRow
from dltestbed.results.records import RunRecord
from dltestbed.results.store import Store
from dltestbed.workload.events import CheckEvent, HealthEvent, MeasureEvent, ResourceEvent, SkipEvent, StepEvent

FLEET_MIN_HOSTS = 3  # the fleet check needs 3 machines; with them it runs in every report

SteadyFlag = tuple[RunRecord, list[str]]  # a run whose timed steps are not steady, and what was seen


@dataclass(frozen=True)
class Analysis:
    """Everything a report says about a set of runs, and the settings it was computed with."""

    scope: str = ""  # what the runs are: "bench 1a2b", "all runs"
    runs: tuple[RunRecord, ...] = ()  # the model runs (probes are in `cases`)
    groups: tuple[GroupStats, ...] = ()  # a row per group (per host too when asked: `by_host`)
    host_groups: tuple[GroupStats, ...] = ()  # a row per group and host: what the fleet check compared
    fleet: tuple[FleetFlag, ...] = ()  # hosts slower than their peers
    fleet_compared: int = 0  # comparisons of 3 or more hosts made
    fleet_slowdown: float = FLEET_MIN_SLOWDOWN
    equivalence: float | None = None  # the TOST margin in %, when one was asked
    steady: tuple[SteadyFlag, ...] = ()
    wander: Wander | None = None  # what the steady-state trends were judged against
    distributed: tuple[DistributedStats, ...] = ()
    shared: tuple[SharedStats, ...] = ()
    cases: tuple[CaseStats, ...] = ()  # the probes' cases per layer
    skipped: tuple[Skipped, ...] = ()  # what the probes could not run
    steps: Mapping[str, Sequence[StepEvent]] = field(default_factory=dict)  # run id → its steps (figures)
    samples: Mapping[str, Sequence[ResourceEvent]] = field(default_factory=dict)  # run id → its resource samples
    findings: tuple[Finding, ...] = ()  # what went wrong with a GPU during a run (errors, then warnings)
    gpus: tuple[GpuHealth, ...] = ()  # a row per host and GPU, those with findings first
    gpu_flags: tuple[GpuFlag, ...] = ()  # GPUs whose clock or power under load lies below their peers'
    agreement: tuple[Agreement, ...] = ()  # deterministic runs' losses, step by step, against their reference
    checked: tuple[CheckRow, ...] = ()  # the probes' results checked, a row per host, layer, GPU and probe
    mismatches: tuple[Mismatch, ...] = ()  # the checks that failed
    accuracy: tuple[AccuracyRow, ...] = ()  # --accuracy runs: top-1 per layer, against bare metal
    warmups: tuple[WarmupRow, ...] = ()  # --warmup auto: the steps each run needed, per model and layer
    frameworks: tuple[Versus, ...] = ()  # a framework against the first on the same layer and workload
    runtimes: tuple[RuntimeRow, ...] = ()  # native and each container runtime on one workload (HPEC'19)


def analyse(
    records: Sequence[RunRecord],
    steps: Mapping[str, Sequence[StepEvent]] | None = None,
    measures: Mapping[str, Sequence[MeasureEvent]] | None = None,
    skips: Mapping[str, Sequence[SkipEvent]] | None = None,
    samples: Mapping[str, Sequence[ResourceEvent]] | None = None,
    checks: Mapping[str, Sequence[HealthEvent]] | None = None,
    results: Mapping[str, Sequence[CheckEvent]] | None = None,
    *,
    scope: str = "",
    by_host: bool = False,
    equivalence: float | None = None,
    fleet_slowdown: float = FLEET_MIN_SLOWDOWN,
) -> Analysis:
    """The analysis of stored runs: models and probes apart; the fleet check whenever 3 or more machines ran;
    the GPUs' health from the runs' samples and checks (`checks`: each run's health events); the probes'
    checked results (`results`)."""
    steps, samples, checks = steps or {}, samples or {}, checks or {}
    probes = [r for r in records if r.is_probe]
    runs = [r for r in records if not r.is_probe]
    cases, skipped = micro.summarise(probes, measures or {}, skips or {}, samples)
    groups = stats.summarise(runs, by_host=by_host, equivalence=equivalence)
    many = len({r.unit for r in runs if r.measured}) >= FLEET_MIN_HOSTS  # hosts, or GPUs (per-gpu)
    host_groups = groups if by_host else (stats.summarise(runs, by_host=True) if many else [])
    flags, compared = fleet.fleet(host_groups, min_slowdown=fleet_slowdown) if host_groups else ([], 0)
    timed = {r.id: [s.images_per_sec for s in steps.get(r.id, ()) if s.phase == "timed"] for r in runs}
    found = [f for r in records for f in health.findings(r, samples.get(r.id, ()), checks.get(r.id, ()))]
    found.sort(key=lambda f: (f.severity != health.ERROR, f.host, f.gpu))
    rows = health.gpus(records, samples, checks, found)
    checked, mismatches = summarise_checks(probes, results or {})
    steady, wander = fleet.steady(runs, timed, _cause(steps, samples))
    return Analysis(
        scope=scope,
        runs=tuple(runs),
        groups=tuple(groups),
        host_groups=tuple(host_groups),
        fleet=tuple(flags),
        fleet_compared=compared,
        fleet_slowdown=fleet_slowdown,
        equivalence=equivalence,
        steady=tuple(steady),
        wander=wander,
        distributed=tuple(jobs.distributed(runs)),
        shared=tuple(jobs.shared(runs)),
        cases=tuple(cases),
        skipped=tuple(skipped),
        steps={r.id: steps.get(r.id, []) for r in runs},
        samples={r.id: samples.get(r.id, []) for r in runs},
        findings=tuple(found),
        gpus=tuple(rows),
        gpu_flags=tuple(fleet.gpus(rows, fleet_slowdown)),
        agreement=tuple(agreement.agreements(runs, steps)),
        checked=tuple(checked),
        mismatches=tuple(mismatches),
        accuracy=tuple(accuracy.table(runs)),
        warmups=tuple(warmup.table(runs, steps)),
        frameworks=tuple(versus.compare(runs)),
        runtimes=tuple(runtimes.table(groups, runs, samples)),
    )


def _cause(
    steps: Mapping[str, Sequence[StepEvent]], samples: Mapping[str, Sequence[ResourceEvent]]
) -> Callable[[RunRecord], str | None]:
    """What explains a run that slowed down: its GPU samples over its timed steps (health.cause)."""

    def of(r: RunRecord) -> str | None:
        timed = [s for s in steps.get(r.id, ()) if s.phase == "timed"]
        start = timed[0].t - timed[0].seconds if timed else None
        return health.cause(samples.get(r.id, ()), start, timed[-1].t if timed else None)

    return of


def read(
    store: Store,
    records: Sequence[RunRecord],
    *,
    scope: str = "",
    by_host: bool = False,
    equivalence: float | None = None,
    fleet_slowdown: float = FLEET_MIN_SLOWDOWN,
) -> Analysis:
    """The analysis of `records`, with their steps, measures, skips, samples, health and checked results read
    from `store`."""
    probes = [r for r in records if r.is_probe]
    return analyse(
        records,
        {r.id: store.steps(r.id) for r in records if not r.is_probe},
        {r.id: store.measures(r.id) for r in probes},
        {r.id: store.skips(r.id) for r in probes},
        {r.id: store.resources(r.id) for r in records},
        {r.id: store.health(r.id) for r in records},
        {r.id: store.checks(r.id) for r in probes},
        scope=scope,
        by_host=by_host,
        equivalence=equivalence,
        fleet_slowdown=fleet_slowdown,
    )
