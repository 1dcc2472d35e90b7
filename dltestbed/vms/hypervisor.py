"""Where VMs run: this machine's libvirtd (an inventory host with `ansible_connection: local` is this machine),
or an inventory host's over `qemu+ssh://`.

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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from dltestbed import hints, paths
from dltestbed.errors import DltestbedError
from dltestbed.inventory import Host, over_ssh
from dltestbed.transport.ssh import SSH, known_hosts_files
from dltestbed.vms import hostcheck

LOCAL_URI = "qemu:///system"
NETWORK = "dltestbed"
BRIDGE = "dltvm0"
SUBNET = "10.213.90"  # .1 is the host's end of the bridge; VMs from .10
REMOTE_POOL_DIR = "/var/lib/dltestbed/pool"

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
        # libvirt-python loads only where a command reaches a hypervisor
        import libvirt
    except ImportError:
        raise VMError("VMs need libvirt's Python binding: bash scripts/install.sh --vm") from None
    return libvirt


def parse_facts(script_output: str, capabilities: str) -> hostcheck.HostFacts:
    """HostFacts from FACTS_SCRIPT's output (key=value lines) and libvirt's capabilities XML."""
    values = dict(line.split("=", 1) for line in script_output.splitlines() if "=" in line)
    numa = {int(k[4:]): v.strip() for k, v in values.items() if k.startswith("node") and k[4:].isdigit()}
    return hostcheck.HostFacts(
        capabilities=capabilities,
        kvm_pvm=values.get("kvm_pvm") == "1",
        dev_kvm=values.get("dev_kvm") == "1",
        iommu_groups=int(values.get("iommu_groups", "0").strip() or 0),
        vfio=values.get("vfio") == "1",
        numa_cpus=numa,
    )


def ssh_command(host: Host) -> Path:
    """The ssh command libvirt's qemu+ssh transport runs for this host: ssh with host keys checked
    against the same files bench uses (libvirt's own URI options cannot name them)."""
    files = known_hosts_files(host)
    if not files:
        raise VMError(
            f"libvirt on {host.name}: its host key is not recorded; run `{hints.provision(host=host.name)}` first"
        )
    known = " ".join('"' + str(f).replace('"', "") + '"' for f in files)
    opts = ["-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={known}", "-o", "ConnectTimeout=15"]
    safe = re.sub(r"[^A-Za-z0-9.-]", "-", host.name)
    text = f'#!/bin/sh\n# written by dltestbed: libvirt\'s qemu+ssh to {safe}\nexec ssh {shlex.join(opts)} "$@"\n'
    path = paths.state_dir() / "libvirt-ssh" / f"{safe}-{hashlib.sha256(text.encode()).hexdigest()[:12]}.sh"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o755)
    return path


def remote_uri(host: Host) -> str:
    """qemu+ssh://user@address:port/system with dltestbed's ssh command and the inventory's key."""

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
        """This machine's own libvirtd (no inventory host, or a local one)."""
        return self.via is None

    @property
    def via(self) -> Host | None:
        """The host SSH goes through to reach it and its VMs (their bridge is private to it); None: this machine."""
        return over_ssh(self.host)

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
        if self.via is None:
            proc = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=timeout)
            return proc.stdout
        lines: list[str] = []
        SSH(self.via).run(["sh", "-c", script], timeout=timeout, on_line=lines.append)
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
            if self.local:
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
    """An inventory host of group libvirt_hosts (variables dltestbed_libvirt_uri, dltestbed_libvirt_pool); a local
    host's libvirtd is this machine's, with this machine's pool unless they say otherwise."""
    here = local() if host.local else None
    uri = str(host.vars.get("dltestbed_libvirt_uri") or (here.uri if here else remote_uri(host)))
    pool = str(host.vars.get("dltestbed_libvirt_pool") or (here.pool_dir if here else REMOTE_POOL_DIR))
    return Hypervisor(uri, pool, host)


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
    xml = (
        f"<network><name>{NETWORK}</name><forward mode='open'/><bridge name='{BRIDGE}' stp='off'/>"
        f"<dns enable='no'/><ip address='{SUBNET}.1' netmask='255.255.255.0'/></network>"
    )
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
