"""distributed: one training job over several workers (MultiWorkerMirroredStrategy), per target kind.
Workers start together; the first to fail stops the others; total throughput is the sum of theirs. With
`Options.jobs`, several jobs over the hosts each names, those that share no host at the same time."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, cast

from dltestbed.config import Spec
from dltestbed.errors import ConfigError, TargetError
from dltestbed.kinds import any_kind
from dltestbed.orchestrate import planning
from dltestbed.orchestrate.scenarios.base import RunEnv, Scenario, register
from dltestbed.orchestrate.scenarios.common import FREE_PORT, probe
from dltestbed.requests.bench import Options
from dltestbed.results.records import RunRecord, new_id
from dltestbed.runner import RunContext, execute
from dltestbed.targets import make
from dltestbed.targets.base import INTERRUPTED, Abort, Target
from dltestbed.targets.rendezvous import PORT, LatePeer, Rendezvous
from dltestbed.workload.frameworks import framework


def worker_count(options: Options, hosts: Sequence[object]) -> int:
    """Workers per distributed job (with `jobs`: in all)."""
    if options.jobs:
        return sum(len(j) for j in options.jobs)
    if options.workers is not None:
        return options.workers
    return 2 if list(hosts) == [None] else len(hosts)


@register
class Distributed(Scenario):
    name = "distributed"
    takes_workers = True

    def check(self, options: Options, hosts: Sequence[Any], plan: planning.Plan, kinds: Sequence[str]) -> None:
        if options.jobs:
            _check_jobs(options, hosts)
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
        if env.options.jobs:
            return _rounds(env)
        return run(env)

    def runs_per_item(self, options: Options, hosts: Sequence[object]) -> int:
        return worker_count(options, hosts) + (1 if options.baseline else 0)

    def scope(self, options: Options, hosts: Sequence[object]) -> str:
        if options.jobs:
            return f" ({len(options.jobs)} jobs, {len(rounds_of(options.jobs, _cap(options)))} round(s))"
        alone = " + 1 alone" if options.baseline else ""
        return f" (a job of {worker_count(options, hosts)} workers{alone})"

    def announce(self, options: Options, hosts: Sequence[object], where: str, total: int) -> str:
        if options.jobs:
            count = len(rounds_of(options.jobs, _cap(options)))
            return f", {len(options.jobs)} jobs at once where they share no host ({count} round(s)), on {where}"
        extra = " + 1 worker alone" if options.baseline else ""
        return f", each a job of {worker_count(options, hosts)} workers{extra}, on {where}"

    def machines(self, workers: int | None) -> int:
        return workers or 2


def run(env: RunEnv) -> list[RunRecord]:
    """Per repetition, workload and kind: (a single worker alone, then) one job over N workers."""
    plan, sites, options = env.plan, env.sites, env.options
    n = worker_count(options, [s.host for s in sites])
    placement = [sites[i % len(sites)] for i in range(n)]
    records: list[RunRecord] = []
    for round_ in plan.rounds(env.kinds):
        for rep, spec, kind in round_:
            job = new_id("j")
            if options.baseline and spec.mode != "probe":  # a worker alone has no peer to measure against
                ctx = RunContext(plan.bench_id, Distributed.name, rep, job_id=job, workers=1)
                alone = make(kind, placement[0])
                limit = options.where.run_timeout
                records.append(execute(alone, spec, env.store, ctx, env.observer, timeout=limit, sinks=env.sinks))
            records += _job(env, rep, job, spec, [make(kind, s) for s in placement])
    return records


def _check_jobs(options: Options, hosts: Sequence[Any]) -> None:
    """Jobs name inventory hosts of the bench, two or more each, and take no baseline."""
    names = {getattr(h, "name", None) for h in hosts}
    for job in options.jobs:
        if len(job) < 2:
            raise ConfigError(f"scenario distributed: a job needs 2 or more hosts; got {list(job)}")
        missing = [h for h in job if h not in names]
        if missing:
            raise ConfigError(f"scenario distributed: job host {missing[0]!r} is not a host of this bench")
    if options.baseline:
        raise ConfigError("scenario distributed: jobs over named hosts take no worker alone (baseline off)")


def rounds_of(jobs: Sequence[Sequence[str]], at_most: int | None = None) -> list[list[int]]:
    """The jobs (their indexes) in rounds: each job in the first round where none of its hosts is busy and its
    hosts fit within `at_most` hosts at once (None: no cap); a job larger than the cap has a round of its own."""
    rounds: list[list[int]] = []
    busy: list[set[str]] = []
    for i, job in enumerate(jobs):
        for r, used in enumerate(busy):
            fits = at_most is None or len(used) + len(job) <= at_most
            if fits and not used & set(job):
                rounds[r].append(i)
                used.update(job)
                break
        else:
            rounds.append([i])
            busy.append(set(job))
    return rounds


def _cap(options: Options) -> int | None:
    """The most hosts a round of jobs may hold: --parallel's cap (not parallel: one job at a time)."""
    return options.where.hosts_at_once if options.where.parallel else 1


def _rounds(env: RunEnv) -> list[RunRecord]:
    """Per repetition, workload and kind: `options.jobs` in rounds (rounds_of), a round's jobs at once, a thread
    each; Ctrl-C stops every worker of the round."""
    jobs = env.options.jobs
    by_name = {s.host.name: s for s in env.sites if s.host is not None}
    records: list[RunRecord] = []
    for round_ in env.plan.rounds(env.kinds):
        for rep, spec, kind in round_:
            for together in rounds_of(jobs, _cap(env.options)):
                made = [[make(kind, by_name[h]) for h in jobs[i]] for i in together]
                records += _at_once(env, rep, spec, made)
    return records


def _at_once(env: RunEnv, rep: int, spec: Spec, jobs: Sequence[Sequence[Target]]) -> list[RunRecord]:
    """The jobs (each its workers' targets) at once, a thread each; their records in the jobs' order."""
    found: list[list[RunRecord]] = [[] for _ in jobs]
    failed: list[BaseException] = []

    def one(k: int) -> None:
        try:
            found[k] = _job(env, rep, new_id("j"), spec, jobs[k])
        except BaseException as exc:  # raised again below, in the bench's thread
            failed.append(exc)

    threads = [threading.Thread(target=one, args=(k,), name=f"dltestbed-job-{k}") for k in range(len(jobs))]

    def stop() -> None:
        for targets in jobs:
            for t in targets:
                t.abort(Abort(INTERRUPTED))

    _join_all(threads, stop)
    if failed:
        raise failed[0]
    return [r for rs in found for r in rs]


def _join_all(threads: Sequence[threading.Thread], stop: Callable[[], None]) -> None:
    """Start the threads and wait for them; Ctrl-C calls `stop`, waits for them, and is raised again."""
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.2)
    except KeyboardInterrupt:
        stop()
        for t in threads:
            t.join(60)
        raise


def _job(env: RunEnv, rep: int, job: str, spec: Spec, targets: Sequence[Target]) -> list[RunRecord]:
    """One distributed job: workers start together; the first to fail stops the others; Ctrl-C stops all. Workers
    whose address is known only once they run (LatePeer: pods on a pod network) are given their peers then."""
    plan, store, observer, sinks, limit = env.plan, env.store, env.observer, env.sinks, env.options.where.run_timeout
    worker_spec = spec.model_copy(update={"distributed": True})
    env_of = framework(worker_spec.framework).worker_env
    late = all(isinstance(t, LatePeer) for t in targets)  # a job's workers are of one kind
    if late:  # their addresses are known once they run: they meet at the job's rendezvous
        rendezvous = Rendezvous(len(targets), PORT, env_of)
        for i, t in enumerate(targets):
            cast(LatePeer, t).seat(rendezvous, i)
    addresses = [] if late else _worker_addresses(targets)
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
        cluster = env_of(addresses, i) if addresses else {}
        rec = execute(targets[i], worker_spec, store, ctx, observer, timeout=limit, env=cluster, sinks=sinks)
        results[i] = rec
        if rec.status != "ok":  # a worker stopped by another's failure changes nothing: the job is ending
            stop_others(i, f"stopped: worker {i} ({targets[i].host}) failed: {rec.reason}")

    threads = [threading.Thread(target=worker, args=(i,), name=f"dltestbed-worker-{i}") for i in range(len(targets))]
    _join_all(threads, lambda: stop_others(-1, INTERRUPTED))
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
