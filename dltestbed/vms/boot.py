"""From a VM's start to its SSH answering: wait for it, and restart once a boot whose kernel stalled in
its first seconds (seen under TCG: the guest kernel stops after `pnp: PnP ACPI: found 5 devices` and
never goes on, on a machine where the same image boots in 20 s the next time)."""

from __future__ import annotations

import contextlib
import re
import socket
import time
from collections.abc import Callable

from dltestbed.errors import DltestbedError
from dltestbed.inventory import Host
from dltestbed.vms import hypervisor as hv_mod
from dltestbed.vms.hypervisor import Hypervisor, VMError
from dltestbed.vms.record import VMRecord, guest_ssh, hypervisor_of

SSH_TIMEOUT = 300.0
STALL_RESTARTS = 1  # a boot stalled in its first seconds is restarted this many times
EARLY_SECONDS = 10  # a kernel line stamped before this, as the console's last, is an early stall
_KERNEL_LINE = re.compile(r"^\[\s*(\d+)\.\d+\]")


def stalled_early(console_tail: str) -> bool:
    """Whether a console's last line is the kernel's own from its first seconds, with no panic: the
    boot stopped there (a kernel that panics, e.g. on a missing root disk, is not restarted)."""
    m = _KERNEL_LINE.match(console_tail.strip())
    return m is not None and int(m.group(1)) < EARLY_SECONDS and "panic" not in console_tail.lower()


def wait_booted(
    rec: VMRecord, hv: Hypervisor, timeout: float = SSH_TIMEOUT, on_notice: Callable[[str], None] | None = None
) -> None:
    """wait_ssh; when the boot stalled early (see stalled_early), restart the domain and wait again,
    at most STALL_RESTARTS times; a VMError naming the console log otherwise."""
    for attempt in range(STALL_RESTARTS + 1):
        try:
            wait_ssh(rec, timeout, via=hv.via)
            return
        except VMError:
            tail = hv.console_tail(rec.console_log)
            if attempt == STALL_RESTARTS or not stalled_early(tail):
                raise
            if on_notice:
                on_notice(f"VM {rec.name}: its kernel stalled early in boot (console: {tail}); restarting it")
            _restart(hv, rec)


def _restart(hv: Hypervisor, rec: VMRecord) -> None:
    libvirt = hv_mod.libvirt_module()
    with hv.connect() as conn:
        try:
            dom = conn.lookupByName(rec.domain)
            if dom.isActive():
                dom.destroy()
            dom.create()
        except libvirt.libvirtError as exc:
            raise VMError(f"libvirt could not restart VM {rec.name}: {exc.get_error_message()}") from None


def wait_ssh(rec: VMRecord, timeout: float = SSH_TIMEOUT, via: Host | None = None) -> None:
    """Wait until the VM's sshd takes our key (checked against its recorded host key); through the
    hypervisor host `via` when the VM is on an inventory host."""
    deadline = time.monotonic() + timeout
    ssh = guest_ssh(rec, via)
    while time.monotonic() < deadline:
        if via is not None or _port_open(rec.address, 22):
            with contextlib.suppress(DltestbedError):
                if ssh.run(["true"], timeout=30).ok:
                    return
        if not _domain_running(rec):
            break
        time.sleep(1 if via is None else 3)
    where = f"{rec.console_log}" + (f" on {rec.host}" if rec.host else "")
    tail = hypervisor_of(rec, via).console_tail(rec.console_log)
    raise VMError(
        f"VM {rec.name} did not answer SSH at {rec.address} within {timeout:.0f} s; its console log: "
        f"{where} (last line: {tail})"
    )


def _port_open(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=2):
            return True
    except OSError:
        return False


def _domain_running(rec: VMRecord) -> bool:
    libvirt = hv_mod.libvirt_module()
    try:
        with hypervisor_of(rec).connect() as conn:
            return bool(conn.lookupByName(rec.domain).isActive())
    except (VMError, libvirt.libvirtError):
        return False
