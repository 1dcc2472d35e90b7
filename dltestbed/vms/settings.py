"""A benchmark VM's shape: from the inventory host's variables, overridden by bench's --vm-* options."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from dltestbed.choices import VIRT_TYPES, or_list
from dltestbed.errors import ConfigError

VARS = {
    "vcpus": "dltestbed_vm_vcpus",
    "memory_mib": "dltestbed_vm_memory_mib",
    "virt_type": "dltestbed_vm_virt_type",
    "gpus": "dltestbed_vm_gpus",
    "cpus": "dltestbed_vm_cpus",
    "numa_node": "dltestbed_vm_numa_node",
    "image": "dltestbed_vm_image",
    "disk_gib": "dltestbed_vm_disk_gib",
}
INTS = ("vcpus", "memory_mib", "numa_node", "disk_gib")


def cpu_list(text: str) -> list[int]:
    """`0-3,8` → [0, 1, 2, 3, 8]; a ConfigError for anything else."""
    out: list[int] = []
    try:
        for part in str(text).split(","):
            lo, _, hi = part.strip().partition("-")
            out += list(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise ConfigError(f"CPU list {text!r} is not like 0-3,8") from None
    if not out or min(out) < 0:
        raise ConfigError(f"CPU list {text!r} is not like 0-3,8")
    return out


@dataclass(frozen=True)
class VMSettings:
    """vCPUs, memory, virtualisation, GPUs to pass through, host CPUs to pin to, NUMA node of its memory;
    the user's own disk image instead of dltestbed's guest image, and the disk size it gets."""

    vcpus: int = 2
    memory_mib: int = 3072
    virt_type: str | None = None  # kvm | qemu; None: detected
    gpus: str | None = None  # all, a count, or PCI addresses
    cpus: str | None = None  # host CPUs the vCPUs are pinned to
    numa_node: int | None = None
    image: str | None = None  # a qcow2 or raw image on this machine (cloud-init reads the seed); None: ours
    disk_gib: int | None = None  # the VM's disk (an overlay) at least this big; None: the image's size, or
    # DEFAULT_USER_DISK_GIB for a user's image (a cloud image is small, and the workload takes ~3 GB)

    @classmethod
    def from_vars(
        cls, host_vars: Mapping[str, Any], host: str, overrides: Mapping[str, Any] | None = None
    ) -> VMSettings:
        """The inventory host's dltestbed_vm_* variables, then the overrides; checked."""
        raw: dict[str, Any] = {}
        for f in fields(cls):
            value = host_vars.get(VARS[f.name])
            if value is not None and value != "":
                raw[f.name] = value
        raw.update({k: v for k, v in (overrides or {}).items() if v is not None})
        try:
            for name in INTS:
                if name in raw:
                    raw[name] = int(raw[name])
        except (TypeError, ValueError):
            bad = next(n for n in INTS if n in raw and not str(raw[n]).isdigit())
            raise ConfigError(f"{host}: {VARS[bad]} {raw[bad]!r} is not a whole number") from None
        least = {"vcpus": 1, "memory_mib": 256, "numa_node": 0, "disk_gib": 1}
        for name, low in least.items():
            if name in raw and raw[name] < low:
                raise ConfigError(f"{host}: {VARS[name]} {raw[name]} is below {low}")
        for name in ("virt_type", "gpus", "cpus", "image"):
            if name in raw:
                raw[name] = str(raw[name])
        if raw.get("virt_type") not in (None, *VIRT_TYPES):
            raise ConfigError(f"{host}: {VARS['virt_type']}: {or_list(VIRT_TYPES)} (got {raw['virt_type']!r})")
        out = cls(**raw)
        out.pins()  # checked now, not at create time
        return out

    @property
    def passthrough(self) -> bool:
        """Whether GPUs are passed through ("0" or empty: none)."""
        return self.gpus not in (None, "", "0")

    def pins(self) -> tuple[str, ...]:
        """One host CPU list per vCPU: each vCPU on its own CPU when `cpus` has exactly as many, else
        every vCPU on the whole set."""
        if not self.cpus:
            return ()
        cpus = cpu_list(self.cpus)
        if len(cpus) == self.vcpus:
            return tuple(str(c) for c in cpus)
        return tuple(self.cpus for _ in range(self.vcpus))
