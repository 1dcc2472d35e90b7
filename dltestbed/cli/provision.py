"""`dltestbed provision`: install the workload on the hosts of a layout, with ansible-runner."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dltestbed.cli.grouped import grouped
from dltestbed.requests.provision import ProvisionRequest

if TYPE_CHECKING:
    from rich.console import Console

    from dltestbed.provision import ProvisionReport

# The command's epilog. Each line fits 78 columns
# (80, less rich's margin); tests/unit/test_cli.py holds it.
EXAMPLES = """[bold]Examples[/]

  dltestbed provision --layout single --inventory rack.yml
  dltestbed provision --layout single --inventory rack.yml --check   dry run
  dltestbed provision --layout distributed --inventory rack.yml \\
      --limit 'gpu0*' --framework pytorch          PyTorch on some hosts
  dltestbed provision --layout single --inventory rack.yml --as-user alice

In full: docs/reference.md, "Inventories, layouts, provisioning\""""


@grouped
def provision(request: ProvisionRequest) -> None:
    """Install the workload (offline, from a wheelhouse built here) on every host the layout uses.

    Facts first (Python, OS, GPUs and driver), then the install, then on each libvirt host its
    benchmark VM (`bench --targets vm,cvm` uses it); a second run changes nothing.

    Layouts, and how an inventory is read: docs/reference.md, "Inventories, layouts, provisioning".

    Exits 0 when every host is provisioned; 2 when one could not be (the summary says which were and which
    were not), or on bad input (one error: line).
    """
    from dltestbed.provision import provision as run

    shown = _Shown()
    report = run(request, on_event=shown.event, on_phase=shown.phase, on_notice=shown.notice)
    _summary(report, shown.console, request.install.check)


PHASES = {
    "facts": "gathering facts",
    "wheelhouse": "building the wheelhouse",
    "image": "building the container image",
    "install": "installing the workload",
    "vms": "making the VMs (the guest image is built first when missing)",
}
MARKS = {"runner_on_failed": "[red]failed[/]", "runner_on_unreachable": "[red]unreachable[/]"}


class _Shown:
    """Provisioning as it goes: a line per phase, per host and task, per notice."""

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(stderr=True, highlight=False, soft_wrap=True)
        self.task = ""

    def phase(self, phase: str) -> None:
        self.console.print(f"[bold]{PHASES[phase]}[/]")

    def event(self, kind: str, outcome: Any, event: dict[str, Any]) -> None:
        from rich.markup import escape

        data = event.get("event_data") or {}
        if kind == "playbook_on_task_start":
            self.task = data.get("task", "")
        if outcome is None or kind == "runner_on_skipped":
            return
        if kind == "runner_on_ok":
            mark = "[yellow]changed[/]" if data.get("res", {}).get("changed") else "[green]ok[/]"
        else:
            mark = MARKS.get(kind, "")
        if not mark:
            return
        extra = f": {escape(outcome.message)}" if kind != "runner_on_ok" and outcome.message else ""
        self.console.print(f"  {outcome.name:<16} {mark:<22} {escape(self.task)}{extra}")

    def notice(self, line: str) -> None:
        from rich.markup import escape

        self.console.print(f"  notice: {escape(line)}")


def _summary(report: ProvisionReport, console: Console, check: bool) -> None:
    """The table of hosts, their VMs and artifacts; exit 2 (DltestbedError) when a host was not provisioned."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from dltestbed.errors import DltestbedError

    table = Table(title=f"provision {report.id}: layout {report.layout}" + (" (check mode)" if check else ""))
    for col in ("host", "address", "kinds", "python", "os", "TF build", "GPUs", "ok", "changed", "result"):
        table.add_column(col)
    good = {"provisioned", "unchanged", "checked"}
    for h in report.hosts:
        result = f"[green]{h.status}[/]" if h.status in good else f"[red]{h.status}[/]"
        result += f": {escape(h.reason)}" if h.reason else ""
        cells = (h.python, h.os, h.flavor)
        table.add_row(
            h.name,
            h.address,
            ",".join(h.kinds),
            *(c or "—" for c in cells),
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
