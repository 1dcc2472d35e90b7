"""VM lifecycle with libvirt-python: create (overlay, seed, define, start) → wait for SSH → use → delete.

A VM lives on a Hypervisor (this machine or an inventory host); its disks and console log are
volumes of that host's pool, its record and SSH keys stay here, in paths.vm_root()/<name>/vm.json, so
`dltestbed teardown` finds every VM it made even after a crash. `delete` is idempotent and safe
after a half-finished create."""

from __future__ import annotations

import contextlib
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dltestbed import locks, paths
from dltestbed.choices import VirtType
from dltestbed.errors import ConfigError, DltestbedError
from dltestbed.inventory import Host
from dltestbed.owner import installation_id
from dltestbed.shield import shielded
from dltestbed.vms import hostcheck
from dltestbed.vms import hypervisor as hv_mod
from dltestbed.vms import pool as pool_mod
from dltestbed.vms.boot import SSH_TIMEOUT, wait_booted, wait_ssh
from dltestbed.vms.domain import DomainSpec, PciAddress, domain_xml
from dltestbed.vms.hypervisor import BRIDGE, LOCAL_URI, SUBNET, Hypervisor, VMError
from dltestbed.vms.images import BaseImage
from dltestbed.vms.record import VMRecord, hypervisor_of, record, records
from dltestbed.vms.removal import delete, release
from dltestbed.vms.seed import mac, run_tool, seed_disk
from dltestbed.vms.settings import VMSettings

LOCAL_VM = "local"  # the VM the embedded default creates on this machine (`dltestbed teardown` removes it)

__all__ = [
    "LOCAL_URI",
    "VMError",
    "VMRecord",
    "create",
    "ensure",
    "hypervisor_of",
    "record",
    "records",
    "wait_ssh",
]


def placement(host: Host | None, overrides: dict[str, Any] | None = None) -> tuple[Hypervisor, str, VMSettings]:
    """The benchmark VM of this machine (host None) or of an inventory host: its hypervisor, its
    name, its settings (the host's dltestbed_vm_* variables, then overrides). One place, so
    provision and bench agree on which VM is a host's."""
    if host is None:
        return hv_mod.local(), LOCAL_VM, VMSettings.from_vars({}, "this machine", overrides)
    if not host.plays("libvirt_hosts"):
        raise ConfigError(f"vm on {host.name}: the host is not in group libvirt_hosts of the inventory")
    return hv_mod.for_host(host), vm_name(host.name), VMSettings.from_vars(host.vars, host.name, overrides)


def _free_address() -> str:
    used = {r.address for r in records()}
    for i in range(10, 250):
        addr = f"{SUBNET}.{i}"
        if addr not in used:
            return addr
    raise VMError(f"no free address left in {SUBNET}.0/24")


def reserve(name: str, make: Callable[[str], VMRecord]) -> VMRecord:
    """The VM's record, made with a free address and saved in its new folder, under the addresses'
    lock: two benches creating VMs at once never pick the same address."""
    with locks.beside(paths.vm_root(), "the VMs' addresses"):
        if record(name) is not None:
            raise VMError(f"VM {name} exists already (dltestbed teardown removes it)")
        rec = make(_free_address())
        folder = paths.vm_root() / name
        folder.mkdir(parents=True)
        folder.chmod(0o700)
        rec.save()
    return rec


def vm_name(host_name: str) -> str:
    """The name of dltestbed's VM on an inventory host: letters, digits and '-' only."""

    return "on-" + re.sub(r"[^A-Za-z0-9-]", "-", host_name)[:50]


def _make_keys(rec: VMRecord) -> Path:
    """The controller's login key and the VM's host key (recorded in its known_hosts); the host key's
    private half, which the seed disk carries and create() deletes once uploaded."""
    ssh = rec.folder / "ssh"
    ssh.mkdir(mode=0o700)
    run_tool(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"dltestbed@{rec.name}", "-f", str(rec.key_file)],
        "ssh-keygen",
    )
    host_key = ssh / "ssh_host_ed25519_key"
    run_tool(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", rec.name, "-f", str(host_key)], "ssh-keygen")
    kind, key = host_key.with_suffix(".pub").read_text().split(" ", 2)[:2]
    rec.known_hosts.write_text(f"{rec.address} {kind} {key}\n")
    return host_key


def _stage_and_start(
    rec: VMRecord,
    hv: Hypervisor,
    image: BaseImage,
    virt_type: VirtType,
    hostdevs: tuple[PciAddress, ...],
    cmdline: str | None,
    on_notice: Callable[[str], None] | None,
) -> float:
    """Its keys, the image staged in the hypervisor's pool, its seed and overlay disk, then its domain
    defined and started; returns when it started (monotonic)."""
    host_key = _make_keys(rec)
    with hv.connect() as conn:
        pool = pool_mod.pool(conn, hv)
        in_use = {r.image_key for r in records() if r.uri == hv.uri and r.name != rec.name}
        staged = pool_mod.stage_image(conn, pool, hv, image, in_use, on_notice)
        with tempfile.TemporaryDirectory() as tmp:
            seed_file = seed_disk(
                Path(tmp), rec.name, rec.address, rec.key_file.with_suffix(".pub").read_text(), host_key
            )
            seed = pool_mod.upload(conn, pool, f"{rec.name}.seed.img", seed_file)
        host_key.unlink()  # the VM has it now; only its public half is kept (known_hosts)
        floor = rec.disk_gib if rec.disk_gib is not None else image.min_disk_gib
        disk = pool_mod.overlay(
            pool, f"{rec.name}.overlay.qcow2", staged.disk, max(staged.capacity, floor * 1024**3), staged.format
        )
        hv_mod.ensure_network(conn)
        spec = DomainSpec(
            name=rec.domain,
            virt_type=virt_type,
            vcpus=rec.vcpus,
            memory_mib=rec.memory_mib,
            disk=disk,
            console_log=rec.console_log,
            bridge=BRIDGE,
            mac=rec.mac,
            seed=seed,
            kernel=staged.kernel,
            initrd=staged.initrd,
            cmdline=(cmdline or image.cmdline) if staged.kernel else None,
            vcpu_pins=tuple(rec.vcpu_pins),
            numa_node=rec.numa_node,
            hostdevs=hostdevs,
            owner=installation_id(),
        )
        started = time.monotonic()
        _define_and_start(conn, domain_xml(spec))
    return started


def _passthrough(
    name: str, hv: Hypervisor, facts: hostcheck.HostFacts, gpus: str | None, vcpu_pins: tuple[str, ...]
) -> tuple[PciAddress, ...]:
    """The host's PCI addresses of the GPUs to pass through, checked first (none when gpus is empty or "0")."""
    if gpus and gpus != "0":
        chosen = hostcheck.passthrough_preflight(name, gpus, facts, hv.gpus(), list(vcpu_pins))
        return tuple(g.address for g in chosen)
    return ()


def _new_record(
    name: str,
    address: str,
    hv: Hypervisor,
    image: BaseImage,
    settings: VMSettings,
    virt_type: VirtType,
    vcpu_pins: tuple[str, ...],
) -> VMRecord:
    """The record of a VM about to be made, at this address, as of now."""
    return VMRecord(
        name=name,
        uri=hv.uri,
        address=address,
        mac=mac(name),
        bridge=BRIDGE,
        virt_type=virt_type,
        vcpus=settings.vcpus,
        memory_mib=settings.memory_mib,
        image_key=image.key,
        container_tag=image.container_tag,
        container_digest=image.container_digest,
        created_at=time.time(),
        gpus=settings.gpus,
        host=hv.host.name if hv.host else None,
        pool_dir=hv.pool_dir,
        vcpu_pins=tuple(vcpu_pins),
        numa_node=settings.numa_node,
        disk_gib=settings.disk_gib,
        image_name=image.recorded_name,
    )


def create(
    name: str,
    image: BaseImage,
    settings: VMSettings,
    hv: Hypervisor | None = None,
    on_notice: Callable[[str], None] | None = None,
    cmdline: str | None = None,
    ssh_timeout: float = SSH_TIMEOUT,
) -> VMRecord:
    """Create and start a VM from dltestbed's guest image or a user's image on a hypervisor (default:
    this machine), shaped by settings (all but their image), and wait until SSH answers. Host checks
    run before anything exists; a failure after that deletes what was made."""
    vcpu_pins = settings.pins()
    hv = hv or hv_mod.local()
    if record(name) is not None:
        raise VMError(f"VM {name} exists already (dltestbed teardown removes it)")
    facts = hv.facts()
    chosen_type, notice = hostcheck.virt_type(facts, settings.virt_type)
    hostdevs = _passthrough(name, hv, facts, settings.gpus, vcpu_pins)
    if notice and on_notice:
        on_notice(f"VM {name}: {notice}")
    rec = reserve(name, lambda address: _new_record(name, address, hv, image, settings, chosen_type, vcpu_pins))
    try:
        started = _stage_and_start(rec, hv, image, chosen_type, hostdevs, cmdline, on_notice)
        wait_booted(rec, hv, ssh_timeout, on_notice)
        rec.ready_seconds = round(time.monotonic() - started, 1)
        rec.save()
    except BaseException:
        # a host gone mid-create keeps the record for teardown; a second Ctrl-C waits for the deletion
        with shielded(), contextlib.suppress(DltestbedError):
            delete(name, hv)
            release(hv)
        raise
    return rec


def ensure(
    name: str,
    image: BaseImage,
    settings: VMSettings,
    hv: Hypervisor | None = None,
    on_notice: Callable[[str], None] | None = None,
) -> tuple[VMRecord, bool]:
    """The VM `name` on hv with this base image and these settings: the one there when it matches and
    answers, else a new one (a stale one is deleted first). (record, created)."""
    hv = hv or hv_mod.local()
    rec = record(name)
    same = (
        rec is not None
        and rec.uri == hv.uri
        and rec.image_key == image.key
        and (rec.vcpus, rec.memory_mib, rec.gpus, tuple(rec.vcpu_pins), rec.numa_node, rec.disk_gib)
        == (settings.vcpus, settings.memory_mib, settings.gpus, settings.pins(), settings.numa_node, settings.disk_gib)
    )
    if rec is not None and same:
        try:
            wait_ssh(rec, timeout=120, via=hv.via)  # made earlier by a bench or provision: still there?
            return rec, False
        except VMError:
            pass
    delete(name, hv if rec is None or rec.uri == hv.uri else None)
    made = create(name, image, settings, hv=hv, on_notice=on_notice)
    return made, True


def _define_and_start(conn: Any, xml: str) -> None:
    libvirt = hv_mod.libvirt_module()
    try:
        dom = conn.defineXMLFlags(xml, libvirt.VIR_DOMAIN_DEFINE_VALIDATE)
        dom.create()
    except libvirt.libvirtError as exc:
        raise VMError(f"libvirt could not start the VM: {exc.get_error_message()}") from None
