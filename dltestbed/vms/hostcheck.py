"""What a host can run: KVM or only TCG, and whether it can pass GPUs through. Pure functions on facts
(sysfs paths, libvirt capabilities and node-device XML), so they are tested on captured output."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

from dltestbed.choices import VIRT_TYPES, VirtType, or_list
from dltestbed.config import parse_cpu_list
from dltestbed.errors import ConfigError
from dltestbed.vms.domain import PciAddress

GPU_VENDORS = {"0x10de": "NVIDIA", "0x1002": "AMD"}


@dataclass(frozen=True)
class HostFacts:
    """What the checks need to know about a hypervisor host."""

    capabilities: str  # libvirt's capabilities XML
    kvm_pvm: bool  # /sys/module/kvm_pvm exists: a paravirtual nested KVM stock guest kernels cannot boot under
    dev_kvm: bool  # /dev/kvm exists
    iommu_groups: int  # entries of /sys/kernel/iommu_groups
    vfio: bool  # /dev/vfio exists (vfio-pci usable)
    numa_cpus: dict[int, str]  # NUMA node → its CPU list (/sys/devices/system/node/node*/cpulist)


def virt_type(facts: HostFacts, forced: str | None = None) -> tuple[VirtType, str | None]:
    """("kvm" | "qemu", a notice when it is qemu). Detected, not assumed: libvirt lists kvm wherever
    /dev/kvm opens, even where no guest can boot under it (kvm_pvm)."""
    root = ET.fromstring(facts.capabilities)
    types = {d.get("type") for d in root.iterfind("./guest/arch[@name='x86_64']/domain")}
    if forced:
        if forced not in VIRT_TYPES:
            raise ConfigError(f"dltestbed_vm_virt_type: {forced!r} is not {or_list(VIRT_TYPES)}")
        if forced not in types:
            raise ConfigError(
                f"dltestbed_vm_virt_type: {forced}, but libvirt on this host offers only "
                f"{', '.join(sorted(t for t in types if t)) or 'nothing'} for x86_64"
            )
        chosen: VirtType = "kvm" if forced == "kvm" else "qemu"
        return chosen, ("VMs run under TCG emulation (forced): much slower than KVM" if forced == "qemu" else None)
    why = None
    if "kvm" not in types or not facts.dev_kvm:
        why = "KVM is not available on this host"
    elif facts.kvm_pvm:
        why = "KVM here is the nested kvm_pvm variant, which stock guest kernels cannot boot under"
    if why:
        return "qemu", f"{why}: VMs run under TCG emulation, 100× slower or more; compare them only with each other"
    return "kvm", None


@dataclass(frozen=True)
class Gpu:
    """A GPU as libvirt's node devices describe it."""

    address: PciAddress
    vendor: str
    product: str
    driver: str | None
    iommu_group: int | None
    group_members: tuple[PciAddress, ...]
    numa_node: int | None


def gpus(nodedev_xmls: list[str]) -> list[Gpu]:
    """The GPUs among node devices (`virsh nodedev-dumpxml` / listAllDevices XML): display class, GPU vendor."""
    out = []
    for text in nodedev_xmls:
        dev = ET.fromstring(text)
        cap = dev.find("./capability[@type='pci']")
        if cap is None:
            continue
        cls = (cap.findtext("class") or "0x0").lower()
        vendor = cap.find("vendor")
        vendor_id = (vendor.get("id") or "").lower() if vendor is not None else ""
        if not cls.startswith("0x03") or vendor_id not in GPU_VENDORS:
            continue
        addr = PciAddress(*(int(cap.findtext(k) or "0") for k in ("domain", "bus", "slot", "function")))
        group = cap.find("iommuGroup")
        members = tuple(
            PciAddress(*(int(a.get(k) or "0", 16) for k in ("domain", "bus", "slot", "function")))
            for a in (group.iterfind("address") if group is not None else [])
        )
        numa = cap.find("numa")
        product = cap.find("product")
        out.append(
            Gpu(
                address=addr,
                vendor=GPU_VENDORS[vendor_id],
                product=(product.text or product.get("id") or "?") if product is not None else "?",
                driver=dev.findtext("./driver/name"),
                iommu_group=int(group.get("number", "-1")) if group is not None else None,
                group_members=members,
                numa_node=int(numa.get("node", "-1")) if numa is not None else None,
            )
        )
    return sorted(out, key=lambda g: str(g.address))


def _cpus(text: str) -> set[int]:
    return set(parse_cpu_list(text))


def passthrough_preflight(vm: str, wanted: str, facts: HostFacts, found: list[Gpu], pinned: list[str]) -> list[Gpu]:
    """The GPUs to pass to `vm` (`wanted`: "all", a count, or comma-separated PCI addresses), or one
    ConfigError line saying why this host cannot — before anything is created."""
    head = f"GPU passthrough to VM {vm}"
    if facts.iommu_groups == 0:
        raise ConfigError(
            f"{head}: this host has no IOMMU (/sys/kernel/iommu_groups is empty; enable VT-d or "
            "AMD-Vi in the firmware and boot with intel_iommu=on or amd_iommu=on); nothing was created"
        )
    if not facts.vfio:
        raise ConfigError(
            f"{head}: vfio-pci is not available (no /dev/vfio; load it with `modprobe vfio-pci`); nothing was created"
        )
    if not found:
        raise ConfigError(f"{head}: libvirt sees no GPU on this host; nothing was created")
    if wanted == "all":
        chosen = found
    elif wanted.isdigit():
        if int(wanted) > len(found):
            raise ConfigError(f"{head}: {wanted} GPU(s) asked, the host has {len(found)}")
        chosen = found[: int(wanted)]
    else:
        by_addr = {str(g.address): g for g in found}
        chosen = []
        for text in wanted.split(","):
            addr = str(PciAddress.parse(text))
            if addr not in by_addr:
                raise ConfigError(f"{head}: no GPU at {addr}; GPUs here: {', '.join(by_addr)}")
            chosen.append(by_addr[addr])
    chosen_slots = {(g.address.domain, g.address.bus, g.address.slot) for g in chosen}
    for g in chosen:
        others = [m for m in g.group_members if (m.domain, m.bus, m.slot) not in chosen_slots]
        if others:
            raise ConfigError(
                f"{head}: GPU {g.address} shares IOMMU group {g.iommu_group} with "
                f"{', '.join(map(str, others))}, which would have to be passed too"
            )
    pinned_cpus = set().union(*(_cpus(p) for p in pinned)) if pinned else set()
    for g in chosen:
        if g.numa_node is None or g.numa_node < 0 or not pinned_cpus:
            continue
        node_cpus = _cpus(facts.numa_cpus.get(g.numa_node, "")) if facts.numa_cpus.get(g.numa_node) else set()
        if node_cpus and not pinned_cpus <= node_cpus:
            raise ConfigError(
                f"{head}: GPU {g.address} is on NUMA node {g.numa_node} (CPUs "
                f"{facts.numa_cpus[g.numa_node]}) but the vCPUs are pinned to CPUs outside it; pin "
                f"them there (dltestbed_vm_numa_node: {g.numa_node})"
            )
    return chosen
