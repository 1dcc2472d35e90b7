"""`dltestbed teardown`: remove every VM, container and file dltestbed left running. Idempotent."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from dltestbed.cli.options import group_opt

if TYPE_CHECKING:
    from dltestbed.inventory import Inventory


def teardown(
    inventory: Path | None = typer.Option(None, metavar="FILE", help="Also sweep this inventory's hosts (SSH)."),
    all_owners: bool = typer.Option(False, "--all-owners", help="Other operators' VMs and containers too."),
    group: list[str] | None = group_opt(),
) -> None:
    """Remove the VMs and containers this installation made, here and on --inventory's hosts. Idempotent.

    VMs: domains, overlays, seeds, keys, console logs and the VM network; containers: those labelled with
    this installation's dltestbed.owner. With --inventory: dltestbed's VMs on its libvirt_hosts and its
    containers on its container_hosts, over SSH (a host with ansible_connection local is this machine). A remote
    host keeps the uploaded guest image for its next VM.

    Another operator's VMs and containers on a shared host are left alone. --all-owners removes every
    dltestbed-* container and VM: other operators' too, and those of dltestbed versions before owner labels.
    """
    import os
    import shutil
    import subprocess

    inv = None  # read first: a bad inventory or --group stops before anything is removed
    if inventory is not None:
        from dltestbed import inventory as inventory_mod

        inv = inventory_mod.load(inventory, groups=inventory_mod.parse_group_options(group or []))
    removed: list[str] = []
    from dltestbed import paths
    from dltestbed.vms import lifecycle, removal

    if shutil.which("virsh") or paths.vm_root().exists():
        try:
            removed += [f"VM {n}" for n in removal.teardown(all_owners=all_owners)]
        except lifecycle.VMError as exc:
            if any(r.uri == lifecycle.LOCAL_URI for r in lifecycle.records()):
                raise
            typer.echo(f"no VM removed here: {exc}", err=True)
    failed: list[str] = []
    removed += _remote_vms(inv, failed, all_owners)
    mine = _filters(all_owners)
    from dltestbed.runtimes import RUNTIMES

    for rt in RUNTIMES.values():  # a rootless runtime's containers are its user's, each removed with its run
        if rt.rootless or not shutil.which(rt.command):
            continue
        env = rt.cli_env(os.environ)
        ps = subprocess.run(rt.list_argv(mine), capture_output=True, text=True, env=env, timeout=60)
        for name in ps.stdout.split() if ps.returncode == 0 else []:
            subprocess.run(rt.remove_argv(name), capture_output=True, env=env, timeout=120)
            removed.append(f"{rt.name} container {name}")
    if inv is not None:
        removed += _remote_containers(inv, mine)
    typer.echo(f"removed: {', '.join(removed)}" if removed else "nothing to remove", err=True)
    if failed:
        from dltestbed.errors import DltestbedError

        raise DltestbedError(f"{len(failed)} host(s) could not be cleaned: {failed[0]}")


def _remote_vms(inventory: Inventory | None, failed: list[str], all_owners: bool) -> list[str]:
    """VMs recorded on other hosts, and with an inventory, every dltestbed VM on its libvirt hosts."""
    from dltestbed.vms import hypervisor, lifecycle, removal

    hvs: dict[str, hypervisor.Hypervisor] = {}
    names: dict[str, str] = {}
    for rec in lifecycle.records():
        if rec.uri != lifecycle.LOCAL_URI:
            hvs.setdefault(rec.uri, lifecycle.hypervisor_of(rec))
            names[rec.uri] = rec.host or "?"
    if inventory is not None:
        for host in inventory.in_role("libvirt_hosts"):
            hv = hypervisor.for_host(host)
            hvs[hv.uri] = hv
            names[hv.uri] = host.name
    out = []
    for uri, hv in hvs.items():
        try:
            out += [f"VM {n} on {names.get(uri, '?')}" for n in removal.teardown(hv, all_owners=all_owners)]
        except lifecycle.VMError as exc:  # that host is down: its records stay for a later teardown
            typer.echo(f"not removed: {exc}", err=True)
            failed.append(str(exc))
    return out


def _filters(all_owners: bool) -> list[str]:
    """`ps` filters for dltestbed's containers: this installation's (its owner label), or every one."""
    if all_owners:
        return ["--filter", "name=^dltestbed-"]
    from dltestbed.owner import OWNER_LABEL, installation_id

    return ["--filter", "name=^dltestbed-", "--filter", f"label={OWNER_LABEL}={installation_id()}"]


def _remote_containers(inventory: Inventory, mine: list[str]) -> list[str]:
    import shlex

    from dltestbed.errors import TargetError
    from dltestbed.runtimes import RUNTIMES
    from dltestbed.transport.ssh import SSH

    out = []
    for host in inventory.in_role("container_hosts"):
        if host.local:  # this machine: its containers were removed above
            continue
        target = SSH(host)
        for rt in (r for r in RUNTIMES.values() if not r.rootless):
            names: list[str] = []
            script = f"command -v {rt.command} >/dev/null && {shlex.join(rt.list_argv(mine))} || true"
            try:
                target.run(["sh", "-c", script], timeout=60, on_line=names.append)
                for name in (n.strip() for n in names if n.strip()):
                    target.run(rt.remove_argv(name), timeout=120)
                    out.append(f"{rt.name} container {name} on {host.name}")
            except TargetError as exc:
                typer.echo(f"{host.name}: {exc}", err=True)
    return out
