"""VM lifecycle with libvirt-python: create (overlay, seed, define, start) → wait for SSH → use → delete.

`delete` is idempotent and safe after a half-finished create; every VM's files live in its own folder
under vm_root() with a vm.json record, so `dltestbed teardown` finds them even after a crash."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dltestbed.errors import ConfigError, DltestbedError
from dltestbed.vms import hostcheck
from dltestbed.vms.domain import DomainSpec, domain_xml
from dltestbed.vms.image import CMDLINE, GuestImage

LOCAL_URI = "qemu:///system"
BRIDGE = "dltvm0"
SUBNET = "10.213.90"  # .1 is the host's end of the bridge; VMs from .10
DOMAIN_PREFIX = "dltestbed-"
SSH_TIMEOUT = 300.0


class VMError(DltestbedError):
    """A VM could not be created, reached or removed."""

    exit_code = 1


def vm_root() -> Path:
    """$DLTESTBED_VM_DIR, else /var/lib/dltestbed/vms: one folder per VM."""
    return Path(os.environ.get("DLTESTBED_VM_DIR") or "/var/lib/dltestbed/vms")


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

    @property
    def folder(self) -> Path:
        """The VM's files."""
        return vm_root() / self.name

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
    def console_log(self) -> Path:
        """Its serial console."""
        return self.folder / "console.log"

    def save(self) -> None:
        """Write vm.json."""
        (self.folder / "vm.json").write_text(json.dumps(asdict(self), indent=2) + "\n")


def records() -> list[VMRecord]:
    """Every VM dltestbed has a folder for, by name."""
    out = []
    for meta in sorted(vm_root().glob("*/vm.json")):
        with contextlib.suppress(ValueError, TypeError):
            out.append(VMRecord(**json.loads(meta.read_text())))
    return out


def record(name: str) -> VMRecord | None:
    """The record of one VM, or None."""
    return next((r for r in records() if r.name == name), None)


def _libvirt() -> Any:
    """The libvirt binding, or a VMError saying how to get it."""
    try:
        import libvirt
    except ImportError:
        raise VMError("VMs need libvirt's Python binding: bash scripts/install.sh --vm") from None
    return libvirt


def _connect(uri: str) -> Any:
    libvirt = _libvirt()

    libvirt.registerErrorHandler(lambda *_: None, None)  # no stderr noise: errors are raised and reported
    try:
        return libvirt.open(uri)
    except libvirt.libvirtError as exc:
        raise VMError(f"libvirt at {uri}: {exc.get_error_message()} (is libvirtd running?)") from None


def host_facts(uri: str = LOCAL_URI) -> hostcheck.HostFacts:
    """Facts about this machine for the checks (remote hosts: gathered by provisioning)."""
    conn = _connect(uri)
    try:
        caps = conn.getCapabilities()
    finally:
        conn.close()
    nodes = {}
    for node in sorted(Path("/sys/devices/system/node").glob("node[0-9]*")):
        with contextlib.suppress(OSError):
            nodes[int(node.name[4:])] = (node / "cpulist").read_text().strip()
    groups = Path("/sys/kernel/iommu_groups")
    return hostcheck.HostFacts(
        capabilities=caps, kvm_pvm=Path("/sys/module/kvm_pvm").exists(), dev_kvm=Path("/dev/kvm").exists(),
        iommu_groups=len(list(groups.iterdir())) if groups.is_dir() else 0, vfio=Path("/dev/vfio").exists(),
        numa_cpus=nodes,
    )  # fmt: skip


def node_gpus(uri: str = LOCAL_URI) -> list[hostcheck.Gpu]:
    """The host's GPUs as libvirt's node devices list them."""
    libvirt = _libvirt()

    conn = _connect(uri)
    try:
        devs = conn.listAllDevices(libvirt.VIR_CONNECT_LIST_NODE_DEVICES_CAP_PCI_DEV)
        return hostcheck.gpus([d.XMLDesc() for d in devs])
    finally:
        conn.close()


def _mac(name: str) -> str:
    h = hashlib.sha256(name.encode()).digest()
    return f"52:54:00:{h[0]:02x}:{h[1]:02x}:{h[2]:02x}"


def _free_address() -> str:
    used = {r.address for r in records()}
    for i in range(10, 250):
        addr = f"{SUBNET}.{i}"
        if addr not in used:
            return addr
    raise VMError(f"no free address left in {SUBNET}.0/24")


def ensure_bridge() -> None:
    """The host bridge VMs join (created once; removed by teardown when no VM is left)."""
    from dltestbed.lab import net

    if BRIDGE in net.links():
        return
    net.ip("link", "add", BRIDGE, "type", "bridge")
    net.ip("addr", "add", f"{SUBNET}.1/24", "dev", BRIDGE)
    net.ip("link", "set", BRIDGE, "up")


def _run(argv: list[str], what: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise VMError(f"{what} failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")


def _seed(folder: Path, name: str, address: str, pubkey: str, host_key: Path) -> Path:
    """The seed disk: a small vfat volume labelled cidata. Our image reads dltestbed/*; cloud-init
    (a user's cloud image) reads meta-data, user-data and network-config."""
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "dltestbed").mkdir()
        (d / "dltestbed" / "authorized_keys").write_text(pubkey)
        shutil.copy(host_key, d / "dltestbed" / "ssh_host_ed25519_key")
        shutil.copy(host_key.with_suffix(".pub"), d / "dltestbed" / "ssh_host_ed25519_key.pub")
        (d / "dltestbed" / "hostname").write_text(name + "\n")
        (d / "dltestbed" / "network").write_text(f"ADDRESS={address}/24\nGATEWAY=\n")
        (d / "meta-data").write_text(f"instance-id: {name}\nlocal-hostname: {name}\n")
        private = host_key.read_text()
        indented = "\n".join("      " + line for line in private.strip().splitlines())
        (d / "user-data").write_text(
            "#cloud-config\n"
            f"ssh_authorized_keys:\n  - {pubkey.strip()}\n"
            "ssh_deletekeys: true\n"
            f"ssh_keys:\n  ed25519_private: |\n{indented}\n"
            f"  ed25519_public: {host_key.with_suffix('.pub').read_text().strip()}\n"
        )  # fmt: skip
        (d / "network-config").write_text(
            f"version: 2\nethernets:\n  eth0:\n    match:\n      macaddress: '{_mac(name)}'\n"
            f"    addresses: [{address}/24]\n"
        )  # fmt: skip
        seed = folder / "seed.img"
        _run(["mkfs.vfat", "-n", "CIDATA", "-C", str(seed), "2048"], "mkfs.vfat for the seed disk")
        for entry in sorted(d.iterdir()):
            _run(["mcopy", "-s", "-i", str(seed), str(entry), "::"], "mcopy to the seed disk")
        seed.chmod(0o600)
    return seed


def create(
    name: str,
    image: GuestImage,
    vcpus: int = 2,
    memory_mib: int = 3072,
    virt_type: str | None = None,
    gpus: str | None = None,
    vcpu_pins: tuple[str, ...] = (),
    numa_node: int | None = None,
    uri: str = LOCAL_URI,
    on_notice: Any = None,
    cmdline: str = CMDLINE,
    ssh_timeout: float = SSH_TIMEOUT,
) -> VMRecord:
    """Create and start a VM from a guest image and wait until SSH answers. Passthrough and host
    checks run before anything exists; a failure after that deletes what was made."""
    if uri != LOCAL_URI:
        raise ConfigError(f"VMs on remote libvirt hosts ({uri}) are not available in this version; use {LOCAL_URI}")
    if record(name) is not None:
        raise VMError(f"VM {name} exists already (dltestbed teardown removes it)")
    facts = host_facts(uri)
    chosen_type, notice = hostcheck.virt_type(facts, virt_type)
    hostdevs: tuple = ()
    if gpus and gpus != "0":
        chosen = hostcheck.passthrough_preflight(name, gpus, facts, node_gpus(uri), list(vcpu_pins))
        hostdevs = tuple(g.address for g in chosen)
    if notice and on_notice:
        on_notice(f"VM {name}: {notice}")
    folder = vm_root() / name
    rec = VMRecord(name=name, uri=uri, address=_free_address(), mac=_mac(name), bridge=BRIDGE,
                   virt_type=chosen_type, vcpus=vcpus, memory_mib=memory_mib, image_key=image.key,
                   container_tag=image.container_tag, container_digest=image.container_digest,
                   created_at=time.time(), gpus=gpus)  # fmt: skip
    try:
        folder.mkdir(parents=True)
        folder.chmod(0o711)  # qemu's user reaches the disks by name; it cannot list the folder
        rec.save()
        ssh = folder / "ssh"
        ssh.mkdir(mode=0o700)
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"dltestbed@{name}", "-f", str(rec.key_file)],
             "ssh-keygen")  # fmt: skip
        host_key = ssh / "ssh_host_ed25519_key"
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(host_key)], "ssh-keygen")
        rec.known_hosts.write_text(f"{rec.address} {host_key.with_suffix('.pub').read_text().split(' ', 2)[0]} "
                                   f"{host_key.with_suffix('.pub').read_text().split(' ', 2)[1]}\n")  # fmt: skip
        seed = _seed(folder, name, rec.address, rec.key_file.with_suffix(".pub").read_text(), host_key)
        overlay = folder / "overlay.qcow2"
        _run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", str(image.disk), str(overlay)],
             "qemu-img create (the VM's overlay)")  # fmt: skip
        ensure_bridge()
        spec = DomainSpec(name=rec.domain, virt_type=chosen_type, vcpus=vcpus, memory_mib=memory_mib,  # type: ignore[arg-type]
                          disk=str(overlay), console_log=str(rec.console_log), bridge=BRIDGE, mac=rec.mac,
                          seed=str(seed), kernel=str(image.kernel), initrd=str(image.initrd), cmdline=cmdline,
                          vcpu_pins=vcpu_pins, numa_node=numa_node, hostdevs=hostdevs)  # fmt: skip
        started = time.monotonic()
        _define_and_start(uri, domain_xml(spec))
        wait_ssh(rec, ssh_timeout)
        rec.ready_seconds = round(time.monotonic() - started, 1)
        rec.save()
    except BaseException:
        delete(name)
        raise
    return rec


def _define_and_start(uri: str, xml: str) -> None:
    libvirt = _libvirt()

    conn = _connect(uri)
    try:
        dom = conn.defineXMLFlags(xml, libvirt.VIR_DOMAIN_DEFINE_VALIDATE)
        dom.create()
    except libvirt.libvirtError as exc:
        raise VMError(f"libvirt could not start the VM: {exc.get_error_message()}") from None
    finally:
        conn.close()


def _console_tail(rec: VMRecord) -> str:
    try:
        lines = [line for line in rec.console_log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "(empty)"
    return lines[-1].strip()[:200] if lines else "(empty)"


def wait_ssh(rec: VMRecord, timeout: float = SSH_TIMEOUT) -> None:
    """Wait until the VM's sshd takes our key (checked against its recorded host key)."""
    from dltestbed.targets.vm import VMTarget

    deadline = time.monotonic() + timeout
    target = VMTarget(rec)
    while time.monotonic() < deadline:
        if _port_open(rec.address, 22):
            lines: list[str] = []
            with contextlib.suppress(DltestbedError):
                res = target.run(["true"], timeout=30, on_line=lines.append)
                if res.ok:
                    return
        if not _domain_running(rec):
            break
        time.sleep(1)
    raise VMError(f"VM {rec.name} did not answer SSH at {rec.address} within {timeout:.0f} s; its console log: "
                  f"{rec.console_log} (last line: {_console_tail(rec)})")  # fmt: skip


def _port_open(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=2):
            return True
    except OSError:
        return False


def _domain_running(rec: VMRecord) -> bool:
    libvirt = _libvirt()

    with _conn_or_none(rec.uri) as conn:
        if conn is None:
            return False
        try:
            return bool(conn.lookupByName(rec.domain).isActive())
        except libvirt.libvirtError:
            return False
    return False


@contextlib.contextmanager
def _conn_or_none(uri: str) -> Iterator[Any]:
    try:
        conn = _connect(uri)
    except VMError:
        yield None
        return
    try:
        yield conn
    finally:
        conn.close()


def delete(name: str, uri: str = LOCAL_URI) -> bool:
    """Destroy and undefine the domain, remove the VM's folder (overlay, seed, keys, log). Idempotent:
    False when there was nothing to remove."""
    found = False
    with _conn_or_none(uri) as conn:
        if conn is not None:
            libvirt = _libvirt()
            try:
                dom = conn.lookupByName(DOMAIN_PREFIX + name)
            except libvirt.libvirtError:
                dom = None
            if dom is not None:
                found = True
                with contextlib.suppress(libvirt.libvirtError):
                    if dom.isActive():
                        dom.destroy()
                with contextlib.suppress(libvirt.libvirtError):
                    dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)
    folder = vm_root() / name
    if folder.exists():
        found = True
        shutil.rmtree(folder)
    return found


def domains(uri: str = LOCAL_URI) -> list[str]:
    """Names (without the prefix) of dltestbed's domains libvirt knows, running or not."""
    with _conn_or_none(uri) as conn:
        if conn is None:
            return []
        return sorted(d.name()[len(DOMAIN_PREFIX):] for d in conn.listAllDomains()
                      if d.name().startswith(DOMAIN_PREFIX))  # fmt: skip
    return []


def teardown(uri: str = LOCAL_URI) -> list[str]:
    """Remove every dltestbed VM (domains and folders) and the bridge; the names removed."""
    from dltestbed.lab import net

    names = sorted(set(domains(uri)) | {r.name for r in records()})
    for name in names:
        delete(name, uri)
    if BRIDGE in net.links():
        net.ip("link", "del", BRIDGE, check=False)
    return names
