"""A libvirt VM as a target: the workload runs in the guest's venv, reached over SSH with the key and
host key dltestbed made for that VM, through its libvirt host when that host is remote. A container
in the VM (cvm) wraps this target. The VM is made beforehand (provision's VM service): this only uses it."""

from __future__ import annotations

import socket
from collections.abc import Mapping

from dltestbed.inventory import Host
from dltestbed.targets.base import OnTransport, Target
from dltestbed.vms.images import GUEST_VENV
from dltestbed.vms.record import VMRecord, guest_ssh


class VMTarget(OnTransport):
    """Kind vm: the workload in a VM on `record.uri`'s host, reached through that host when it is remote."""

    kind = "vm"
    remote = True
    inner: Target | None = None
    peer_address = "127.0.0.1"  # a job's workers share their host's one VM (distributed on vm: one host)

    def __init__(
        self,
        record: VMRecord,
        connect_timeout: float = 15.0,
        via: Host | None = None,
        data_dir: str | None = None,
        compile_cache: str | None = None,
    ) -> None:
        self.record = record
        self.data_dir = data_dir
        self.compile_cache = compile_cache
        self.via = via  # the hypervisor host to jump through (the VM's bridge is private to it)
        self.name = record.name
        self.host = record.name
        self.machine = record.host or socket.gethostname()
        self.python = f"{GUEST_VENV}/bin/python"
        self._transport = guest_ssh(record, via, connect_timeout)

    def fingerprint(self) -> Mapping[str, str]:
        """The layer facts: a VM, how it is virtualised, on which hypervisor, from which image (vm_image:
        its key; vm_image_name: the file, for a user's own image)."""
        r = self.record
        return {
            "target_kind": self.kind,
            "target_host": r.name,
            "target_address": r.address,
            "transport": "ssh",
            "vm_virt_type": r.virt_type,
            "vm_vcpus": str(r.vcpus),
            "vm_memory_mib": str(r.memory_mib),
            "vm_image": r.image_key,
            "vm_hypervisor": r.host or "local",
            "vm_libvirt_uri": r.uri.split("?")[0],
            **({"vm_image_name": r.image_name} if r.image_name else {}),
            **({"vm_vcpu_pins": ",".join(r.vcpu_pins)} if r.vcpu_pins else {}),
            **({"vm_numa_node": str(r.numa_node)} if r.numa_node is not None else {}),
        }
