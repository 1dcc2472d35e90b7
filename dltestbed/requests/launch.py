"""How a bench reaches its machines, as it is asked: the launcher and the options of each launcher's own, a group
(one panel of `dltestbed bench --help`) each. Pure data (dltestbed/panels.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar

from dltestbed.choices import LauncherName
from dltestbed.panels import opt


@dataclass(frozen=True)
class Launch:
    """How the bench reaches its machines: the launcher (orchestrate/launchers/, a module each), and how many a
    scheduler gives."""

    PANEL: ClassVar[str] = "Launcher"

    launcher: Annotated[
        LauncherName, opt("--launcher", metavar="HOW", help="direct, or slurm: srun in one salloc.")
    ] = "direct"
    nodes: Annotated[int | None, opt("--nodes", help="Machines the scheduler gives (not direct).")] = None


@dataclass(frozen=True)
class SlurmOptions:
    """What Slurm's launcher is given (over the inventory's dltestbed_slurm_* variables)."""

    PANEL: ClassVar[str] = "Slurm (--launcher slurm)"

    partition: Annotated[str | None, opt("--partition", metavar="NAME", help="Partition.")] = None
    account: Annotated[str | None, opt("--account", metavar="NAME", help="Account to charge.")] = None
    time: Annotated[str | None, opt("--slurm-time", metavar="TIME", help="Allocation limit, e.g. 1:30:00.")] = None
    venv: Annotated[str | None, opt("--venv", metavar="DIR", help="dltestbed's venv on the nodes.")] = None
