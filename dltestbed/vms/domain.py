"""Domain XML from typed settings, built with ElementTree. Pure: no libvirt needed."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from dltestbed.choices import VirtType
from dltestbed.errors import ConfigError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_MAC = re.compile(r"^52:54:00(:[0-9a-f]{2}){3}$")


@dataclass(frozen=True)
class PciAddress:
    """A PCI function on the host, e.g. 0000:3b:00.0."""

    domain: int
    bus: int
    slot: int
    function: int

    @classmethod
    def parse(cls, text: str) -> PciAddress:
        """From `0000:3b:00.0` (or `3b:00.0`), or a ConfigError."""
        m = re.fullmatch(r"(?:([0-9a-fA-F]{4}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])", text.strip())
        if not m:
            raise ConfigError(f"PCI address {text!r} is not like 0000:3b:00.0")
        return cls(int(m[1] or "0", 16), int(m[2], 16), int(m[3], 16), int(m[4]))

    def __str__(self) -> str:
        return f"{self.domain:04x}:{self.bus:02x}:{self.slot:02x}.{self.function}"


@dataclass(frozen=True)
class DomainSpec:
    """Everything a benchmark VM's definition depends on."""

    name: str
    virt_type: VirtType
    vcpus: int
    memory_mib: int
    disk: str  # the VM's copy-on-write overlay (qcow2)
    console_log: str  # the serial console goes here
    bridge: str  # host bridge the VM's NIC joins
    mac: str
    seed: str | None = None  # small read-only disk with the VM's keys, name and address (NoCloud "cidata")
    kernel: str | None = None  # direct kernel boot (our image); None: the disk's own boot loader
    initrd: str | None = None
    cmdline: str | None = None
    vcpu_pins: tuple[str, ...] = ()  # host CPU list per vCPU ("2", "2-3"); empty: not pinned
    numa_node: int | None = None  # memory strictly from this host NUMA node
    hostdevs: tuple[PciAddress, ...] = field(default_factory=tuple)  # PCI devices passed through (GPUs)
    owner: str | None = None  # the dltestbed installation that made it (domain metadata; teardown keys on it)

    def check(self) -> None:
        """Reject settings libvirt would reject later, with one line."""
        if not _NAME.match(self.name):
            raise ConfigError(f"VM name {self.name!r}: letters, digits, '.', '_' and '-' only (max 63)")
        if self.vcpus < 1 or self.memory_mib < 256:
            raise ConfigError(
                f"VM {self.name}: needs at least 1 vCPU and 256 MiB (got {self.vcpus}, {self.memory_mib})"
            )
        if self.vcpu_pins and len(self.vcpu_pins) != self.vcpus:
            raise ConfigError(f"VM {self.name}: {len(self.vcpu_pins)} vCPU pin(s) for {self.vcpus} vCPU(s)")
        if not _MAC.match(self.mac):
            raise ConfigError(f"VM {self.name}: MAC {self.mac!r} is not a locally administered 52:54:00:xx:xx:xx")


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    el = ET.SubElement(parent, tag, {k.rstrip("_"): v for k, v in attrs.items()})
    if text is not None:
        el.text = text
    return el


METADATA_NS = "https://github.com/dltestbed/dltestbed/vm"  # the namespace of dltestbed's domain metadata


def _add_os(dom: ET.Element, spec: DomainSpec) -> None:
    """How it boots: our image's kernel directly, else the disk's own boot loader."""
    os_ = _sub(dom, "os")
    _sub(os_, "type", "hvm", arch="x86_64", machine="pc")
    if spec.kernel:
        _sub(os_, "kernel", spec.kernel)
        if spec.initrd:
            _sub(os_, "initrd", spec.initrd)
        _sub(os_, "cmdline", spec.cmdline or "root=/dev/vda rw console=ttyS0")
    else:
        _sub(os_, "boot", dev="hd")


def _add_disks(dev: ET.Element, spec: DomainSpec) -> None:
    """Its overlay disk, then its read-only seed disk when it has one."""
    disk = _sub(dev, "disk", type_="file", device="disk")
    _sub(disk, "driver", name="qemu", type_="qcow2", discard="unmap")
    _sub(disk, "source", file=spec.disk)
    _sub(disk, "target", dev="vda", bus="virtio")
    if spec.seed:
        seed = _sub(dev, "disk", type_="file", device="disk")
        _sub(seed, "driver", name="qemu", type_="raw")
        _sub(seed, "source", file=spec.seed)
        _sub(seed, "target", dev="vdb", bus="virtio")
        _sub(seed, "readonly")


def _add_hostdev(dev: ET.Element, addr: PciAddress) -> None:
    """A host PCI device passed through to it."""
    hd = _sub(dev, "hostdev", mode="subsystem", type_="pci", managed="yes")
    _sub(
        _sub(hd, "source"),
        "address",
        domain=f"0x{addr.domain:04x}",
        bus=f"0x{addr.bus:02x}",
        slot=f"0x{addr.slot:02x}",
        function=f"0x{addr.function:x}",
    )


def _add_devices(dom: ET.Element, spec: DomainSpec) -> None:
    """Its devices: disks, NIC, serial console, passed-through PCI devices, random number source."""
    dev = _sub(dom, "devices")
    _add_disks(dev, spec)
    nic = _sub(dev, "interface", type_="bridge")
    _sub(nic, "mac", address=spec.mac)
    _sub(nic, "source", bridge=spec.bridge)
    _sub(nic, "model", type_="virtio")
    serial = _sub(dev, "serial", type_="file")
    _sub(serial, "source", path=spec.console_log)
    _sub(serial, "target", port="0")
    for addr in spec.hostdevs:
        _add_hostdev(dev, addr)
    rng = _sub(dev, "rng", model="virtio")
    _sub(rng, "backend", "/dev/urandom", model="random")  # sshd starts without waiting for entropy
    _sub(dev, "memballoon", model="none")


def domain_xml(spec: DomainSpec) -> str:
    """The libvirt domain XML for a spec (validated first)."""
    spec.check()
    dom = ET.Element("domain", {"type": spec.virt_type})
    _sub(dom, "name", spec.name)
    if spec.owner:
        ET.SubElement(_sub(dom, "metadata"), f"{{{METADATA_NS}}}vm", {"owner": spec.owner})
    _sub(dom, "memory", str(spec.memory_mib), unit="MiB")
    _sub(dom, "vcpu", str(spec.vcpus), placement="static")
    if spec.vcpu_pins:
        tune = _sub(dom, "cputune")
        for i, cpus in enumerate(spec.vcpu_pins):
            _sub(tune, "vcpupin", vcpu=str(i), cpuset=cpus)
    if spec.numa_node is not None:
        _sub(_sub(dom, "numatune"), "memory", mode="strict", nodeset=str(spec.numa_node))
    _add_os(dom, spec)
    features = _sub(dom, "features")
    _sub(features, "acpi")
    _sub(features, "apic")
    # TCG: the default qemu64 CPU has no AVX and TensorFlow dies with "Illegal instruction" — emulate
    # everything qemu can. KVM: the host's CPU as it is.
    _sub(dom, "cpu", mode="maximum" if spec.virt_type == "qemu" else "host-passthrough")
    _sub(dom, "clock", offset="utc")
    _sub(dom, "on_poweroff", "destroy")
    _sub(dom, "on_reboot", "restart")
    _sub(dom, "on_crash", "destroy")
    _add_devices(dom, spec)
    ET.indent(dom)
    ET.register_namespace("dltestbed", METADATA_NS)
    return ET.tostring(dom, encoding="unicode") + "\n"


def owner_in(metadata_xml: str | None) -> str | None:
    """The owner recorded in dltestbed's metadata element of a domain (libvirt returns it alone), or None."""
    if not metadata_xml:
        return None
    try:
        el = ET.fromstring(metadata_xml)
    except ET.ParseError:
        return None
    return el.get("owner") or None
