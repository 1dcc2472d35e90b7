"""What a lab is asked (`dltestbed lab up`'s options, declared once: dltestbed/panels.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar

from dltestbed.errors import ConfigError
from dltestbed.panels import opt, repeated

DEFAULT_SUBNET = "10.213.77.0/24"
NAME_HELP = "Lab name (1-6 lowercase letters or digits); several labs can coexist."


def host_cpus(items: list[str] | None, option: str) -> tuple[tuple[str, str], ...]:
    """--host-cpus HOST=CPUS items as (host, CPUs) pairs; a ConfigError line for one without both."""
    out = []
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise ConfigError(f"{option}: HOST=CPUS, e.g. 4=0 or 2=0-1 (got {item!r})")
        out.append((key, value))
    return tuple(out)


@dataclass(frozen=True)
class LabSpec:
    """A lab of `hosts` hosts: its name, network, what the hosts are too, and how they share this machine."""

    PANEL: ClassVar[str | None] = None  # the command's one panel
    DEFAULTS_SHOWN: ClassVar[bool] = True

    hosts: Annotated[int, opt("--hosts", help="Number of hosts.")] = 2
    name: Annotated[str, opt("--name", help=NAME_HELP)] = "lab"
    subnet: Annotated[str, opt("--subnet", help="Private IPv4 network of the lab's bridge.")] = DEFAULT_SUBNET
    containers: Annotated[bool, opt("--containers", help="Hosts are container hosts too (Podman; cbm targets).")] = (
        False
    )
    vms: Annotated[
        bool,
        opt(
            "--vms",
            help="Hosts are libvirt hosts too (vm, cvm targets): each one reaches this machine's libvirtd through its "
            "socket, so VMs, pool and network are shared among them.",
        ),
    ] = False
    # host number or name → the CPUs everything on that host runs on (a host with fewer cores: a slow node to find)
    cpus: Annotated[
        tuple[tuple[str, str], ...],
        opt(
            "--host-cpus",
            help="N=CPUS: host N (its number or name) and everything it runs use only these CPUs, e.g. 4=0 — a host "
            "with fewer cores, to rehearse finding a slow node (`report --by-host`). Repeatable.",
            cli=list[str] | None,
            parse=host_cpus,
            given=None,
        ),
    ] = ()
    # one more host, the only one this machine reaches (the inventory goes through it)
    bastion: Annotated[
        bool,
        opt(
            "--bastion",
            help="One more host, NAME-bastion, the only one this machine can reach: the others answer only through "
            "it, and the inventory reaches them with a ProxyCommand (a site's jump host).",
        ),
    ] = False
    # a Slurm cluster of the hosts, its controller on this machine (lab/slurm.py)
    slurm: Annotated[
        bool,
        opt(
            "--slurm",
            help="A Slurm cluster of the hosts (Debian's slurm-wlm and munge): slurmctld on this machine, the submit "
            "host, and a slurmd on each host under its own node name, partition `lab`. Export the SLURM_CONF line "
            "it prints, then `bench --launcher slurm`.",
        ),
    ] = False
    # a Kubernetes cluster of the hosts, its control plane on this machine (lab/kube/)
    kubernetes: Annotated[
        bool,
        opt(
            "--kubernetes",
            help="A Kubernetes cluster of the hosts (1.20, built from Debian's source by scripts/install.sh "
            "--kubernetes): etcd, apiserver, scheduler and controller manager on this machine, and a kubelet with "
            "containerd on each host, a VXLAN pod network between them. Export the KUBECONFIG line it prints for "
            "kubectl and the Kubernetes client.",
        ),
    ] = False
    # each host a fixed share of this machine's cores, in proportion to its CPUs (lab/cgroups.py), as a node has
    capacity: Annotated[
        bool,
        opt(
            "--capacity",
            help="Each host a fixed share of this machine's cores, in proportion to its CPUs (a CPU cgroup quota it "
            "does not see): its speed does not depend on the other hosts, and a load on one host slows it alone, "
            "as on a rack.",
        ),
    ] = False
    # folders of this machine every host sees read-only at the same path (a shared filesystem)
    shares: Annotated[
        tuple[str, ...],
        opt(
            "--share",
            help="A folder of this machine every host sees read-only at the same path, as a site's shared "
            "filesystem (e.g. a venv named by the inventory's dltestbed_venv: nothing to provision). Repeatable.",
            cli=list[str] | None,
            parse=repeated,
            given=None,
        ),
    ] = ()
