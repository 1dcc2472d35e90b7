"""What every launcher answers: how a bench reaches its machines (launchers/__init__ registers them). Everything a
launcher decides is here, so that a launcher is its module and a line in the registry: no other module compares a
launcher's name or holds a field of one launcher's (a scheduler's machine is a targets.Placement)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from dltestbed.inventory import Host, Inventory
from dltestbed.orchestrate import gpus, prepare
from dltestbed.panels import flags
from dltestbed.requests.bench import BenchRequest
from dltestbed.targets import Site

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Say = Callable[[str], None]
Opts = TypeVar("Opts", bound="DataclassInstance")


def site_options(opts: Opts, inv: Inventory, variables: Mapping[str, str]) -> Opts:
    """A launcher's options (a group of requests/launch.py) with those the command line left out taken from the
    inventory's variables (field → variable: a site's setting, for group `all`; hosts that disagree are one line
    naming the option)."""
    flag = flags(type(opts))
    found: dict[str, Any] = {}
    for name, var in variables.items():
        value = inv.site_var(var, flag[name]) if getattr(opts, name) is None else None
        if value is not None:
            found[name] = value
    return replace(opts, **found)


class Launcher(Protocol):
    """How a bench reaches its machines."""

    name: ClassVar[str]  # its --launcher name (choices.LAUNCHERS)

    @classmethod
    def chosen(cls, request: BenchRequest) -> Launcher:
        """The launcher for a request that chose it, its own options checked first (one line for a bad one)."""
        ...

    @staticmethod
    def given(request: BenchRequest) -> list[str]:
        """The options of this launcher's own the request gave: each goes with this launcher only."""
        ...

    @staticmethod
    def on_this_machine(request: BenchRequest) -> bool:
        """Whether the bench runs on this machine (`--preset auto` then asks this machine's GPUs)."""
        ...

    def hosts(self) -> list[Host | None]:
        """The machines the bench plans for (None: this machine, or a node not given yet)."""
        ...

    def auto_kinds(self, scenario: str, runtime: str | None, frameworks: Sequence[str] = ()) -> prepare.AutoKinds:
        """`--targets auto` where this launcher runs (a container where an image carries `frameworks`), with the
        line that says why."""
        ...

    def check(self, setup: prepare.Setup) -> None:
        """Everything cheap about the machines, before anything is made or allocated."""
        ...

    def seen_gpus(self, kinds: Sequence[str], local: gpus.Local) -> list[gpus.Seen]:
        """After check: what each target (kind and machine) has of GPUs, as far as it is known before any
        run (a host's are read over SSH: only when an option needs a GPU)."""
        ...

    def sites(self, bench_id: str, say: Say) -> AbstractContextManager[list[Site]]:
        """A context: the prepared sites, held until it ends (then given back, Ctrl-C included)."""
        ...

    @property
    def waiting_for(self) -> str:
        """What a Ctrl-C during `sites` interrupted, in words."""
        ...
