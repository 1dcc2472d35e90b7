"""Scenarios: single (each target alone), distributed (one job over several workers) and shared
(a co-tenant on the same host while the foreground is timed). Which targets, which workloads,
which co-tenants, in which order."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dltestbed import bench as bench_mod
from dltestbed.catalog import MODELS
from dltestbed.config import WorkloadSpec, format_cpu_list, workload_spec
from dltestbed.errors import ConfigError, TargetError, WorkloadError
from dltestbed.results.records import RunRecord, new_id
from dltestbed.results.store import Store
from dltestbed.runner import Observer, RunContext, Sink, Stop, execute
from dltestbed.targets import VM_KINDS, Site, make
from dltestbed.targets.base import Target, machine_under
from dltestbed.workload.distributed import tf_config

SCENARIOS = {
    "single": "each target runs alone",
    "distributed": "one training job over several workers (MultiWorkerMirroredStrategy), per target kind",
    "shared": "the foreground alone, then again with a co-tenant on the same host",
}
COTENANTS = {
    "alexnet": "AlexNet training, large batch (the study's co-tenant)",
    "cpu": "AlexNet training on the CPU only (GPUs hidden)",
    "io": "AlexNet training on real data read from disk every step (needs --data-dir)",
    "gpu": "AlexNet training on the GPU (fails without one)",
}
INTERRUPTED = "interrupted (Ctrl-C or a stop signal)"
COTENANT_START_TIMEOUT = 900.0  # seconds for a co-tenant to reach its first timed step


@dataclass(frozen=True)
class Options:
    """What a scenario needs beyond the plan (each documented in `dltestbed bench --help`)."""

    scenario: str = "single"
    workers: int | None = None  # distributed: workers per job (default: one per host; this machine: 2)
    baseline: bool = True  # distributed: one worker alone per job, for scaling efficiency
    cotenant: str = "alexnet"
    cotenant_batch: int | None = None  # default: 512 with a GPU, else 64
    isolate: bool = False  # shared: foreground and co-tenant pinned to disjoint CPUs
    parallel: bool = True
    timeout: float | None = None


def check(options: Options, hosts: Sequence[Any], plan: bench_mod.Plan, kinds: Sequence[str] = ()) -> None:
    """Bad combinations fail before anything runs, with one line."""
    if options.scenario not in SCENARIOS:
        raise ConfigError(f"--scenario: unknown scenario {options.scenario!r}; known: {', '.join(SCENARIOS)}")
    if options.scenario == "distributed":
        n = worker_count(options, hosts)
        if n < 2:
            hint = "" if options.workers is not None else " (one per host; --workers N puts several on a host)"
            raise ConfigError(f"scenario distributed needs at least 2 workers; got {n}{hint}")
        if any(s.mode != "train" for s in plan.specs):
            raise ConfigError("scenario distributed trains (inference has no step shared between workers)")
        if VM_KINDS & set(kinds) and len(hosts) > 1:
            raise ConfigError("scenario distributed on vm/cvm: each host's VM sits on a bridge private to that host, "
                              "so workers in VMs on different hosts cannot reach each other; use one host "
                              "(--limit HOST --workers N: the workers share its VM) or bm/cbm")  # fmt: skip
    elif options.workers is not None:
        raise ConfigError("--workers is only for --scenario distributed")
    if options.scenario == "shared":
        if options.cotenant not in COTENANTS:
            raise ConfigError(f"--cotenant: unknown co-tenant {options.cotenant!r}; known: {', '.join(COTENANTS)}")
        if options.cotenant == "io" and not any(s.data_dir for s in plan.specs):
            raise ConfigError("--cotenant io reads real data: give --data real --data-dir DIR")
        if len(hosts) > 1:
            raise ConfigError(f"scenario shared runs on one host; {len(hosts)} given (use --limit HOST)")
        if options.cotenant_batch is not None and options.cotenant_batch < 1:
            raise ConfigError(f"--cotenant-batch: must be at least 1 (got {options.cotenant_batch})")


def worker_count(options: Options, hosts: Sequence[Any]) -> int:
    """Workers per distributed job."""
    if options.workers is not None:
        return options.workers
    return 2 if list(hosts) == [None] else len(hosts)


def run(
    plan: bench_mod.Plan,
    sites: Sequence[Site],
    kinds: Sequence[str],
    store: Store,
    observer: Observer,
    options: Options,
    sinks: Sequence[Sink] = (),
    machines: Sequence[Sequence[Target]] | None = None,
) -> list[RunRecord]:
    """Run the plan as the scenario says on prepared sites (one per machine); every run is stored as
    it goes. single runs on `machines` (a target per site and kind; made here when not given);
    distributed and shared make a target per worker and co-tenant from the sites (nothing is built
    or booted here)."""
    check(options, [s.host for s in sites], plan, kinds)
    plan.scenario = options.scenario
    if options.scenario == "distributed":
        return _distributed(plan, sites, kinds, store, observer, options, sinks)
    if options.scenario == "shared":
        return _shared(plan, sites[0], kinds, store, observer, options, sinks)
    machines = machines or [[make(k, s) for k in kinds] for s in sites]
    return bench_mod.run_all(plan, machines, store, observer, timeout=options.timeout, parallel=options.parallel,
                             sinks=sinks)  # fmt: skip


def _probe(target: Target, code: str) -> str:
    """The first stdout line of a Python snippet run on the machine under a target."""
    machine = machine_under(target)  # a container shares its host's network and CPUs
    lines: list[str] = []
    res = machine.run([machine.python, "-c", code], timeout=60, on_line=lines.append)
    if not res.ok or not lines:
        raise TargetError(f"{machine.host}: probe failed ({res.describe()}): {' '.join(res.stderr_tail[-1:])}")
    return lines[0].strip()


_FREE_PORT = "import socket; s = socket.socket(); s.bind(('', 0)); print(s.getsockname()[1])"
_CPUS = "import os; print(','.join(map(str, sorted(os.sched_getaffinity(0)))))"
_HAS_GPU = "import shutil, subprocess; print(int(bool(shutil.which('nvidia-smi')) and " \
           "subprocess.run(['nvidia-smi', '-L'], capture_output=True).returncode == 0))"  # fmt: skip


# ---------------------------------------------------------------- distributed


def _distributed(
    plan: bench_mod.Plan, sites: Sequence[Site], kinds: Sequence[str], store: Store, observer: Observer,
    options: Options, sinks: Sequence[Sink],
) -> list[RunRecord]:  # fmt: skip
    """Per repetition, workload and kind: (a single worker alone, then) one job over N workers."""
    n = worker_count(options, [s.host for s in sites])
    placement = [sites[i % len(sites)] for i in range(n)]
    records: list[RunRecord] = []
    for round_ in plan.rounds(kinds):
        for rep, spec, kind in round_:
            job = new_id("j")
            if options.baseline:
                ctx = RunContext(plan.bench_id, "distributed", rep, job_id=job, workers=1)
                records.append(execute(make(kind, placement[0]), spec, store, ctx, observer,
                                       timeout=options.timeout, sinks=sinks))  # fmt: skip
            records += _job(plan, rep, job, spec, kind, placement, store, observer, options, sinks)
    return records


def _job(
    plan: bench_mod.Plan, rep: int, job: str, spec: WorkloadSpec, kind: str, placement: Sequence[Site],
    store: Store, observer: Observer, options: Options, sinks: Sequence[Sink],
) -> list[RunRecord]:  # fmt: skip
    """One distributed job: workers start together; the first to fail stops the others; Ctrl-C stops all."""
    targets = [make(kind, s) for s in placement]
    addresses = _worker_addresses(targets)
    worker_spec = spec.model_copy(update={"distributed": True})
    stops = [Stop() for _ in targets]
    results: list[RunRecord | None] = [None] * len(targets)

    def stop_others(failed: int, reason: str) -> None:
        for j, t in enumerate(targets):
            if j != failed and stops[j].request(reason):
                t.abort()

    def worker(i: int) -> None:
        ctx = RunContext(plan.bench_id, "distributed", rep, job_id=job, workers=len(targets), worker_index=i)
        env = {"TF_CONFIG": tf_config(addresses, i)}
        rec = execute(targets[i], worker_spec, store, ctx, observer, timeout=options.timeout, env=env, sinks=sinks,
                      stop=stops[i])  # fmt: skip
        results[i] = rec
        if rec.status != "ok" and not stops[i].requested:
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
            port = _probe(t, _FREE_PORT)
            if (addr, port) not in taken:
                break
        else:
            raise TargetError(f"{t.host}: no free port found for a worker")
        taken.add((addr, port))
        out.append(f"{addr}:{port}")
    return out


# ---------------------------------------------------------------- shared


def _shared(
    plan: bench_mod.Plan, site: Site, kinds: Sequence[str], store: Store, observer: Observer, options: Options,
    sinks: Sequence[Sink],
) -> list[RunRecord]:  # fmt: skip
    """Per repetition, workload and kind: the foreground alone, then with the co-tenant running."""
    probe_target = make("bm", site)
    batch = options.cotenant_batch or (512 if _probe(probe_target, _HAS_GPU) == "1" else 64)
    fg_cpus = co_cpus = None
    if options.isolate:
        fg_cpus, co_cpus = split_cpus(_probe(probe_target, _CPUS))
    records: list[RunRecord] = []
    for round_ in plan.rounds(kinds):
        for rep, spec, kind in round_:
            job = new_id("j")
            fg = spec.model_copy(update={"cpus": fg_cpus})
            co = cotenant_spec(options.cotenant, batch, spec, co_cpus)
            alone = "none" + (f", cpus {fg_cpus}" if fg_cpus else "")
            ctx = RunContext(plan.bench_id, "shared", rep, contention=alone, job_id=job)
            records.append(execute(make(kind, site), fg, store, ctx, observer, timeout=options.timeout,
                                   sinks=sinks))  # fmt: skip
            label = contention_label(options.cotenant, batch, fg_cpus, co_cpus)
            records += _with_cotenant(plan, rep, job, kind, site, fg, co, label, store, observer, options, sinks)
    return records


def split_cpus(cpu_list: str) -> tuple[str, str]:
    """Two disjoint halves of a CPU list: the foreground's (first half) and the co-tenant's."""
    cpus = [int(c) for c in cpu_list.split(",") if c.strip()]
    if len(cpus) < 2:
        raise ConfigError(f"--isolate needs at least 2 CPUs on the host; it has {len(cpus)}")
    half = len(cpus) // 2
    return format_cpu_list(cpus[:half]), format_cpu_list(cpus[half:])


def contention_label(cotenant: str, batch: int, fg_cpus: str | None, co_cpus: str | None) -> str:
    """What a foreground run ran under, e.g. `alexnet b64` or `alexnet b64 isolated (cpus 0 / co-tenant 1)`."""
    label = f"{cotenant} b{batch}"
    return label + (f" isolated (cpus {fg_cpus} / co-tenant {co_cpus})" if fg_cpus else "")


def cotenant_spec(variant: str, batch: int, fg: WorkloadSpec, cpus: str | None) -> WorkloadSpec:
    """The co-tenant's workload: AlexNet training at the foreground's size, until it is stopped."""
    size = max(fg.size, MODELS["alexnet"].min_size)
    values: dict[str, Any] = dict(model="alexnet", mode="train", batch_size=batch, image_size=size, warmup=1,
                                  steps=10**9, device="auto", cpus=cpus, seed=fg.seed + 1)  # fmt: skip
    if variant == "cpu":
        values["device"] = "cpu"
    elif variant == "gpu":
        values["device"] = "gpu"
    elif variant == "io":
        values.update(data="real", data_dir=fg.data_dir, classes=fg.classes)
    return workload_spec(**values)


def _with_cotenant(
    plan: bench_mod.Plan, rep: int, job: str, kind: str, site: Site, fg: WorkloadSpec, co: WorkloadSpec,
    label: str, store: Store, observer: Observer, options: Options, sinks: Sequence[Sink],
) -> list[RunRecord]:  # fmt: skip
    """Start the co-tenant, wait for its first timed step, time the foreground, stop the co-tenant."""
    co_target = make(kind, site)
    stop, started = Stop(), threading.Event()
    co_record: list[RunRecord] = []
    co_ctx = RunContext(plan.bench_id, "shared", rep, contention=label, role="cotenant", job_id=job)

    def cotenant() -> None:
        co_record.append(execute(co_target, co, store, co_ctx, observer, sinks=sinks, stop=stop, on_start=started))

    thread = threading.Thread(target=cotenant, name="dltestbed-cotenant")
    thread.start()

    def end_cotenant(reason: str | None) -> None:
        if stop.request(reason):
            co_target.abort()
        while thread.is_alive():
            thread.join(0.2)

    try:
        started.wait(COTENANT_START_TIMEOUT)
        thread.join(0.5)  # a co-tenant that failed before its first step is ending now
        if not thread.is_alive() or not started.is_set():
            end_cotenant("the co-tenant did not reach its first timed step in time")
            why = co_record[0].reason if co_record else f"no timed step within {COTENANT_START_TIMEOUT:.0f} s"
            raise WorkloadError(f"the co-tenant ({label}) could not start on {co_target.host}: {why} "
                                f"(log: {co_record[0].log_path if co_record else '-'})")  # fmt: skip
        ctx = RunContext(plan.bench_id, "shared", rep, contention=label, job_id=job)
        fg_record = execute(make(kind, site), fg, store, ctx, observer, timeout=options.timeout, sinks=sinks)
        if not thread.is_alive() and co_record and co_record[0].status != "ok":
            fg_record.status, fg_record.reason = "failed", f"the co-tenant stopped early: {co_record[0].reason}"
            store.save_run(fg_record)
    except KeyboardInterrupt:
        end_cotenant(INTERRUPTED)
        raise
    end_cotenant(None)
    return [fg_record, *co_record]
