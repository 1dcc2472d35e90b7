"""distributed: one training job over several workers (MultiWorkerMirroredStrategy), per target kind.
Workers start together; the first to fail stops the others; total throughput is the sum of theirs."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from dltestbed.config import Spec
from dltestbed.errors import ConfigError, TargetError
from dltestbed.kinds import any_kind
from dltestbed.orchestrate import planning
from dltestbed.orchestrate.scenarios.base import RunEnv, Scenario, register
from dltestbed.orchestrate.scenarios.common import FREE_PORT, Options, probe
from dltestbed.results.records import RunRecord, new_id
from dltestbed.results.store import Store
from dltestbed.runner import Observer, RunContext, Sink, execute
from dltestbed.targets import Site, make
from dltestbed.targets.base import INTERRUPTED, Abort, Target
from dltestbed.workload.frameworks import framework


def worker_count(options: Options, hosts: Sequence[object]) -> int:
    """Workers per distributed job."""
    if options.workers is not None:
        return options.workers
    return 2 if list(hosts) == [None] else len(hosts)


@register
class Distributed(Scenario):
    name = "distributed"
    takes_workers = True

    def check(self, options: Options, hosts: Sequence[Any], plan: planning.Plan, kinds: Sequence[str]) -> None:
        n = worker_count(options, hosts)
        if n < 2:
            hint = "" if options.workers is not None else " (one per host; --workers N puts several on a host)"
            raise ConfigError(f"scenario distributed needs at least 2 workers; got {n}{hint}")
        if any(s.mode == "infer" for s in plan.specs):
            raise ConfigError("scenario distributed trains (inference has no step shared between workers)")
        if any_kind(kinds, lambda k: k.in_vm) and len(hosts) > 1:
            raise ConfigError(
                "scenario distributed on vm/cvm: each host's VM sits on a bridge private to that host, "
                "so workers in VMs on different hosts cannot reach each other; use one host "
                "(--limit HOST --workers N: the workers share its VM) or bm/cbm"
            )

    def run(self, env: RunEnv) -> list[RunRecord]:
        return run(env.plan, env.sites, env.kinds, env.store, env.observer, env.options, env.sinks)

    def runs_per_item(self, options: Options, hosts: Sequence[object]) -> int:
        return worker_count(options, hosts) + (1 if options.baseline else 0)

    def scope(self, options: Options, hosts: Sequence[object]) -> str:
        alone = " + 1 alone" if options.baseline else ""
        return f" (a job of {worker_count(options, hosts)} workers{alone})"

    def announce(self, options: Options, hosts: Sequence[object], where: str, total: int) -> str:
        extra = " + 1 worker alone" if options.baseline else ""
        return f", each a job of {worker_count(options, hosts)} workers{extra}, on {where}"

    def slurm_nodes(self, workers: int | None) -> int:
        return workers or 2


def run(
    plan: planning.Plan,
    sites: Sequence[Site],
    kinds: Sequence[str],
    store: Store,
    observer: Observer,
    options: Options,
    sinks: Sequence[Sink],
) -> list[RunRecord]:
    """Per repetition, workload and kind: (a single worker alone, then) one job over N workers."""
    n = worker_count(options, [s.host for s in sites])
    placement = [sites[i % len(sites)] for i in range(n)]
    records: list[RunRecord] = []
    for round_ in plan.rounds(kinds):
        for rep, spec, kind in round_:
            job = new_id("j")
            if options.baseline and spec.mode != "probe":  # a worker alone has no peer to measure against
                ctx = RunContext(plan.bench_id, Distributed.name, rep, job_id=job, workers=1)
                records.append(
                    execute(make(kind, placement[0]), spec, store, ctx, observer, timeout=options.timeout, sinks=sinks)
                )
            records += _job(plan, rep, job, spec, kind, placement, store, observer, options, sinks)
    return records


def _job(
    plan: planning.Plan,
    rep: int,
    job: str,
    spec: Spec,
    kind: str,
    placement: Sequence[Site],
    store: Store,
    observer: Observer,
    options: Options,
    sinks: Sequence[Sink],
) -> list[RunRecord]:
    """One distributed job: workers start together; the first to fail stops the others; Ctrl-C stops all."""
    targets = [make(kind, s) for s in placement]
    addresses = _worker_addresses(targets)
    worker_spec = spec.model_copy(update={"distributed": True})
    ending = threading.Lock()  # held by the first failure (or Ctrl-C): it stops the job, once
    results: list[RunRecord | None] = [None] * len(targets)

    def stop_others(failed: int, reason: str) -> None:
        if not ending.acquire(blocking=False):
            return  # the job is already ending
        for j, t in enumerate(targets):
            if j != failed:
                t.abort(Abort(reason))

    def worker(i: int) -> None:
        ctx = RunContext(plan.bench_id, Distributed.name, rep, job_id=job, workers=len(targets), worker_index=i)
        env = framework(worker_spec.framework).worker_env(addresses, i)
        rec = execute(targets[i], worker_spec, store, ctx, observer, timeout=options.timeout, env=env, sinks=sinks)
        results[i] = rec
        if rec.status != "ok":  # a worker stopped by another's failure changes nothing: the job is ending
            stop_others(i, f"stopped: worker {i} ({targets[i].host}) failed: {rec.reason}")

    threads = [threading.Thread(target=worker, args=(i,), name=f"dltestbed-worker-{i}") for i in range(len(targets))]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.2)
    except KeyboardInterrupt:
        stop_others(-1, INTERRUPTED)
        for t in threads:
            t.join(60)
        raise
    return [r for r in results if r is not None]


def _worker_addresses(targets: Sequence[Target]) -> list[str]:
    """host:port per worker, each port found free on its host (and distinct among workers of a host)."""
    taken: set[tuple[str, str]] = set()
    out = []
    for t in targets:
        addr = t.peer_address
        for _ in range(5):
            port = probe(t, FREE_PORT)
            if (addr, port) not in taken:
                break
        else:
            raise TargetError(f"{t.host}: no free port found for a worker")
        taken.add((addr, port))
        out.append(f"{addr}:{port}")
    return out
