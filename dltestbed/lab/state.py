"""What a lab is made of, kept on disk so `down` can remove it even after a crashed `up`."""

from __future__ import annotations

import ipaddress
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dltestbed import paths
from dltestbed.config import format_cpu_list, missing_cpu, parse_cpu_list
from dltestbed.errors import ConfigError
from dltestbed.requests.lab import DEFAULT_SUBNET, LabSpec

NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,5}$")  # short: interface names are at most 15 characters
FIRST_HOST_OCTET = 11


def bridge_name(lab: str) -> str:
    """The lab's bridge (interface names are at most 15 characters: hence the short lab names)."""
    return f"dltb-{lab}"


def netns_name(lab: str, index: int | str) -> str:
    """Host `index`'s network namespace; with index "" the prefix of them all."""
    return f"dlt-{lab}-h{index}"


def veth_name(lab: str, index: int | str) -> str:
    """Host `index`'s veth on the bridge side; with index "" the prefix of them all."""
    return f"dltv-{lab}-{index}"


def labs_root() -> Path:
    """$DLTESTBED_LAB_DIR, else /var/lib/dltestbed/labs."""
    return paths.labs_root()


@dataclass
class LabHost:
    """One lab host: a network namespace with its own sshd, hostname and writable /etc, /root, /tmp."""

    name: str
    index: int
    ip: str
    netns: str
    veth: str
    pid: int | None = None  # the host's init (unshare) process; its mount namespace dies with it
    cpus: str | None = None  # CPU affinity of everything the host runs (a host with fewer cores), e.g. "0"

    def dir(self, lab_dir: Path) -> Path:
        """Its files: upper and work layers of the overlay, host key, log."""
        return lab_dir / "hosts" / self.name


@dataclass
class LabState:
    """A lab on this machine. status: creating, up."""

    name: str
    subnet: str
    bridge: str
    bridge_ip: str
    status: str = "creating"
    containers: bool = False  # hosts are also container hosts (podman, storage on a real filesystem)
    vms: bool = False  # hosts are also libvirt hosts (this machine's libvirtd, its socket bound into each host)
    shares: list[str] = field(default_factory=list)  # folders of this machine every host sees read-only, same path
    hosts: list[LabHost] = field(default_factory=list)
    bastion: LabHost | None = None  # with --bastion: the only host this machine reaches; the others through it
    slurm: bool = False  # with --slurm: a Slurm cluster, slurmctld on this machine and a slurmd per host
    capacity: bool = False  # with --capacity: each host a fixed share of the cores, by its CPUs (cgroups.py)
    kubernetes: bool = False  # with --kubernetes: a Kubernetes cluster, its control plane here, each host a node

    @property
    def all_hosts(self) -> list[LabHost]:
        """The hosts, and the bastion when there is one."""
        return [*([self.bastion] if self.bastion else []), *self.hosts]

    @property
    def dir(self) -> Path:
        """Its folder under labs_root()."""
        return labs_root() / self.name

    @property
    def key(self) -> Path:
        """The private SSH key the lab's inventory uses."""
        return self.dir / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        """The host keys of the lab's hosts, recorded when they were made."""
        return self.dir / "known_hosts"

    @property
    def inventory(self) -> Path:
        """The Ansible inventory for the lab."""
        return self.dir / "inventory.yml"

    def save(self) -> None:
        """Write state.json (atomically)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / "state.json.tmp"
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(self.dir / "state.json")

    @classmethod
    def load(cls, name: str) -> LabState | None:
        """The saved state of a lab, or None."""
        path = labs_root() / name / "state.json"
        if not path.exists():
            return None
        raw = json.loads(path.read_text())
        raw["hosts"] = [LabHost(**h) for h in raw.get("hosts", [])]
        raw["bastion"] = LabHost(**raw["bastion"]) if raw.get("bastion") else None
        return cls(**raw)


def plan(spec: LabSpec) -> LabState:
    """The names and addresses of the lab the spec asks for, validated."""
    name, hosts, subnet = spec.name, spec.hosts, spec.subnet
    if not NAME_RE.match(name):
        raise ConfigError(f"lab name {name!r}: 1-6 lowercase letters or digits, starting with a letter")
    try:
        net = ipaddress.ip_network(subnet)
    except ValueError:
        raise ConfigError(f"--subnet {subnet!r} is not an IPv4 network like {DEFAULT_SUBNET}") from None
    if net.version != 4 or not net.is_private or net.prefixlen > 24:
        raise ConfigError(f"--subnet {subnet!r}: a private IPv4 network of /24 or larger is needed")
    max_hosts = 64
    if not 1 <= hosts <= max_hosts:
        raise ConfigError(f"--hosts must be between 1 and {max_hosts} (got {hosts})")
    for flag, asked in (("--slurm", spec.slurm), ("--kubernetes", spec.kubernetes)):
        if asked and spec.bastion:
            raise ConfigError(
                f"{flag} and --bastion: the hosts behind a bastion cannot reach its controller on this machine; "
                "choose one"
            )
    base = net.network_address
    state = LabState(
        name=name,
        subnet=str(net),
        bridge=bridge_name(name),
        bridge_ip=str(base + 1),
        containers=spec.containers,
        vms=spec.vms,
        slurm=spec.slurm,
        capacity=spec.capacity,
        kubernetes=spec.kubernetes,
    )
    for i in range(1, hosts + 1):
        state.hosts.append(
            LabHost(
                name=f"{name}-h{i}",
                index=i,
                ip=str(base + FIRST_HOST_OCTET - 1 + i),
                netns=netns_name(name, i),
                veth=veth_name(name, i),
            )
        )
    if spec.bastion:
        state.bastion = LabHost(
            name=f"{name}-bastion",
            index=0,
            ip=str(base + FIRST_HOST_OCTET - 1),
            netns=netns_name(name, 0),
            veth=veth_name(name, 0),
        )
    for key, value in spec.cpus:
        host = next((h for h in state.hosts if key in (h.name, str(h.index))), None)
        if host is None:
            raise ConfigError(
                f"--host-cpus {key}={value}: no host {key!r} in a lab of {hosts} (give 1-{hosts} or a name)"
            )
        host.cpus = _cpus(key, value)
    state.shares = [_share(p) for p in dict.fromkeys(spec.shares)]
    return state


def _share(path: str) -> str:
    """An absolute folder of this machine, resolved; a ConfigError line otherwise."""
    p = Path(path)
    if not p.is_absolute() or not p.is_dir():
        raise ConfigError(f"--share {path}: not an absolute path to a folder of this machine")
    return str(p.resolve())


def _cpus(key: str, value: str) -> str:
    """A CPU list this machine has, normalised; a ConfigError line otherwise."""
    try:
        wanted = parse_cpu_list(value)
    except ValueError as exc:
        raise ConfigError(f"--host-cpus {key}={value}: {exc}") from None
    if why := missing_cpu(wanted, os.sched_getaffinity(0)):
        raise ConfigError(f"--host-cpus {key}={value}: {why}")
    return format_cpu_list(wanted)
