"""Runs measured together: distributed jobs (total throughput, scaling efficiency) and shared pairs
(the foreground alone and beside its co-tenant). Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from dltestbed.kinds import BASELINE
from dltestbed.report.inference import Effect, verdict
from dltestbed.report.keys import JobKey
from dltestbed.report.stats import Spread, compared, keyed_samples, overhead_percent
from dltestbed.results.records import COTENANT, RunRecord


@dataclass(frozen=True)
class DistributedStats:
    """Distributed jobs of one kind and workload: total throughput and scaling efficiency."""

    key: JobKey
    workers: int
    jobs: int  # jobs whose every worker finished ok
    failed_jobs: int
    total_images_per_sec: Spread | None  # per job: the sum of its workers' measured images/sec
    worker_images_per_sec: Spread | None  # every ok worker of those jobs
    single_images_per_sec: Spread | None  # one worker of the same kind alone (the job's baseline run)
    efficiency_percent: Spread | None  # per job: total ÷ (workers × its baseline) × 100
    network: str = ""  # the workers' network as their runs say (k8s_network: host, pod); "; " joins unlike ones
    # the job totals against bare metal's jobs of the same workload and worker count (a layer's cost: a pod
    # network's overlay against the host's network): paired t on log ratios where each job has bm's partner on
    # the same nodes in the same bench and repetition, else Welch; None for bm, or below 2 jobs a side
    effect: Effect | None = None
    verdict: str | None = None  # the effect in words

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self) | {"key": self.key.to_dict()}


def distributed(runs: Iterable[RunRecord]) -> list[DistributedStats]:
    """Per kind, workload and worker count: jobs' total throughput (sum of workers, never one worker × N)
    and efficiency against a single worker of the same kind measured in the same job slot."""
    jobs: dict[str, list[RunRecord]] = {}
    for r in runs:
        if r.scenario == "distributed" and r.job_id:
            jobs.setdefault(r.job_id, []).append(r)
    groups: dict[tuple[JobKey, int], list[tuple[list[RunRecord], RunRecord | None]]] = {}
    for members in jobs.values():
        workers = [r for r in members if r.worker_index is not None]
        alone = next((r for r in members if r.worker_index is None), None)
        if workers:
            key = (JobKey.of(workers[0]), workers[0].workers)
            groups.setdefault(key, []).append((workers, alone))
    out = []
    by_job: dict[tuple[JobKey, int], list[tuple[tuple[Any, ...], float]]] = {}  # ok jobs' job_pair and total
    for key, items in groups.items():
        totals, each, singles, eff = [], [], [], []
        failed = 0
        for workers, alone in items:
            n = workers[0].workers
            if len(workers) != n or any(w.status != "ok" or w.images_per_sec is None for w in workers):
                failed += 1
                continue
            speeds = [w.images_per_sec for w in workers if w.images_per_sec is not None]
            total = sum(speeds)
            totals.append(total)
            by_job.setdefault(key, []).append((job_pair(workers), total))
            each += speeds
            if alone is not None and alone.status == "ok" and alone.images_per_sec:
                singles.append(alone.images_per_sec)
                eff.append(total / (n * alone.images_per_sec) * 100.0)
        out.append(
            DistributedStats(
                *key,
                len(totals),
                failed,
                Spread.of(totals) if totals else None,
                Spread.of(each) if each else None,
                Spread.of(singles) if singles else None,
                Spread.of(eff) if eff else None,
                "; ".join(sorted({w.fingerprint.get("k8s_network", "") for ws, _ in items for w in ws} - {""})),
            )
        )
    out = [_against_bm(d, by_job) for d in out]
    return sorted(out, key=lambda d: (tuple(str(v) for v in d.key.to_dict().values()), d.workers))


def job_pair(workers: Sequence[RunRecord]) -> tuple[Any, ...]:
    """Which bare-metal job a job is paired with: the same bench, repetition (interleaved: they ran one after the
    other) and framework, on the same machines."""
    w = workers[0]
    return (w.bench_id, w.repetition, w.framework, tuple(sorted(str(x.machine) for x in workers)))


def _against_bm(
    d: DistributedStats, by_job: Mapping[tuple[JobKey, int], Sequence[tuple[tuple[Any, ...], float]]]
) -> DistributedStats:
    """A layer's jobs against bare metal's of the same workload and worker count (DistributedStats.effect),
    paired by job_pair where they pair up (stats.keyed_samples)."""
    if d.key.target_kind == BASELINE:
        return d
    base = by_job.get((replace(d.key, target_kind=BASELINE), d.workers), [])
    s = keyed_samples(base, by_job.get((d.key, d.workers), []))
    if s is None:
        return d
    found = compared(s)
    return replace(d, effect=found, verdict=verdict(found))


@dataclass(frozen=True)
class SharedStats:
    """The foreground alone and with a co-tenant, paired by job: what the co-tenant cost it."""

    key: JobKey
    contention: str
    pairs: int  # pairs where both runs finished ok
    failed_pairs: int
    alone_images_per_sec: Spread | None
    shared_images_per_sec: Spread | None
    drop_percent: Spread | None  # per pair: (alone − shared) ÷ alone × 100
    cotenant_images_per_sec: Spread | None
    qos: str = ""  # the pods' QoS classes where their runs say them (Kubernetes): "foreground X, co-tenant Y"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self) | {"key": self.key.to_dict()}


def shared(runs: Iterable[RunRecord]) -> list[SharedStats]:
    """Per kind, workload and contention: the foreground's drop under its co-tenant."""
    jobs: dict[str, list[RunRecord]] = {}
    for r in runs:
        if r.scenario == "shared" and r.job_id:
            jobs.setdefault(r.job_id, []).append(r)
    groups: dict[tuple[JobKey, str], list[tuple[RunRecord | None, RunRecord | None, RunRecord | None]]] = {}
    for members in jobs.values():
        fg = [r for r in members if r.measured]
        alone = next((r for r in fg if r.contention.startswith("none")), None)
        under = next((r for r in fg if not r.contention.startswith("none")), None)
        co = next((r for r in members if r.role == COTENANT), None)
        ref = under or alone
        if ref is None:
            continue
        key = (JobKey.of(ref), under.contention if under else "?")
        groups.setdefault(key, []).append((alone, under, co))
    out = []
    for key, items in groups.items():
        a_list, s_list, drops, co_list = [], [], [], []
        failed = 0
        for alone, under, co in items:
            if co is not None and co.status == "ok" and co.images_per_sec:
                co_list.append(co.images_per_sec)
            if not (
                alone
                and under
                and alone.status == under.status == "ok"
                and alone.images_per_sec
                and under.images_per_sec is not None
            ):
                failed += 1
                continue
            a_list.append(alone.images_per_sec)
            s_list.append(under.images_per_sec)
            drops.append(overhead_percent(alone.images_per_sec, under.images_per_sec))
        out.append(
            SharedStats(
                *key,
                len(drops),
                failed,
                Spread.of(a_list) if a_list else None,
                Spread.of(s_list) if s_list else None,
                Spread.of(drops) if drops else None,
                Spread.of(co_list) if co_list else None,
                _qos(items),
            )
        )
    return sorted(out, key=lambda d: (tuple(str(v) for v in d.key.to_dict().values()), d.contention))


def _qos(items: Sequence[tuple[RunRecord | None, RunRecord | None, RunRecord | None]]) -> str:
    """The foreground's and the co-tenant's QoS classes, as their runs' fingerprints say them ("" where none does:
    not on Kubernetes); unlike values joined with "/"."""

    def said(runs: Iterable[RunRecord | None]) -> str:
        return "/".join(sorted({str(r.fingerprint.get("k8s_qos")) for r in runs if r and r.fingerprint.get("k8s_qos")}))

    fg, co = said(x for a, u, _ in items for x in (a, u)), said(c for _, _, c in items)
    return f"foreground {fg}, co-tenant {co}" if fg or co else ""
