"""A libvirt VM as a target: the workload runs in the guest's venv, reached over SSH with the key and
host key dltestbed made for that VM. A container in the VM (cvm) wraps this target."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dltestbed.inventory import Host
from dltestbed.targets.ssh import SSHTarget

if TYPE_CHECKING:
    from dltestbed.vms.lifecycle import VMRecord

GUEST_VENV = "/opt/dltestbed/venv"


class VMTarget(SSHTarget):
    """Kind vm: the workload in a VM on `record.uri`'s host, reached through that host when it is remote."""

    kind = "vm"

    def __init__(self, record: VMRecord, connect_timeout: float = 15.0, via: Host | None = None) -> None:
        host = Host(name=record.name, address=record.address, port=22, user="root", key_file=str(record.key_file),
                    known_hosts_files=(str(record.known_hosts),), groups=(),
                    vars={"dltestbed_venv": GUEST_VENV})  # fmt: skip
        super().__init__(host, connect_timeout=connect_timeout)
        self.record = record
        self.via = via  # the hypervisor host to jump through (the VM's bridge is private to it)
        self.name = record.name
        self.host = record.name

    def _gateway(self) -> Any:
        if self.via is None:
            return None
        return SSHTarget(self.via, connect_timeout=self.connect_timeout)._connect()

    def _known_hosts(self) -> list[Path]:
        return [self.record.known_hosts]  # the key made for this VM, and no other

    def fingerprint(self) -> Mapping[str, str]:
        """The layer facts: a VM, how it is virtualised, on which hypervisor, from which image (vm_image:
        its key; vm_image_name: the file, for a user's own image)."""
        r = self.record
        return {"target_kind": self.kind, "target_host": r.name, "target_address": r.address, "transport": "ssh",
                "vm_virt_type": r.virt_type, "vm_vcpus": str(r.vcpus), "vm_memory_mib": str(r.memory_mib),
                "vm_image": r.image_key, "vm_hypervisor": r.host or "local", "vm_libvirt_uri": r.uri.split("?")[0],
                **({"vm_image_name": r.image_name} if r.image_name else {}),
                **({"vm_vcpu_pins": ",".join(r.vcpu_pins)} if r.vcpu_pins else {}),
                **({"vm_numa_node": str(r.numa_node)} if r.numa_node is not None else {})}  # fmt: skip
