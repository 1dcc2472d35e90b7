"""Scenarios: single (each target alone), distributed (one job over several workers) and shared
(a co-tenant on the same host while the foreground is timed). Which targets, which workloads,
which co-tenants, in which order."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from dltestbed.choices import COTENANTS, SCENARIOS
from dltestbed.errors import ConfigError
from dltestbed.kinds import any_kind
from dltestbed.orchestrate import pergpu, planning
from dltestbed.orchestrate.pergpu import GpuSlot
from dltestbed.orchestrate.scenarios import distributed, shared
from dltestbed.orchestrate.scenarios.common import Options
from dltestbed.orchestrate.scenarios.distributed import worker_count
from dltestbed.orchestrate.scenarios.shared import contention_label, cotenant_spec, split_cpus
from dltestbed.report.inference import MIN_N
from dltestbed.report.stats import summarise
from dltestbed.results.records import RunRecord
from dltestbed.results.store import Store
from dltestbed.runner import Observer, Sink
from dltestbed.targets import Site, make
from dltestbed.targets.base import Target

__all__ = [
    "COTENANTS",
    "SCENARIOS",
    "Options",
    "check",
    "contention_label",
    "cotenant_spec",
    "run",
    "split_cpus",
    "worker_count",
]


def check(options: Options, hosts: Sequence[Any], plan: planning.Plan, kinds: Sequence[str] = ()) -> None:
    """Bad combinations fail before anything runs, with one line."""
    if options.scenario not in SCENARIOS:
        raise ConfigError(f"--scenario: unknown scenario {options.scenario!r}; known: {', '.join(SCENARIOS)}")
    if options.scenario == "shared" and len(plan.models) < len(plan.specs):
        raise ConfigError(
            "--suite micro, full and screen run with --scenario single (probes on each target) or "
            "distributed (net and allreduce between workers), not shared"
        )
    if options.scenario != "single" and (plan.aa or plan.precision is not None):
        raise ConfigError(f"--aa and --repeat auto are for --scenario single (not {options.scenario}) in this version")
    if pergpu.wanted(plan.specs):
        if options.scenario != "single":
            raise ConfigError(f"--gpus per-gpu runs with --scenario single (not {options.scenario}) in this version")
        if any_kind(kinds, lambda k: k.in_vm):
            raise ConfigError("--gpus per-gpu runs on bm and cbm: a VM's GPUs are those --vm-gpus passes through")
    if options.scenario == "distributed":
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


def run(
    plan: planning.Plan,
    sites: Sequence[Site],
    kinds: Sequence[str],
    store: Store,
    observer: Observer,
    options: Options,
    sinks: Sequence[Sink] = (),
    machines: Sequence[Sequence[Target]] | None = None,
    on_note: Callable[[str], None] = lambda line: None,
    gpus: Sequence[GpuSlot | None] | None = None,
) -> list[RunRecord]:
    """Run the plan as the scenario says on prepared sites (one per machine); every run is stored as
    it goes. single runs on `machines` (a target per site and kind; made here when not given);
    distributed and shared make a target per worker and co-tenant from the sites (nothing is built
    or booted here). A line the bench ends with (--repeat auto's stop) goes to on_note. gpus: with --gpus
    per-gpu, the GPU of each of `machines` (pergpu)."""
    check(options, [s.host for s in sites], plan, kinds)
    plan = dataclasses.replace(plan, scenario=options.scenario)
    if options.scenario == "distributed":
        return distributed.run(plan, sites, kinds, store, observer, options, sinks)
    if options.scenario == "shared":
        return shared.run(plan, sites[0], kinds, store, observer, options, sinks)
    machines = machines or [[make(k, s) for k in kinds] for s in sites]
    if plan.precision is None:
        return planning.run_all(
            plan, machines, store, observer, timeout=options.timeout, parallel=options.parallel, sinks=sinks, gpus=gpus
        )
    records: list[RunRecord] = []
    for rep in range(1, plan.repeat + 1):  # --repeat auto: one interleaved repetition at a time
        records += planning.run_all(
            plan,
            machines,
            store,
            observer,
            timeout=options.timeout,
            parallel=options.parallel,
            sinks=sinks,
            reps=[rep],
            gpus=gpus,
        )
        widest = widest_half_width(records)
        if rep >= MIN_N and widest is not None and widest <= plan.precision:
            on_note(
                f"--repeat auto: stopped after {rep} repetitions: every overhead's 95 % interval is "
                f"within ±{plan.precision:g} % (widest ±{widest:.2f} %)"
            )
            return records
    why = "no overhead could be computed" if widest is None else f"the widest interval is still ±{widest:.2f} %"
    on_note(f"--repeat auto: stopped at --max-repeat {plan.repeat} before ±{plan.precision:g} %: {why}")
    return records


def widest_half_width(records: Sequence[RunRecord]) -> float | None:
    """The widest 95 % half-width, in %, of the overheads these runs give (A′ against A included);
    None while any compared group has no interval yet (fewer than 2 ok runs a side)."""
    groups = [g for g in summarise(records) if g.key.against_baseline]
    effects = [g.effect for g in groups if g.effect is not None]
    if not groups or len(effects) < len(groups):
        return None
    return max((e.hi_pct - e.lo_pct) / 2 for e in effects)
