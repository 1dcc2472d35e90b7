"""How a bench reaches its machines, as it is asked: the launcher, and the options of each launcher's own, a group
each (one panel of `dltestbed bench --help`, which they share). Pure data (dltestbed/panels.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar

from dltestbed.choices import LauncherName
from dltestbed.panels import given, opt, repeated

PANEL = "Launcher (--launcher; a scheduler's own options)"  # one panel for them all: the help stays short
# a cluster's kubeconfig: bench's launcher and accept's taints and labels read it
Kubeconfig = Annotated[
    str | None, opt("--kubeconfig", metavar="FILE", help="kubernetes: its kubeconfig ($KUBECONFIG).")
]


@dataclass(frozen=True)
class Launch:
    """How the bench reaches its machines: the launcher (orchestrate/launchers/, a module each), and how many a
    scheduler gives."""

    PANEL: ClassVar[str] = PANEL

    launcher: Annotated[
        LauncherName,
        opt("--launcher", metavar="HOW", help="direct, slurm or kubernetes."),
    ] = "direct"
    nodes: Annotated[int | None, opt("--nodes", help="Machines the scheduler gives (not direct).")] = None
    venv: Annotated[str | None, opt("--venv", metavar="DIR", help="slurm, kubernetes: the nodes' dltestbed venv.")] = (
        None
    )


class LauncherOptions:
    """A launcher's own options: each goes with that launcher only."""

    def given(self) -> list[str]:
        """The options given (other than their defaults), by their long names."""
        return given(self)


@dataclass(frozen=True)
class SlurmOptions(LauncherOptions):
    """What Slurm's launcher is given (over the inventory's dltestbed_slurm_* variables)."""

    PANEL: ClassVar[str] = PANEL

    partition: Annotated[str | None, opt("--partition", metavar="NAME", help="slurm: the partition.")] = None
    account: Annotated[str | None, opt("--account", metavar="NAME", help="slurm: the account to charge.")] = None
    time: Annotated[
        str | None, opt("--slurm-time", metavar="TIME", help="slurm: the allocation's limit, e.g. 1:30:00.")
    ] = None


@dataclass(frozen=True)
class KubernetesOptions(LauncherOptions):
    """What Kubernetes' launcher is given (over the inventory's dltestbed_k8s_* variables)."""

    PANEL: ClassVar[str] = PANEL

    kubeconfig: Kubeconfig = None
    namespace: Annotated[
        str | None, opt("--namespace", metavar="NAME", help="kubernetes: where the Jobs go (default).")
    ] = None
    image: Annotated[
        str | None, opt("--k8s-image", metavar="IMAGE", help="kubernetes: the workload image on the nodes.")
    ] = None
    qos: Annotated[
        str | None, opt("--k8s-qos", metavar="CLASS", help="kubernetes: besteffort, or guaranteed pods.")
    ] = None
    labels: Annotated[
        tuple[str, ...],
        opt(
            "--k8s-label",
            metavar="KEY=VALUE",
            help="kubernetes: a label on its Jobs; repeat it.",
            cli=list[str] | None,
            parse=repeated,
            given=None,
        ),
    ] = ()
