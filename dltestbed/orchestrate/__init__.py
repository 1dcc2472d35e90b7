"""The library call under `dltestbed bench`: a frozen request in, an outcome out, progress to an observer.
It owns choosing the kinds (auto, A/A), the one check of the whole request, the launcher's preparation,
the runs and the one store they go to."""

from __future__ import annotations

import dataclasses
import resource

from dltestbed.choices import AUTO_PRESET
from dltestbed.config import DEFAULT_FRAMEWORK
from dltestbed.errors import ConfigError
from dltestbed.kinds import BASELINE, KINDS
from dltestbed.orchestrate import gpus, planning, prepare, presets, preview, scenarios, unprivileged
from dltestbed.orchestrate.dataplace import Dataset
from dltestbed.orchestrate.launchers import Launcher, launcher_class, launcher_for
from dltestbed.orchestrate.planning import Plan
from dltestbed.orchestrate.request import (
    BenchInterrupted,
    BenchObserver,
    BenchOutcome,
    Silent,
)
from dltestbed.orchestrate.running import run_on
from dltestbed.requests.bench import (
    BenchRequest,
    Compute,
    Container,
    Options,
    Repetitions,
    VmSettings,
    Where,
    Workloads,
)
from dltestbed.requests.launch import Launch, SlurmOptions
from dltestbed.results import influx
from dltestbed.results.store import Store
from dltestbed.targets.unreachable import DID_NOT_ANSWER
from dltestbed.workload.frameworks import REGISTRY

__all__ = [
    "DID_NOT_ANSWER",
    "BenchInterrupted",
    "BenchObserver",
    "BenchOutcome",
    "BenchRequest",
    "Compute",
    "Container",
    "Launch",
    "Options",
    "Repetitions",
    "Silent",
    "SlurmOptions",
    "VmSettings",
    "Where",
    "Workloads",
    "run_bench",
]


def run_bench(request: BenchRequest, observer: BenchObserver) -> BenchOutcome:
    """Check the whole request (cheap: options, inventory, scenario, images, the stream, the store), prepare
    the machines (VMs, an allocation), run every workload on every kind as the scenario says, and store each
    run as it goes. Bad input is one DltestbedError before anything runs; Ctrl-C is BenchInterrupted, with
    the run under way stored failed and everything taken given back."""
    _raise_fd_limit()
    # the scenario runs where and as the request says (hosts at once, a run's limit)
    request = dataclasses.replace(request, scenario=dataclasses.replace(request.scenario, where=request.where))
    w, where, box = request.workloads, request.where, request.container
    local = gpus.Local(tuple(w.frameworks or (DEFAULT_FRAMEWORK,)))  # nvidia-smi once
    plan = _plan(request, observer, local)
    launcher = launcher_for(request)
    plan, kinds, runtime = _kinds(plan, launcher, request, observer)
    hosts = launcher.hosts()
    scenarios.check(request.scenario, hosts, plan, kinds)
    if where.data_shared and w.data != "real":
        raise ConfigError("--data-shared goes with --data real --data-dir DIR")
    limits = {"cpuset": box.cpuset, "memory": box.memory}
    dataset = Dataset.of(plan.specs[0], where.data_shared)
    vm = dataclasses.asdict(request.vm)
    setup = prepare.Setup(
        tuple(kinds), tuple(hosts), runtime, vm, limits, dataset, where.inventory, w.frameworks, box.as_user
    )
    launcher.check(setup)
    need = gpus.needs(plan, request.scenario)
    if need:  # an option that needs a GPU where a target has none, or pools that do not fit it: one line
        seen = launcher.seen_gpus(kinds, local)
        for line in gpus.check(need, seen):
            observer.say(line)
        gpus.fit(plan, request.scenario, seen)
    if request.stream is not None:
        influx.check(request.stream)
    if request.dry_run:
        planned = preview.lines(plan, kinds, request.scenario, hosts)
        return BenchOutcome(plan.bench_id, tuple(kinds), (), (), Store.where(request.results), tuple(planned))
    observer.expect(preview.count(plan, kinds, request.scenario, hosts), plan.precision is not None)
    store = Store.open(request.results)  # a store that cannot be written: one line before any VM or run
    notice = store.upgrade_notice()
    if notice:
        observer.say(notice)
    try:
        records, notes = run_on(launcher, plan, kinds, store, request, observer)
    finally:
        store.close()
    return BenchOutcome(plan.bench_id, tuple(kinds), tuple(records), tuple(notes), store.path)


def _plan(request: BenchRequest, observer: BenchObserver, local: gpus.Local) -> Plan:
    """The bench's plan: every workload spec, validated; then the preset auto chose, said on the first line."""
    w, device = request.workloads, request.where.device
    preset, why = w.preset, ""
    if preset == AUTO_PRESET:
        here = launcher_class(request.launch.launcher).on_this_machine(request)
        found = ([] if device == "cpu" else local.used_gpus()) if here else None
        labels = " and ".join(REGISTRY[f].label if f in REGISTRY else f for f in local.frameworks)
        preset, why = presets.auto_preset(found, labels)
    plan = planning.plan(w, request.compute, request.repetitions, device, request.scenario.scenario, preset)
    if why:  # once the options are valid: a mistake in one is its own line alone
        observer.say(why)
    return plan


def _kinds(
    plan: Plan, launcher: Launcher, request: BenchRequest, observer: BenchObserver
) -> tuple[Plan, list[str], str | None]:
    """The target kinds and container runtime: the request's, or what `auto` finds where the launcher runs
    (which may turn A/A on); with A/A, bare metal first and its A′ last in every repetition."""
    kinds, runtime = list(request.where.targets), request.container.runtime
    if kinds == ["auto"]:
        if runtime is not None:  # a runtime named is a container asked: a rootless one as root needs its user
            unprivileged.check(request.container.as_user, ("cbm",), runtime, launcher.hosts())
        auto = launcher.auto_kinds(request.scenario.scenario, runtime, request.workloads.frameworks)
        observer.say(auto.why)
        kinds, runtime = list(auto.kinds), runtime or auto.runtime
        plan = dataclasses.replace(plan, aa=plan.aa or auto.aa)
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise ConfigError(f"--targets: unknown kind {(unknown or [''])[0]!r}; known: auto, {', '.join(KINDS)}")
    if plan.aa:
        kinds = [BASELINE, *[k for k in kinds if k != BASELINE], BASELINE]  # A first, its A′ last in each repetition
    return plan, kinds, runtime


def _raise_fd_limit() -> None:
    """Open files up to the hard limit: a bench holds a few per host at once (its connection, the run's
    log), and the usual soft limit of 1024 would cap a fleet at a few hundred hosts."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
