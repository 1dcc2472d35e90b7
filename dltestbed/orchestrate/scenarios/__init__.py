"""Scenarios, each a registered class (base.py) in a module of its own: single (each target alone),
distributed (one job over several workers) and shared (a co-tenant on the same host while the foreground
is timed). Which targets, which workloads, which co-tenants, in which order."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from dltestbed.choices import COTENANTS, PER_GPU, SCENARIOS
from dltestbed.errors import ConfigError
from dltestbed.kinds import any_kind
from dltestbed.orchestrate import pergpu, planning
from dltestbed.orchestrate.scenarios import distributed, shared, single  # each registers its scenario
from dltestbed.orchestrate.scenarios.base import REGISTRY, RunEnv, Scenario, scenario
from dltestbed.orchestrate.scenarios.distributed import worker_count
from dltestbed.orchestrate.scenarios.shared import contention_label, cotenant_spec, split_cpus
from dltestbed.orchestrate.scenarios.single import widest_half_width
from dltestbed.requests.bench import Options
from dltestbed.results.records import RunRecord

__all__ = [
    "COTENANTS",
    "REGISTRY",
    "SCENARIOS",
    "Options",
    "RunEnv",
    "Scenario",
    "check",
    "contention_label",
    "cotenant_spec",
    "distributed",
    "run",
    "scenario",
    "shared",
    "single",
    "split_cpus",
    "widest_half_width",
    "worker_count",
]


def check(options: Options, hosts: Sequence[Any], plan: planning.Plan, kinds: Sequence[str] = ()) -> None:
    """Bad combinations fail before anything runs, with one line: what every scenario shares, then its own."""
    sc = scenario(options.scenario)
    if not sc.alone_per_target and (plan.aa or plan.precision is not None):
        raise ConfigError(f"--aa and --repeat auto are for --scenario single (not {options.scenario}) in this version")
    if pergpu.wanted(plan):
        if not sc.alone_per_target:
            raise ConfigError(f"--gpus {PER_GPU} runs with --scenario single (not {options.scenario}) in this version")
        if any_kind(kinds, lambda k: k.in_vm):
            raise ConfigError(f"--gpus {PER_GPU} runs on bm and cbm: a VM's GPUs are those --vm-gpus passes through")
    if options.workers is not None and not sc.takes_workers:
        raise ConfigError(
            f"--workers is only for --scenario {', '.join(n for n, s in REGISTRY.items() if s.takes_workers)}"
        )
    sc.check(options, hosts, plan, kinds)


def run(env: RunEnv) -> list[RunRecord]:
    """Run the plan as the scenario says on prepared sites (one per machine); every run is stored as
    it goes. single runs on `env.machines` (a target per site and kind; made here when not given);
    distributed and shared make a target per worker and co-tenant from the sites (nothing is built
    or booted here)."""
    options = env.options
    check(options, [s.host for s in env.sites], env.plan, env.kinds)
    env = dataclasses.replace(env, plan=dataclasses.replace(env.plan, scenario=options.scenario))
    return scenario(options.scenario).run(env)
