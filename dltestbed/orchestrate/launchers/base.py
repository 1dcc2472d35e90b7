"""What every launcher answers: how a bench reaches its machines (launchers/__init__ registers them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from dltestbed.inventory import Host
from dltestbed.orchestrate import gpus, prepare
from dltestbed.targets import Site

Say = Callable[[str], None]


class Launcher(Protocol):
    """How a bench reaches its machines."""

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
