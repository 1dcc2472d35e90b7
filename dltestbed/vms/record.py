"""What dltestbed knows about each VM it made: a record (vm.json) and SSH keys in one folder per VM
under paths.vm_root(), kept on this machine even when the VM runs on an inventory host, so
`dltestbed teardown` finds every VM after a crash."""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from dltestbed import paths
from dltestbed.inventory import Host
from dltestbed.transport.ssh import SSH
from dltestbed.vms.hypervisor import Hypervisor
from dltestbed.vms.images import GUEST_VENV

DOMAIN_PREFIX = "dltestbed-"


@dataclass
class VMRecord:
    """What dltestbed knows about a VM it made (vm.json in the VM's folder)."""

    name: str  # the domain is DOMAIN_PREFIX + name
    uri: str
    address: str
    mac: str
    bridge: str
    virt_type: str
    vcpus: int
    memory_mib: int
    image_key: str
    container_tag: str
    container_digest: str
    created_at: float
    gpus: str | None = None  # what was asked to be passed through
    ready_seconds: float | None = None  # from start to SSH answering
    host: str | None = None  # the inventory host it runs on (None: this machine)
    pool_dir: str = ""  # its disks and console log, on that host
    vcpu_pins: tuple[str, ...] | list[str] = ()
    numa_node: int | None = None
    image_name: str = ""  # a user's own image (its file name); "": dltestbed's guest image
    disk_gib: int | None = None  # what was asked for the disk

    @property
    def folder(self) -> Path:
        """The VM's files on this machine: record and keys."""
        return paths.vm_root() / self.name

    @property
    def domain(self) -> str:
        """The libvirt domain name."""
        return DOMAIN_PREFIX + self.name

    @property
    def key_file(self) -> Path:
        """The private key the controller logs in with (0600, in a 0700 folder)."""
        return self.folder / "ssh" / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        """The VM's host key, generated here and given to the VM on its seed disk."""
        return self.folder / "ssh" / "known_hosts"

    @property
    def console_log(self) -> str:
        """Its serial console, on the hypervisor host."""
        return f"{self.pool_dir}/{self.name}.console.log"

    def save(self) -> None:
        """Write vm.json."""
        (self.folder / "vm.json").write_text(json.dumps(asdict(self), indent=2) + "\n")


def records() -> list[VMRecord]:
    """Every VM dltestbed has a folder for, by name."""
    out = []
    for meta in sorted(paths.vm_root().glob("*/vm.json")):
        with contextlib.suppress(ValueError, TypeError):
            raw = json.loads(meta.read_text())
            raw["vcpu_pins"] = tuple(raw.get("vcpu_pins") or ())
            out.append(VMRecord(**raw))
    return out


def record(name: str) -> VMRecord | None:
    """The record of one VM, or None."""
    return next((r for r in records() if r.name == name), None)


def hypervisor_of(rec: VMRecord, host: Host | None = None) -> Hypervisor:
    """Where a recorded VM runs (host: the inventory host, for SSH to it; not needed for libvirt)."""
    return Hypervisor(rec.uri, rec.pool_dir or str(paths.vm_root() / "pool"), host)


def guest_host(rec: VMRecord) -> Host:
    """The VM as an SSH host: root, with the key and host key dltestbed made for it."""
    return Host(
        name=rec.name,
        address=rec.address,
        port=22,
        user="root",
        key_file=str(rec.key_file),
        known_hosts_files=(str(rec.known_hosts),),
        groups=(),
        vars={"dltestbed_venv": GUEST_VENV},
    )


def guest_ssh(rec: VMRecord, via: Host | None = None, connect_timeout: float = 15.0) -> SSH:
    """SSH into the VM, checked against its own host key only; through the hypervisor host `via` when remote."""
    return SSH(guest_host(rec), via=via, known_hosts=[rec.known_hosts], connect_timeout=connect_timeout)
