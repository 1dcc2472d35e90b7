"""`dltestbed lab up|teardown|status`: a cluster of SSH hosts on this machine (root)."""

from __future__ import annotations

import typer

from dltestbed.cli.grouped import grouped
from dltestbed.requests.lab import NAME_HELP, LabSpec

app = typer.Typer(
    help="A cluster on this machine: hosts that are network namespaces with their own sshd (root).",
    no_args_is_help=True,
)


@app.command("up")
@grouped
def up(spec: LabSpec) -> None:
    """Make the lab's hosts and write an Ansible inventory for them (its path is printed last)."""
    import time

    from dltestbed import lab

    t0 = time.monotonic()
    state = lab.up(spec)
    took = time.monotonic() - t0
    shown = state.hosts if len(state.hosts) <= 8 else [*state.hosts[:3], None, *state.hosts[-2:]]
    names = ", ".join(
        "…" if h is None else f"{h.name} ({h.ip}" + (f", CPUs {h.cpus}" if h.cpus else "") + ")" for h in shown
    )
    if state.bastion is not None:
        names += f"; reached only through {state.bastion.name} ({state.bastion.ip})"
    typer.echo(f"lab {state.name}: {len(state.hosts)} host(s) up in {took:.1f} s: {names}", err=True)
    if state.slurm:
        from dltestbed.lab import slurm

        typer.echo(
            f"Slurm cluster dltestbed-{state.name}: slurmctld here, nodes {state.hosts[0].name}.."
            f"{state.hosts[-1].name} in partition lab; for Slurm's commands: export "
            f"SLURM_CONF={slurm.conf_path(state)}",
            err=True,
        )
    if state.kubernetes:
        from dltestbed.lab.kube import control

        typer.echo(
            f"Kubernetes cluster dltestbed-{state.name}: control plane here, nodes {state.hosts[0].name}.."
            f"{state.hosts[-1].name}; for kubectl: export KUBECONFIG={control.admin_kubeconfig(state)}",
            err=True,
        )
    typer.echo(str(state.inventory))


@app.command("teardown")
def teardown(name: str = typer.Option("lab", help=NAME_HELP)) -> None:
    """Remove the lab: processes, namespaces, links, bridge, keys and files. Idempotent."""
    from dltestbed import lab

    removed = lab.down(name)
    typer.echo(f"lab {name}: removed {len(removed)} item(s)" if removed else f"lab {name}: nothing to remove")


@app.command("down", hidden=True)
def down(name: str = typer.Option("lab", help=NAME_HELP)) -> None:
    """Deprecated: `lab teardown`."""
    from dltestbed.cli import deprecated

    deprecated.warn("lab down", "lab teardown")
    teardown(name)


@app.command("status")
def status(name: str = typer.Option("lab", help=NAME_HELP)) -> None:
    """Show the lab's hosts and whether each one answers on SSH. Exits 1 when one does not."""
    from rich.console import Console
    from rich.table import Table

    from dltestbed import lab

    state, hosts = lab.status(name)
    if state is None:
        typer.echo(f"lab {name}: not up")
        raise typer.Exit(1)
    table = Table(title=f"lab {state.name} ({state.status}) on {state.bridge} {state.subnet}")
    for col in ("host", "address", "CPUs", "namespace", "sshd", "ssh"):
        table.add_column(col)
    cpus = {h.name: h.cpus for h in state.all_hosts}
    for h in hosts:
        table.add_row(
            h.name,
            h.ip,
            cpus.get(h.name) or "all",
            "yes" if h.netns else "[red]missing[/]",
            "running" if h.sshd else "[red]down[/]",
            h.ssh or "[red]no answer[/]",
        )
    Console().print(table)
    typer.echo(f"inventory: {state.inventory}")
    if state.status != "up" or not all(h.ssh for h in hosts):
        raise typer.Exit(1)
