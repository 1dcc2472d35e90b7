"""`dltestbed teardown`: remove every VM, container and file dltestbed left running. Idempotent."""

from __future__ import annotations

from pathlib import Path

import typer


def teardown(
    inventory: Path | None = typer.Option(
        None, help="Also remove dltestbed's containers on this inventory's container hosts (over SSH)."
    ),
) -> None:
    """Remove dltestbed's VMs (domains, overlays, seeds, keys, console logs, the VM bridge) and its
    containers on this machine — and, with --inventory, its containers on those hosts. Safe to run again."""
    import shutil
    import subprocess

    removed: list[str] = []
    from dltestbed.vms import lifecycle

    if shutil.which("virsh") or lifecycle.vm_root().exists():
        try:
            removed += [f"VM {n}" for n in lifecycle.teardown()]
        except lifecycle.VMError as exc:
            if lifecycle.records():
                raise
            typer.echo(f"no VM removed: {exc}", err=True)
    for rt in ("docker", "podman"):
        if not shutil.which(rt):
            continue
        from dltestbed.provision.image import runtime_env

        ps = subprocess.run([rt, "ps", "-a", "--filter", "name=^dltestbed-", "--format", "{{.Names}}"],
                            capture_output=True, text=True, env=runtime_env(rt), timeout=60)  # fmt: skip
        for name in ps.stdout.split() if ps.returncode == 0 else []:
            subprocess.run([rt, "rm", "--force", name], capture_output=True, env=runtime_env(rt), timeout=120)
            removed.append(f"{rt} container {name}")
    if inventory is not None:
        removed += _remote_containers(inventory)
    typer.echo(f"removed: {', '.join(removed)}" if removed else "nothing to remove", err=True)


def _remote_containers(inventory: Path) -> list[str]:
    from dltestbed import inventory as inventory_mod
    from dltestbed.errors import TargetError
    from dltestbed.targets.ssh import SSHTarget

    out = []
    for host in inventory_mod.load(inventory).in_group("container_hosts"):
        target = SSHTarget(host)
        for rt in ("docker", "podman"):
            names: list[str] = []
            script = (f"command -v {rt} >/dev/null && {rt} ps -a --filter name=^dltestbed- --format '{{{{.Names}}}}' "
                      "|| true")  # fmt: skip
            try:
                target.run(["sh", "-c", script], timeout=60, on_line=names.append)
                for name in (n.strip() for n in names if n.strip()):
                    target.run([rt, "rm", "--force", name], timeout=120)
                    out.append(f"{rt} container {name} on {host.name}")
            except TargetError as exc:
                typer.echo(f"{host.name}: {exc}", err=True)
    return out
