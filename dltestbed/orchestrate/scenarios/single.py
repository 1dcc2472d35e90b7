"""single: each target runs alone, a plan's runs interleaved on the targets of a machine (`run`), the machines
at once (a thread each) or one after another (`run_all`); with --repeat auto, one interleaved repetition at a
time until every overhead's 95 % interval is narrow enough."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import replace
from functools import partial

from dltestbed.orchestrate.pergpu import GpuSlot
from dltestbed.orchestrate.planning import arms
from dltestbed.orchestrate.scenarios.base import RunEnv, Scenario, register
from dltestbed.report.inference import MIN_N
from dltestbed.report.stats import summarise
from dltestbed.requests.bench import Options
from dltestbed.results.records import RunRecord
from dltestbed.runner import RunContext, execute
from dltestbed.targets import make
from dltestbed.targets.base import Target


@register
class Single(Scenario):
    name = "single"
    alone_per_target = True

    def run(self, env: RunEnv) -> list[RunRecord]:
        """Every target of `env.machines` (a target per site and kind, made here when not given)."""
        plan = env.plan
        if env.machines is None:
            env = replace(env, machines=[[make(k, s) for k in env.kinds] for s in env.sites])

        def rounds(reps: list[int] | None) -> list[RunRecord]:
            return run_all(env, reps)

        if plan.precision is None:
            return rounds(None)
        records: list[RunRecord] = []
        for rep in range(1, plan.repeat + 1):  # --repeat auto: one interleaved repetition at a time
            records += rounds([rep])
            widest = widest_half_width(records)
            if rep >= MIN_N and widest is not None and widest <= plan.precision:
                env.on_note(
                    f"--repeat auto: stopped after {rep} repetitions: every overhead's 95 % interval is "
                    f"within ±{plan.precision:g} % (widest ±{widest:.2f} %)"
                )
                return records
        why = "no overhead could be computed" if widest is None else f"the widest interval is still ±{widest:.2f} %"
        env.on_note(f"--repeat auto: stopped at --max-repeat {plan.repeat} before ±{plan.precision:g} %: {why}")
        return records

    def runs_per_item(self, options: Options, hosts: Sequence[object]) -> int:
        return max(1, len(hosts))

    def scope(self, options: Options, hosts: Sequence[object]) -> str:
        return f" on {len(hosts)} hosts" if len(hosts) > 1 else ""

    def announce(self, options: Options, hosts: Sequence[object], where: str, total: int) -> str:
        mode = _mode(options) if len(hosts) > 1 else ""
        return f" = {total} run(s) on {where} {mode}".rstrip()


def _mode(options: Options) -> str:
    """How a bench's hosts take their turns, in words."""
    if not options.where.parallel:
        return "hosts one after another"
    return (
        "hosts at once"
        if options.where.hosts_at_once is None
        else f"at most {options.where.hosts_at_once} hosts at once"
    )


def widest_half_width(records: Sequence[RunRecord]) -> float | None:
    """The widest 95 % half-width, in %, of the overheads these runs give (A′ against A included);
    None while any compared group has no interval yet (fewer than 2 ok runs a side)."""
    groups = [g for g in summarise(records) if g.key.against_baseline]
    effects = [g.effect for g in groups if g.effect is not None]
    if not groups or len(effects) < len(groups):
        return None
    return max((e.hi_pct - e.lo_pct) / 2 for e in effects)


def run_machine(
    env: RunEnv, targets: Sequence[Target], reps: Sequence[int] | None, gpu: GpuSlot | None
) -> list[RunRecord]:
    """Run the plan on the targets of one machine, one run at a time, in the plan's order: for each
    repetition (all, or `reps`), every workload on every target — drift hits every kind alike. A second
    target of the same kind is the A′ arm (--aa). A failed run is recorded and the bench goes on.
    gpu: with --gpus per-gpu, the GPU these targets' runs are given (and its CPUs)."""
    bench, records = env.plan, []
    slots = list(zip(targets, arms([t.kind for t in targets]), strict=True))
    for round_ in bench.rounds(slots, reps):
        for rep, spec, (target, arm) in round_:
            # cbm: its container is pinned instead (ContainerTarget.confine: its GPU alone, its node's CPUs)
            spec = gpu.bind(spec, pin=target.kind == "bm") if gpu is not None else spec
            ctx = RunContext(bench_id=bench.bench_id, scenario=bench.scenario, repetition=rep, arm=arm)
            limit = env.options.where.run_timeout
            records.append(execute(target, spec, env.store, ctx, env.observer, timeout=limit, sinks=env.sinks))
    return records


def run_all(env: RunEnv, reps: Sequence[int] | None = None) -> list[RunRecord]:
    """Run the plan on every machine's targets (`env.machines`): machines at once (one thread each) or one after
    another; within a machine, interleaved (see `run_machine`). `env.gpus`: with --gpus per-gpu, each machine's
    GPU (machines then hold a set of targets per GPU, all of a host's GPUs at once, or with the options'
    `gpus_in_turn` one after another, hosts still at once unless not `parallel`). With `parallel`, at most
    `hosts_at_once` hosts at once (each host's GPUs together), the next host starting as one ends.

    One machine failing never stops or hides the others. Ctrl-C stops every machine's current run
    (each is stored as interrupted, with its steps) and is raised again once all have stopped.
    """
    machines, where = env.machines or [], env.options.where
    bound = list(env.gpus) if env.gpus is not None else [None] * len(machines)
    by_host: dict[str, list[int]] = {}
    for i, targets in enumerate(machines):
        by_host.setdefault(targets[0].host, []).append(i)
    groups = list(by_host.values())
    if env.options.gpus_in_turn and len(machines) > 1:  # a host's GPUs one after another

        def host(ii: list[int]) -> list[RunRecord]:
            return [r for i in ii for r in run_machine(env, machines[i], reps, bound[i])]

        if not where.parallel or len(groups) == 1:
            return [r for ii in groups for r in host(ii)]
        return _threads([partial(host, ii) for ii in groups], machines, where.hosts_at_once)

    def together(ii: list[int]) -> list[RunRecord]:  # a host's machines (its GPUs, per-gpu) at once
        return _at_once(env, [machines[i] for i in ii], [bound[i] for i in ii], reps)

    if not where.parallel and len(machines) > 1:  # hosts one after another; a host's GPUs (per-gpu) still at once
        return [r for ii in groups for r in together(ii)]
    if where.hosts_at_once is not None and where.hosts_at_once < len(groups):  # at most that many hosts at a time
        return _threads([partial(together, ii) for ii in groups], machines, where.hosts_at_once)
    return _at_once(env, machines, bound, reps)


def _at_once(
    env: RunEnv, machines: Sequence[Sequence[Target]], bound: Sequence[GpuSlot | None], reps: Sequence[int] | None
) -> list[RunRecord]:
    """`run_machine` on every machine at once, a thread each (one machine: in this thread); see run_all."""
    if len(machines) == 1:
        return run_machine(env, machines[0], reps, bound[0])
    jobs = [partial(run_machine, env, targets, reps, gpu) for targets, gpu in zip(machines, bound, strict=True)]
    return _threads(jobs, machines)


def _threads(
    jobs: Sequence[Callable[[], list[RunRecord]]], machines: Sequence[Sequence[Target]], at_most: int | None = None
) -> list[RunRecord]:
    """Each job in a thread of its own (at most `at_most` at a time), their records in the jobs' order; Ctrl-C
    aborts every target of `machines`, starts no further job, and is raised again once the jobs have stopped."""
    width = len(jobs) if at_most is None else max(1, min(at_most, len(jobs)))
    pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="dltestbed-machine")
    futures = [pool.submit(job) for job in jobs]
    try:
        wait(futures)
    except KeyboardInterrupt:
        for f in futures:  # a job not started yet never starts
            f.cancel()
        for targets in machines:
            for t in targets:
                t.abort()
        wait([f for f in futures if not f.cancelled()], timeout=60)
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    records: list[RunRecord] = []
    for f in futures:
        records.extend(f.result())
    return records
