"""`dltestbed lab up|teardown|status`: a cluster of SSH hosts on this machine (root)."""

from __future__ import annotations

import typer

app = typer.Typer(
    help="A cluster on this machine: hosts that are network namespaces with their own sshd (root).",
    no_args_is_help=True,
)

NAME_HELP = "Lab name (1-6 lowercase letters or digits); several labs can coexist."


@app.command("up")
def up(
    hosts: int = typer.Option(2, help="Number of hosts."),
    name: str = typer.Option("lab", help=NAME_HELP),
    subnet: str = typer.Option("10.213.77.0/24", help="Private IPv4 network of the lab's bridge."),
    containers: bool = typer.Option(False, "--containers", help="Hosts are container hosts too (Podman; cbm targets)."),
    vms: bool = typer.Option(
        False,
        "--vms",
        help="Hosts are libvirt hosts too (vm, cvm targets): each one reaches this machine's "
        "libvirtd through its socket, so VMs, pool and network are shared among them.",
    ),
    host_cpus: list[str] | None = typer.Option(
        None,
        "--host-cpus",
        help="N=CPUS: host N (its number or name) and everything it runs use only these "
        "CPUs, e.g. 4=0 — a host with fewer cores, to rehearse finding a slow node (`report --by-host`). "
        "Repeatable.",
    ),
    bastion: bool = typer.Option(
        False,
        "--bastion",
        help="One more host, NAME-bastion, the only one this machine can reach: the others "
        "answer only through it, and the inventory reaches them with a ProxyCommand (a site's jump host).",
    ),
    with_slurm: bool = typer.Option(
        False,
        "--slurm",
        help="A Slurm cluster of the hosts (Debian's slurm-wlm and munge): slurmctld on this "
        "machine, the submit host, and a slurmd on each host under its own node name, partition `lab`. Export "
        "the SLURM_CONF line it prints, then `bench --launcher slurm`.",
    ),
    capacity: bool = typer.Option(
        False,
        "--capacity",
        help="Each host a fixed share of this machine's cores, in proportion to its CPUs (a CPU cgroup quota it "
        "does not see): its speed does not depend on the other hosts, and a load on one host slows it alone, as on "
        "a rack.",
    ),
    share: list[str] | None = typer.Option(
        None,
        "--share",
        help="A folder of this machine every host sees read-only at the same path, as a "
        "site's shared filesystem (e.g. a venv named by the inventory's dltestbed_venv: nothing to provision). "
        "Repeatable.",
    ),
) -> None:
    """Make the lab's hosts and write an Ansible inventory for them (its path is printed last)."""
    import time

    from dltestbed import lab
    from dltestbed.errors import ConfigError

    cpus = {}
    for item in host_cpus or []:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise ConfigError(f"--host-cpus: HOST=CPUS, e.g. 4=0 or 2=0-1 (got {item!r})")
        cpus[key] = value
    t0 = time.monotonic()
    state = lab.up(name, hosts, subnet, containers, vms, cpus, share or (), bastion, with_slurm, capacity)
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
