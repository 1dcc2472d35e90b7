"""shared: the foreground alone, then again while a co-tenant runs on the same host (started first,
timed only once it has passed its warm-up, stopped after the foreground)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from dltestbed.catalog import MODELS
from dltestbed.choices import COTENANTS, or_list
from dltestbed.config import WorkloadSpec, format_cpu_list, workload_spec
from dltestbed.errors import ConfigError, WorkloadError
from dltestbed.orchestrate import planning
from dltestbed.orchestrate.scenarios.base import RunEnv, Scenario, register
from dltestbed.orchestrate.scenarios.common import CPUS, HAS_GPU, probe
from dltestbed.requests.bench import Options
from dltestbed.results.records import COTENANT, RunRecord, new_id
from dltestbed.runner import RunContext, execute
from dltestbed.targets import make
from dltestbed.targets.base import INTERRUPTED, NOT_NEEDED, Abort

COTENANT_START_TIMEOUT = 900.0  # seconds for a co-tenant to reach its first timed step
COTENANT_MARGIN = 120.0  # seconds a co-tenant may outlive the foreground's own bound before it is stopped


@register
class Shared(Scenario):
    name = "shared"
    one_host = True

    def check(self, options: Options, hosts: Sequence[Any], plan: planning.Plan, kinds: Sequence[str]) -> None:
        if len(plan.models) < len(plan.specs):
            raise ConfigError(
                "--suite micro, full and screen run with --scenario single (probes on each target) or "
                "distributed (net and allreduce between workers), not shared"
            )
        if options.cotenant not in COTENANTS:
            raise ConfigError(f"--cotenant: unknown co-tenant {options.cotenant!r}; known: {', '.join(COTENANTS)}")
        if options.cotenant == "io" and not any(s.data_dir for s in plan.specs):
            raise ConfigError("--cotenant io reads real data: give --data real --data-dir DIR")
        if len(hosts) > 1:
            raise ConfigError(f"scenario shared runs on one host; {len(hosts)} given (use --limit HOST)")
        if options.cotenant_batch is not None and options.cotenant_batch < 1:
            raise ConfigError(f"--cotenant-batch: must be at least 1 (got {options.cotenant_batch})")

    def run(self, env: RunEnv) -> list[RunRecord]:
        return run(env)

    def runs_per_item(self, options: Options, hosts: Sequence[object]) -> int:
        return 2

    def scope(self, options: Options, hosts: Sequence[object]) -> str:
        return f" (alone, then beside co-tenant {options.cotenant})"

    def announce(self, options: Options, hosts: Sequence[object], where: str, total: int) -> str:
        iso = ", isolated CPUs" if options.isolate else ""
        return f", each alone and beside co-tenant {options.cotenant}{iso}, on {where}"

    def at_once(self, options: Options) -> int:
        return 2

    def gpu_pools(self, options: Options) -> int:
        return 1 if options.cotenant == "cpu" else 2  # the co-tenant's pool beside the foreground's

    def gpu_needs(self, options: Options) -> list[tuple[str, str]]:
        others = or_list(c for c in COTENANTS if c != "gpu")
        return [("--cotenant gpu", f"use --cotenant {others}")] if options.cotenant == "gpu" else []


def run(env: RunEnv) -> list[RunRecord]:
    """Per repetition, workload and kind on the first site: the foreground alone, then with the co-tenant
    running."""
    plan, site, kinds, options = env.plan, env.sites[0], env.kinds, env.options
    probe_target = make("bm", site)
    batch = options.cotenant_batch or (512 if probe(probe_target, HAS_GPU) == "1" else 64)
    halves: dict[str, tuple[str | None, str | None]] = {}
    for kind in kinds:  # --isolate: each kind's halves of the CPUs its own workload may use (the VM's for vm)
        where = f"for {kind} on {site.label}"
        halves[kind] = (None, None)
        if options.isolate:
            halves[kind] = split_cpus(probe(make(kind, site), CPUS, inside=True), where)
    records: list[RunRecord] = []
    for round_ in plan.rounds(kinds):
        for rep, spec, kind in round_:
            if not isinstance(spec, WorkloadSpec):  # scenarios.check refuses the micro suite before this
                raise ConfigError("--scenario shared runs models, not the micro suite")
            fg_cpus, co_cpus = halves[kind]
            job = new_id("j")
            fg = spec.model_copy(update={"cpus": fg_cpus})
            co = cotenant_spec(options.cotenant, batch, spec, co_cpus)
            alone = "none" + (f", cpus {fg_cpus}" if fg_cpus else "")
            ctx = RunContext(plan.bench_id, Shared.name, rep, contention=alone, job_id=job)
            limit = options.where.run_timeout
            records.append(execute(make(kind, site), fg, env.store, ctx, env.observer, timeout=limit, sinks=env.sinks))
            label = contention_label(options.cotenant, batch, fg_cpus, co_cpus)
            records += _with_cotenant(env, rep, job, kind, (fg, co), label)
    return records


def split_cpus(cpu_list: str, where: str = "on the host") -> tuple[str, str]:
    """Two disjoint halves of a CPU list: the foreground's (first half) and the co-tenant's."""
    cpus = [int(c) for c in cpu_list.split(",") if c.strip()]
    if len(cpus) < 2:
        raise ConfigError(f"--isolate needs at least 2 CPUs {where}; it has {len(cpus)}")
    half = len(cpus) // 2
    return format_cpu_list(cpus[:half]), format_cpu_list(cpus[half:])


def contention_label(cotenant: str, batch: int, fg_cpus: str | None, co_cpus: str | None) -> str:
    """What a foreground run ran under, e.g. `alexnet b64` or `alexnet b64 isolated (cpus 0 / co-tenant 1)`."""
    label = f"{cotenant} b{batch}"
    return label + (f" isolated (cpus {fg_cpus} / co-tenant {co_cpus})" if fg_cpus else "")


def cotenant_spec(variant: str, batch: int, fg: WorkloadSpec, cpus: str | None) -> WorkloadSpec:
    """The co-tenant's workload: AlexNet training with the foreground's framework, at its size, math and GPU
    memory rule (growth, or the same slice), until it is stopped."""
    size = max(fg.size, MODELS["alexnet"].min_size)
    values: dict[str, Any] = dict(
        model="alexnet",
        framework=fg.framework,
        mode="train",
        batch_size=batch,
        image_size=size,
        warmup=1,
        steps=10**9,
        device="auto",
        cpus=cpus,
        seed=fg.seed + 1,
        math=fg.math,
        xla=fg.xla,
        gpu_memory_mib=fg.gpu_memory_mib,
    )
    if variant == "cpu":
        values.update(device="cpu", math="float32" if fg.math == "tf32" else fg.math)
    elif variant == "gpu":
        values["device"] = "gpu"
    elif variant == "io":
        values.update(
            data="real",
            data_dir=fg.data_dir,
            classes=fg.classes,
            data_digest=fg.data_digest,
            data_files=fg.data_files,
            data_bytes=fg.data_bytes,
        )
    return workload_spec(**values)


def _with_cotenant(
    env: RunEnv, rep: int, job: str, kind: str, specs: tuple[WorkloadSpec, WorkloadSpec], label: str
) -> list[RunRecord]:
    """Start the co-tenant (`specs`' second) on the first site, wait for its first timed step, time the foreground
    (the first), stop the co-tenant."""
    plan, site, store, observer, sinks = env.plan, env.sites[0], env.store, env.observer, env.sinks
    fg, co = specs
    limit = env.options.where.run_timeout
    co_target = make(kind, site)
    started, ended, ending = threading.Event(), threading.Event(), threading.Event()
    co_record: list[RunRecord] = []
    co_ctx = RunContext(plan.bench_id, Shared.name, rep, contention=label, role=COTENANT, job_id=job)

    # bounded like the foreground it contends with (its --run-timeout), plus its start and a margin
    bound = limit + COTENANT_START_TIMEOUT + COTENANT_MARGIN if limit else None

    def cotenant() -> None:
        try:
            record = execute(co_target, co, store, co_ctx, observer, timeout=bound, sinks=sinks, on_start=started)
            co_record.append(record)
        finally:  # its end, once its record is kept, however long the store took: wakes the wait below
            ended.set()
            started.set()

    thread = threading.Thread(target=cotenant, name="dltestbed-cotenant")
    thread.start()

    def end_cotenant(why: Abort) -> None:
        if not ending.is_set():
            ending.set()
            co_target.abort(why)
        while thread.is_alive():
            thread.join(0.2)

    try:
        started.wait(COTENANT_START_TIMEOUT)  # its first timed step, or its end (however long its store takes)
        if ended.is_set() or not started.is_set():
            end_cotenant(Abort("the co-tenant did not reach its first timed step in time"))
            why = co_record[0].reason if co_record else f"no timed step within {COTENANT_START_TIMEOUT:.0f} s"
            raise WorkloadError(
                f"the co-tenant ({label}) could not start on {co_target.host}: {why} "
                f"(log: {co_record[0].log_path if co_record else '-'})"
            )
        ctx = RunContext(plan.bench_id, Shared.name, rep, contention=label, job_id=job)
        fg_record = execute(make(kind, site), fg, store, ctx, observer, timeout=limit, sinks=sinks)
        if not thread.is_alive() and co_record and co_record[0].status != "ok":
            fg_record.status, fg_record.reason = "failed", f"the co-tenant stopped early: {co_record[0].reason}"
            store.save_run(fg_record)
    except BaseException as exc:  # Ctrl-C, a failure to start, or anything unforeseen: never left running
        end_cotenant(Abort(INTERRUPTED if isinstance(exc, KeyboardInterrupt) else f"the bench stopped: {exc}"))
        raise
    end_cotenant(NOT_NEEDED)
    return [fg_record, *co_record]
