"""Launchers: how a bench reaches its machines, one registered class each (`direct`, `slurm`, `kubernetes`). Each checks
what is cheap first, then holds what it took (VMs made or reused; Slurm's allocation) in a context that gives
it back whatever happens. The next one (PBS) is a module here and a line in LAUNCHERS."""

from __future__ import annotations

from dltestbed.choices import or_list
from dltestbed.errors import ConfigError
from dltestbed.orchestrate.launchers.base import Launcher, Say
from dltestbed.orchestrate.launchers.direct import Direct, bare_metal_hosts
from dltestbed.orchestrate.launchers.kubernetes import Kubernetes
from dltestbed.orchestrate.launchers.slurm import Slurm
from dltestbed.requests.bench import BenchRequest

__all__ = [
    "LAUNCHERS",
    "Direct",
    "Kubernetes",
    "Launcher",
    "Say",
    "Slurm",
    "bare_metal_hosts",
    "launcher_class",
    "launcher_for",
]

LAUNCHERS: dict[str, type[Launcher]] = {c.name: c for c in (Direct, Slurm, Kubernetes)}  # keyed by choices.LAUNCHERS


def launcher_for(request: BenchRequest) -> Launcher:
    """The request's launcher, its options checked (one line for a bad combination): another launcher's
    option given is refused first."""
    chosen = launcher_class(request.launch.launcher)
    for other in LAUNCHERS.values():
        if other is not chosen and (flags := other.given(request)):
            raise ConfigError(f"{flags[0]} goes with --launcher {other.name}")
    return chosen.chosen(request)


def launcher_class(name: str) -> type[Launcher]:
    """The launcher's class of that name (choices.LAUNCHERS), or one line that lists the known ones."""
    if name not in LAUNCHERS:
        raise ConfigError(f"unknown launcher {name!r}; known: {or_list(LAUNCHERS)}")
    return LAUNCHERS[name]
