"""Removing dltestbed's VMs: one (`delete`, idempotent and safe after a half-finished create) or all of this
installation's on a hypervisor (`teardown`); the installation that made a domain, read from its metadata, so
another's VM is never removed on its behalf; and the network and this machine's pool once no VM is left.
"""

from __future__ import annotations

import contextlib
import shutil
from typing import Any

from dltestbed import paths
from dltestbed.owner import installation_id
from dltestbed.vms import hypervisor as hv_mod
from dltestbed.vms import pool as pool_mod
from dltestbed.vms.domain import METADATA_NS, owner_in
from dltestbed.vms.hypervisor import LOCAL_URI, Hypervisor, VMError
from dltestbed.vms.record import DOMAIN_PREFIX, hypervisor_of, record, records


class ForeignVMError(VMError):
    """A domain another dltestbed installation made: never deleted on its behalf."""


def owner_of(dom: Any) -> str | None:
    """The dltestbed installation that made a domain (its metadata), or None (none recorded)."""
    libvirt = hv_mod.libvirt_module()
    try:
        return owner_in(dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, METADATA_NS, 0))
    except libvirt.libvirtError:
        return None


def delete(name: str, hv: Hypervisor | None = None, *, any_owner: bool = False) -> bool:
    """Destroy and undefine the domain, delete its volumes (overlay, seed, console log) and its folder
    here (record, keys). Idempotent: False when there was nothing to remove. A domain another dltestbed
    installation made is a VMError line and is left as it is, unless any_owner."""
    rec = record(name)
    if hv is None:
        hv = hypervisor_of(rec) if rec else hv_mod.local()
    found = False
    try:
        with hv.connect() as conn:
            libvirt = hv_mod.libvirt_module()
            try:
                dom = conn.lookupByName(DOMAIN_PREFIX + name)
            except libvirt.libvirtError:
                dom = None
            other = owner_of(dom) if dom is not None and not any_owner else None
            if other is not None and other != installation_id():
                where = f" on {hv.host.name}" if hv.host else ""
                raise ForeignVMError(
                    f"VM {DOMAIN_PREFIX}{name}{where} belongs to another dltestbed installation "
                    f"({other}): left as it is; its owner's `dltestbed teardown` removes it (or "
                    "yours with --all-owners)"
                )
            if dom is not None:
                found = True
                with contextlib.suppress(libvirt.libvirtError):
                    if dom.isActive():
                        dom.destroy()
                with contextlib.suppress(libvirt.libvirtError):
                    dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)
            with contextlib.suppress(libvirt.libvirtError):
                if conn.storagePoolLookupByName(hv.pool_name):
                    found |= pool_mod.remove_volumes(pool_mod.pool(conn, hv), f"{name}.") > 0
    except ForeignVMError:
        raise
    except VMError:
        if rec is not None and rec.uri != LOCAL_URI:
            raise  # a remote VM whose host does not answer: keep its record, so a later teardown finds it
    folder = paths.vm_root() / name
    if folder.exists():
        found = True
        shutil.rmtree(folder)
    return found


def domains(hv: Hypervisor | None = None) -> list[str]:
    """Names (without the prefix) of dltestbed's domains libvirt knows there, running or not."""
    return sorted(owners(hv))


def owners(hv: Hypervisor | None = None) -> dict[str, str | None]:
    """dltestbed's domains there (names without the prefix), each with the installation that made it."""
    try:
        with (hv or hv_mod.local()).connect() as conn:
            return {
                d.name()[len(DOMAIN_PREFIX) :]: owner_of(d)
                for d in conn.listAllDomains()
                if d.name().startswith(DOMAIN_PREFIX)
            }
    except VMError:
        return {}


def teardown(hv: Hypervisor | None = None, *, all_owners: bool = False) -> list[str]:
    """Remove this installation's dltestbed VMs on a hypervisor (default: this machine) — domains, volumes,
    records — then its network when no VM is left on that libvirtd, and this machine's pool. The names
    removed. A VM another installation made (its domain metadata) is left, unless all_owners; so is one
    with no owner recorded. A remote host's pool keeps the uploaded guest image (reused by the next VM)."""
    hv = hv or hv_mod.local()
    mine = {r.name for r in records() if r.uri == hv.uri}
    elsewhere = {r.name for r in records() if r.uri != hv.uri}
    me = installation_id()
    there = {n for n, owner in owners(hv).items() if all_owners or owner == me}
    names = sorted((there - elsewhere) | mine)
    for name in names:
        delete(name, hv, any_owner=all_owners)
    try:
        release(hv)
    except VMError:
        if names:
            raise
    return names


def release(hv: Hypervisor) -> None:
    """When no dltestbed VM is left on hv's libvirtd: remove the VM network, and this machine's pool
    (with any user image uploaded into it)."""
    with hv.connect() as conn:
        if domains(hv):
            return
        hv_mod.remove_network(conn)
        if hv.local:
            pool_mod.remove_local_pool(conn, hv)
