"""`dltestbed provision`: install the workload on the hosts of a layout, with ansible-runner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from dltestbed.cli.options import LayoutOpt, group_opt


def provision(
    layout: LayoutOpt = typer.Option(..., help="single, distributed or shared (see README: layouts)."),
    inventory: Path = typer.Option(..., help="Ansible inventory (YAML or INI; group_vars/host_vars honoured)."),
    limit: str | None = typer.Option(None, help="Only these hosts or groups (Ansible pattern)."),
    group: list[str] | None = group_opt(),
    check: bool = typer.Option(False, "--check", help="Ansible check mode: report what would change."),
) -> None:
    """Install the workload (offline, from a wheelhouse built here) on every host the layout uses.

    Facts first (Python, OS, GPUs and driver), then the install, then on each libvirt host its
    benchmark VM (`bench --targets vm,cvm` uses it); a second run changes nothing.

    Exits 2 when a host could not be provisioned; the summary says which were and which were not.
    """
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from dltestbed.errors import DltestbedError
    from dltestbed.provision import provision as run

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    state: dict[str, str] = {}

    def on_phase(phase: str) -> None:
        label = {
            "facts": "gathering facts",
            "wheelhouse": "building the wheelhouse",
            "image": "building the container image",
            "install": "installing the workload",
            "vms": "making the VMs (the guest image is built first when missing)",
        }[phase]
        console.print(f"[bold]{label}[/]")

    def on_event(kind: str, outcome: Any, event: dict[str, Any]) -> None:
        if kind == "playbook_on_task_start":
            state["task"] = (event.get("event_data") or {}).get("task", "")
        if outcome is None or kind == "runner_on_skipped":
            return
        mark = {
            "runner_on_ok": "[yellow]changed[/]"
            if (event.get("event_data") or {}).get("res", {}).get("changed")
            else "[green]ok[/]",
            "runner_on_failed": "[red]failed[/]",
            "runner_on_unreachable": "[red]unreachable[/]",
        }.get(kind)
        if mark:
            task = escape(state.get("task", ""))
            extra = f": {escape(outcome.message)}" if kind != "runner_on_ok" and outcome.message else ""
            console.print(f"  {outcome.name:<16} {mark:<22} {task}{extra}")

    def on_notice(line: str) -> None:
        console.print(f"  notice: {escape(line)}")

    from dltestbed.inventory import parse_group_options

    report = run(
        inventory,
        layout.value,
        limit,
        check,
        on_event=on_event,
        on_phase=on_phase,
        on_notice=on_notice,
        groups=parse_group_options(group or []),
    )
    table = Table(title=f"provision {report.id}: layout {report.layout}" + (" (check mode)" if check else ""))
    for col in ("host", "address", "kinds", "python", "os", "TF build", "GPUs", "ok", "changed", "result"):
        table.add_column(col)
    for h in report.hosts:
        result = {
            "provisioned": "[green]provisioned[/]",
            "unchanged": "[green]unchanged[/]",
            "checked": "[green]checked[/]",
        }.get(h.status, f"[red]{h.status}[/]")
        if h.reason:
            result += f": {escape(h.reason)}"
        table.add_row(
            h.name,
            h.address,
            ",".join(h.kinds),
            h.python or "—",
            h.os or "—",
            h.flavor or "—",
            str(len(h.gpus)),
            str(h.ok),
            str(h.changed),
            result,
        )
    Console(stderr=True, width=200 if not console.is_terminal else None).print(table)
    for h in report.hosts:
        if h.vm:
            console.print(f"VM on {h.name}: {escape(h.vm)}")
    console.print(f"artifacts: {report.artifacts}")
    done = [h for h in report.hosts if h.status != "failed"]
    if not report.failed:
        what = "nothing changed" if report.changed == 0 else f"{report.changed} change(s)"
        console.print(f"{len(done)} host(s) provisioned; {what}")
        return
    first = report.failed[0]
    raise DltestbedError(
        f"{len(report.failed)} of {len(report.hosts)} host(s) not provisioned ({first.name}: {first.reason}); "
        f"provisioned: {', '.join(h.name for h in done) or 'none'}"
    )
