"""single: each target runs alone, a plan's runs interleaved on the targets of a machine (`run`), the machines
at once (a thread each) or one after another (`run_all`); with --repeat auto, one interleaved repetition at a
time until every overhead's 95 % interval is narrow enough."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from functools import partial

from dltestbed.orchestrate.pergpu import GpuSlot
from dltestbed.orchestrate.planning import Plan, arms
from dltestbed.orchestrate.scenarios.base import RunEnv, Scenario, register
from dltestbed.report.inference import MIN_N
from dltestbed.report.stats import summarise
from dltestbed.requests.bench import Options
from dltestbed.results.records import RunRecord
from dltestbed.results.store import Store
from dltestbed.runner import Observer, RunContext, Sink, execute
from dltestbed.targets import make
from dltestbed.targets.base import Target


@register
class Single(Scenario):
    name = "single"
    alone_per_target = True

    def run(self, env: RunEnv) -> list[RunRecord]:
        """Every target of `env.machines` (a target per site and kind, made here when not given)."""
        plan, options = env.plan, env.options
        machines = env.machines or [[make(k, s) for k in env.kinds] for s in env.sites]

        def rounds(reps: list[int] | None) -> list[RunRecord]:
            return run_all(
                plan,
                machines,
                env.store,
                env.observer,
                timeout=options.where.run_timeout,
                parallel=options.where.parallel,
                sinks=env.sinks,
                at_most=options.where.hosts_at_once,
                reps=reps,
                gpus=env.gpus,
                in_turn=options.gpus_in_turn,
            )

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
    bench: Plan,
    targets: Sequence[Target],
    store: Store,
    observer: Observer,
    timeout: float | None = None,
    sinks: Sequence[Sink] = (),
    reps: Sequence[int] | None = None,
    gpu: GpuSlot | None = None,
) -> list[RunRecord]:
    """Run the plan on the targets of one machine, one run at a time, in the plan's order: for each
    repetition (all, or `reps`), every workload on every target — drift hits every kind alike. A second
    target of the same kind is the A′ arm (--aa). A failed run is recorded and the bench goes on.
    gpu: with --gpus per-gpu, the GPU these targets' runs are given (and its CPUs)."""
    records = []
    slots = list(zip(targets, arms([t.kind for t in targets]), strict=True))
    for round_ in bench.rounds(slots, reps):
        for rep, spec, (target, arm) in round_:
            # cbm: its container is pinned instead (ContainerTarget.confine: its GPU alone, its node's CPUs)
            spec = gpu.bind(spec, pin=target.kind == "bm") if gpu is not None else spec
            ctx = RunContext(bench_id=bench.bench_id, scenario=bench.scenario, repetition=rep, arm=arm)
            records.append(execute(target, spec, store, ctx, observer, timeout=timeout, sinks=sinks))
    return records


def run_all(
    bench: Plan,
    machines: Sequence[Sequence[Target]],
    store: Store,
    observer: Observer,
    timeout: float | None = None,
    parallel: bool = True,
    sinks: Sequence[Sink] = (),
    reps: Sequence[int] | None = None,
    gpus: Sequence[GpuSlot | None] | None = None,
    in_turn: bool = False,
    at_most: int | None = None,
) -> list[RunRecord]:
    """Run the plan on every machine's targets: machines at once (one thread each) or one after
    another; within a machine, interleaved (see `run_machine`). gpus: with --gpus per-gpu, each machine's GPU
    (machines then hold a set of targets per GPU, all of a host's GPUs at once, or with `in_turn` one after
    another, hosts still at once unless not `parallel`). at_most: with `parallel`, at most this many hosts at
    once (each host's GPUs together), the next host starting as one ends.

    One machine failing never stops or hides the others. Ctrl-C stops every machine's current run
    (each is stored as interrupted, with its steps) and is raised again once all have stopped.
    """
    bound = list(gpus) if gpus is not None else [None] * len(machines)
    by_host: dict[str, list[int]] = {}
    for i, targets in enumerate(machines):
        by_host.setdefault(targets[0].host, []).append(i)
    groups = list(by_host.values())
    if in_turn and len(machines) > 1:  # a host's GPUs one after another

        def host(ii: list[int]) -> list[RunRecord]:
            out: list[RunRecord] = []
            for i in ii:
                out += run_machine(bench, machines[i], store, observer, timeout, sinks, reps, bound[i])
            return out

        if not parallel or len(groups) == 1:
            return [r for ii in groups for r in host(ii)]
        return _threads([partial(host, ii) for ii in groups], machines, at_most)

    def together(ii: list[int]) -> list[RunRecord]:  # a host's machines (its GPUs, per-gpu) at once
        return _at_once(bench, [machines[i] for i in ii], [bound[i] for i in ii], store, observer, timeout, sinks, reps)

    if not parallel and len(machines) > 1:  # hosts one after another; a host's GPUs (per-gpu) still at once
        return [r for ii in groups for r in together(ii)]
    if at_most is not None and at_most < len(groups):  # at most `at_most` hosts at a time
        return _threads([partial(together, ii) for ii in groups], machines, at_most)
    return _at_once(bench, machines, bound, store, observer, timeout, sinks, reps)


def _at_once(
    bench: Plan,
    machines: Sequence[Sequence[Target]],
    bound: Sequence[GpuSlot | None],
    store: Store,
    observer: Observer,
    timeout: float | None,
    sinks: Sequence[Sink],
    reps: Sequence[int] | None,
) -> list[RunRecord]:
    """`run_machine` on every machine at once, a thread each (one machine: in this thread); see run_all."""
    if len(machines) == 1:
        return run_machine(bench, machines[0], store, observer, timeout, sinks, reps, bound[0])
    return _threads(
        [
            partial(run_machine, bench, targets, store, observer, timeout, sinks, reps, gpu)
            for targets, gpu in zip(machines, bound, strict=True)
        ],
        machines,
    )


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
