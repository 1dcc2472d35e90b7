"""Where VMs run: this machine's libvirtd, or an inventory host's over `qemu+ssh://`.

Everything on the host side goes through libvirt itself — a storage pool for the VMs' disks, seeds
and console logs (the guest image is uploaded into it once per image), a network for their bridge —
so the same code serves a local and a remote host, and nothing depends on sharing a filesystem
with the hypervisor. Host facts come from one shell script run on the host (locally or over SSH)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dltestbed import paths
from dltestbed.errors import DltestbedError
from dltestbed.transport.ssh import SSH, known_hosts_files
from dltestbed.vms import hostcheck

if TYPE_CHECKING:
    from dltestbed.inventory import Host
    from dltestbed.vms.images import BaseImage

LOCAL_URI = "qemu:///system"
NETWORK = "dltestbed"
BRIDGE = "dltvm0"
SUBNET = "10.213.90"  # .1 is the host's end of the bridge; VMs from .10
REMOTE_POOL_DIR = "/var/lib/dltestbed/pool"
IMAGE_PREFIXES = ("guest-", "user-")  # base images in a pool: <prefix><key>.<suffix>, and <prefix><key>.ok

FACTS_SCRIPT = r"""test -e /sys/module/kvm_pvm && echo kvm_pvm=1
test -e /dev/kvm && echo dev_kvm=1
echo iommu_groups=$(ls /sys/kernel/iommu_groups 2>/dev/null | wc -l)
test -e /dev/vfio && echo vfio=1
for n in /sys/devices/system/node/node[0-9]*; do
  test -r "$n/cpulist" && echo "node${n##*/node}=$(cat "$n/cpulist")"
done
true"""


class VMError(DltestbedError):
    """A VM could not be created, reached or removed."""

    exit_code = 1


def libvirt_module() -> Any:
    """The libvirt binding, or a VMError saying how to get it."""
    try:
        import libvirt
    except ImportError:
        raise VMError("VMs need libvirt's Python binding: bash scripts/install.sh --vm") from None
    return libvirt


def parse_facts(script_output: str, capabilities: str) -> hostcheck.HostFacts:
    """HostFacts from FACTS_SCRIPT's output (key=value lines) and libvirt's capabilities XML."""
    values = dict(line.split("=", 1) for line in script_output.splitlines() if "=" in line)
    numa = {int(k[4:]): v.strip() for k, v in values.items() if k.startswith("node") and k[4:].isdigit()}
    return hostcheck.HostFacts(
        capabilities=capabilities, kvm_pvm=values.get("kvm_pvm") == "1", dev_kvm=values.get("dev_kvm") == "1",
        iommu_groups=int(values.get("iommu_groups", "0").strip() or 0), vfio=values.get("vfio") == "1",
        numa_cpus=numa,
    )  # fmt: skip


def ssh_command(host: Host) -> Path:
    """The ssh command libvirt's qemu+ssh transport runs for this host: ssh with host keys checked
    against the same files bench uses (libvirt's own URI options cannot name them)."""
    files = known_hosts_files(host)
    if not files:
        raise VMError(f"libvirt on {host.name}: its host key is not recorded; run `dltestbed provision` for it first")
    known = " ".join('"' + str(f).replace('"', "") + '"' for f in files)
    opts = ["-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={known}", "-o", "ConnectTimeout=15"]
    safe = re.sub(r"[^A-Za-z0-9.-]", "-", host.name)
    text = f"#!/bin/sh\n# written by dltestbed: libvirt's qemu+ssh to {safe}\nexec ssh {shlex.join(opts)} \"$@\"\n"
    path = paths.state_dir() / "libvirt-ssh" / f"{safe}-{hashlib.sha256(text.encode()).hexdigest()[:12]}.sh"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o755)
    return path


def remote_uri(host: Host) -> str:
    """qemu+ssh://user@address:port/system with dltestbed's ssh command and the inventory's key."""
    from urllib.parse import quote

    user = f"{quote(host.user)}@" if host.user else ""
    query = [f"command={quote(str(ssh_command(host)))}", "no_tty=1"]
    if host.key_file:
        query.append(f"keyfile={quote(os.path.expanduser(host.key_file))}")
    return f"qemu+ssh://{user}{host.address}:{host.port}/system?{'&'.join(query)}"


@dataclass(frozen=True)
class Hypervisor:
    """A libvirt host: its URI, the inventory host it is (None: this machine), where its pool lives."""

    uri: str
    pool_dir: str
    host: Host | None = None

    @property
    def local(self) -> bool:
        """This machine's own libvirtd."""
        return self.host is None

    @property
    def label(self) -> str:
        """For messages."""
        return "this machine" if self.host is None else f"host {self.host.name}"

    @property
    def pool_name(self) -> str:
        """The storage pool's name: one per folder, so several folders on one libvirtd do not clash."""
        return "dltestbed-" + hashlib.sha256(self.pool_dir.encode()).hexdigest()[:10]

    @contextlib.contextmanager
    def connect(self) -> Iterator[Any]:
        """An open libvirt connection, closed afterwards; a VMError line when libvirtd does not answer."""
        libvirt = libvirt_module()
        libvirt.registerErrorHandler(lambda *_: None, None)  # errors are raised and reported, not printed
        try:
            conn = libvirt.open(self.uri)
        except libvirt.libvirtError as exc:
            msg = (exc.get_error_message() or "").strip().splitlines() or ["?"]
            hint = "is libvirtd running?" if self.local else "is libvirtd running there, and SSH as in the inventory?"
            raise VMError(f"libvirt on {self.label}: {msg[-1]} ({hint})") from None
        try:
            yield conn
        finally:
            with contextlib.suppress(Exception):
                conn.close()

    def shell(self, script: str, timeout: float = 60) -> str:
        """Run a shell script on the host (locally or over SSH); its stdout."""
        if self.host is None:
            proc = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=timeout)
            return proc.stdout
        lines: list[str] = []
        SSH(self.host).run(["sh", "-c", script], timeout=timeout, on_line=lines.append)
        return "\n".join(lines)

    def facts(self) -> hostcheck.HostFacts:
        """What the virt-type and passthrough checks need to know about the host."""
        with self.connect() as conn:
            caps = conn.getCapabilities()
        return parse_facts(self.shell(FACTS_SCRIPT), caps)

    def gpus(self) -> list[hostcheck.Gpu]:
        """The host's GPUs as libvirt's node devices list them."""
        libvirt = libvirt_module()
        with self.connect() as conn:
            devs = conn.listAllDevices(libvirt.VIR_CONNECT_LIST_NODE_DEVICES_CAP_PCI_DEV)
            return hostcheck.gpus([d.XMLDesc() for d in devs])

    def console_tail(self, path: str) -> str:
        """The last non-empty line of a console log on the host, or (empty)."""
        try:
            if self.host is None:
                text = Path(path).read_text(errors="replace")
            else:
                text = self.shell(f"tail -n 50 {shlex.quote(path)} 2>/dev/null || true", timeout=30)
        except (OSError, DltestbedError):
            return "(empty)"
        lines = [line for line in text.splitlines() if line.strip()]
        return lines[-1].strip()[:200] if lines else "(empty)"


def local() -> Hypervisor:
    """This machine's libvirtd; the pool in paths.vm_root()/pool."""
    return Hypervisor(LOCAL_URI, str(paths.vm_root() / "pool"))


def for_host(host: Host) -> Hypervisor:
    """An inventory host of group libvirt_hosts (variables dltestbed_libvirt_uri, dltestbed_libvirt_pool)."""
    uri = str(host.vars.get("dltestbed_libvirt_uri") or remote_uri(host))
    return Hypervisor(uri, str(host.vars.get("dltestbed_libvirt_pool") or REMOTE_POOL_DIR), host)


# ---- host-side resources, all through libvirt ----


def ensure_network(conn: Any) -> None:
    """The network VMs join: bridge BRIDGE with the host at SUBNET.1, no DHCP, no DNS, no NAT rules
    (forward mode 'open'); transient, so libvirt forgets it when it is destroyed."""
    libvirt = libvirt_module()
    try:
        net = conn.networkLookupByName(NETWORK)
        if not net.isActive():
            net.create()
        return
    except libvirt.libvirtError:
        pass
    xml = (f"<network><name>{NETWORK}</name><forward mode='open'/><bridge name='{BRIDGE}' stp='off'/>"
           f"<dns enable='no'/><ip address='{SUBNET}.1' netmask='255.255.255.0'/></network>")  # fmt: skip
    try:
        conn.networkCreateXML(xml)
    except libvirt.libvirtError as exc:
        why = exc.get_error_message()
        raise VMError(f"libvirt could not make the VM network {NETWORK} ({BRIDGE}): {why}") from None


def remove_network(conn: Any) -> bool:
    """Destroy the network (and its bridge) when no dltestbed VM is left on this libvirtd."""
    libvirt = libvirt_module()
    with contextlib.suppress(libvirt.libvirtError):
        net = conn.networkLookupByName(NETWORK)
        if net.isActive():
            net.destroy()
        with contextlib.suppress(libvirt.libvirtError):
            net.undefine()
        return True
    return False


def pool(conn: Any, hv: Hypervisor) -> Any:
    """The hypervisor's storage pool (a folder; defined, made and started when missing), refreshed."""
    libvirt = libvirt_module()
    try:
        p = conn.storagePoolLookupByName(hv.pool_name)
        if not p.isActive():
            p.create()
    except libvirt.libvirtError:
        xml = (f"<pool type='dir'><name>{hv.pool_name}</name><target><path>{_xml_text(hv.pool_dir)}</path>"
               "<permissions><mode>0711</mode></permissions></target></pool>")  # fmt: skip
        try:
            p = conn.storagePoolDefineXML(xml, 0)
            p.build(0)  # makes the folder (with its mode) when missing
            p.create(0)
        except libvirt.libvirtError as exc:
            why = exc.get_error_message()
            raise VMError(f"libvirt on {hv.label}: no storage pool at {hv.pool_dir}: {why}") from None
    p.refresh(0)
    return p


def _xml_text(text: str) -> str:
    from xml.sax.saxutils import escape

    return escape(text)


def volumes(p: Any) -> dict[str, Any]:
    """The pool's volumes by name."""
    return {v.name(): v for v in p.listAllVolumes()}


def upload(conn: Any, p: Any, name: str, path: Path) -> str:
    """Upload a local file as volume `name` (replacing one of that name); its path on the host."""
    libvirt = libvirt_module()
    old = volumes(p).get(name)
    if old is not None:
        old.delete(0)
    size = path.stat().st_size
    vol = p.createXML(f"<volume><name>{_xml_text(name)}</name><capacity unit='bytes'>{size}</capacity>"
                      "<allocation>0</allocation><target><format type='raw'/></target></volume>", 0)  # fmt: skip
    stream = conn.newStream(0)
    try:
        vol.upload(stream, 0, size, 0)
        with path.open("rb") as f:
            stream.sendAll(lambda _s, n, fh: fh.read(n), f)
        stream.finish()
    except BaseException as exc:
        with contextlib.suppress(Exception):
            stream.abort()
        with contextlib.suppress(Exception):
            vol.delete(0)
        if isinstance(exc, libvirt.libvirtError):
            raise VMError(f"uploading {path.name} failed: {exc.get_error_message()}") from None
        raise
    return str(vol.path())


def overlay(p: Any, name: str, base: str, capacity: int, base_format: str = "qcow2") -> str:
    """A qcow2 copy-on-write overlay of `base` (qcow2 or raw) as volume `name`; its path."""
    libvirt = libvirt_module()
    xml = (f"<volume><name>{_xml_text(name)}</name><capacity unit='bytes'>{capacity}</capacity>"
           "<target><format type='qcow2'/></target>"
           f"<backingStore><path>{_xml_text(base)}</path><format type='{_xml_text(base_format)}'/></backingStore>"
           "</volume>")  # fmt: skip
    try:
        return str(p.createXML(xml, 0).path())
    except libvirt.libvirtError as exc:
        raise VMError(f"the VM's overlay could not be made: {exc.get_error_message()}") from None


@dataclass(frozen=True)
class StagedImage:
    """The base image as the host sees it."""

    disk: str
    format: str  # qcow2 | raw
    capacity: int  # the disk's virtual size
    kernel: str | None = None  # direct kernel boot (dltestbed's guest image); None: its own boot loader
    initrd: str | None = None


def stage_image(conn: Any, p: Any, hv: Hypervisor, image: BaseImage, in_use: set[str],
                on_notice: Callable[[str], None] | None = None) -> StagedImage:  # fmt: skip
    """The base image on the host. This machine uses dltestbed's guest image from its cache in place;
    anything else (a remote host, a user's image, which may sit where qemu cannot read it) is uploaded
    into the pool once (a marker volume says the upload finished). Other images' volumes there are
    removed unless a VM in `in_use` (image keys) still runs on them."""
    if hv.local and image.kernel is not None:
        return StagedImage(str(image.disk), image.format, image.virtual_size, str(image.kernel),
                           str(image.initrd))  # fmt: skip
    capacity = image.virtual_size
    prefix = f"{image.prefix}{image.key}"
    vols = volumes(p)
    for name, vol in vols.items():
        family = next((f for f in IMAGE_PREFIXES if name.startswith(f)), None)
        key = name[len(family):].split(".", 1)[0] if family else None
        if family and key != image.key and key not in in_use:
            vol.delete(0)
    files = {f".{image.format}": image.disk}
    if image.kernel is not None and image.initrd is not None:
        files |= {".vmlinuz": image.kernel, ".initrd": image.initrd}
    if f"{prefix}.ok" not in vols:
        if on_notice:
            on_notice(f"uploading {image.describe} ({image.size_bytes / 1e9:.2f} GB) to {hv.label}")
        started = time.monotonic()
        for suffix, path in files.items():
            upload(conn, p, prefix + suffix, path)
        took = time.monotonic() - started
        if on_notice:
            on_notice(f"uploaded in {took:.0f} s ({image.size_bytes / 1e6 / max(took, 1e-3):.0f} MB/s)")
        with tempfile.TemporaryDirectory() as tmp:
            marker = Path(tmp) / "key"
            marker.write_text(image.key + "\n")
            upload(conn, p, f"{prefix}.ok", marker)
    vols = volumes(p)
    where = {suffix: str(vols[prefix + suffix].path()) for suffix in files}
    return StagedImage(where[f".{image.format}"], image.format, capacity, where.get(".vmlinuz"), where.get(".initrd"))


def remove_volumes(p: Any, prefix: str) -> int:
    """Delete the pool's volumes whose names start with prefix; how many."""
    libvirt = libvirt_module()
    n = 0
    for name, vol in volumes(p).items():
        if name.startswith(prefix):
            with contextlib.suppress(libvirt.libvirtError):
                vol.delete(0)
                n += 1
    return n
