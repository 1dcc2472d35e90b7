"""`dltestbed accept`: from an inventory of new nodes to a verdict per node and GPU, an evidence pack (signed when
a key is given), and the failed nodes drained when asked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from dltestbed.choices import LEVELS, UNREACHABLE
from dltestbed.cli.options import RESULTS_HELP, Output

if TYPE_CHECKING:  # annotations only: the command imports it when it runs (CLI start-up)
    from dltestbed.accept import AcceptOutcome

LEVEL_HELP = "; ".join(f"{name}: {summary}" for name, summary in LEVELS.items())
EXAMPLES = """Examples:

  dltestbed accept --inventory rack7.yml --level quick --out rack7-acceptance --sign-key ~/.ssh/acceptance
  dltestbed accept --inventory rack7.yml --out rack7-acceptance --resume              # go on after a stop
  dltestbed accept --inventory rack7.yml --on-fail drain --on-pass resume --apply     # Slurm: drain, resume
  dltestbed accept --inventory rack7.yml --on-fail 'notify-ops {node} {reason}'       # a site's own hook
  ssh-keygen -Y verify -f allowed_signers -I ops@site -n dltestbed-acceptance \\
      -s rack7-acceptance/MANIFEST.sha256.sig < rack7-acceptance/MANIFEST.sha256       # anyone can check it
"""


def accept(
    inventory: Path = typer.Option(..., metavar="FILE", help="Ansible inventory of the nodes (group bare_metal)."),
    level: str = typer.Option("quick", metavar="NAME", help=LEVEL_HELP),
    out: Path = typer.Option(Path("acceptance"), metavar="DIR", help="The evidence pack's folder (and --resume's)."),
    resume: bool = typer.Option(
        False, "--resume", help="Go on with the acceptance in --out: no finished stage again; the nodes left out again."
    ),
    init: bool = typer.Option(
        False, "--init", help="Measure these (golden) nodes and write --expected FILE from them instead of judging."
    ),
    golden: Path | None = typer.Option(
        None, metavar="FILE", help="A golden spec (YAML, fact: value) for the drift check; else the fleet's majority."
    ),
    expected: Path | None = typer.Option(
        None, metavar="FILE", help="The site's expected values per board (TOML), over the shipped ones."
    ),
    slowdown: float = typer.Option(5.0, metavar="PCT", help="A node this far below its peers' median is slow (5)."),
    parallel: int | None = typer.Option(
        None, metavar="N", help="Measure at most N nodes at once (default: every node at once)."
    ),
    no_parallel: bool = typer.Option(False, "--no-parallel", help="Measure one node at a time (--parallel 1)."),
    unreachable: str = typer.Option(
        UNREACHABLE[0],
        metavar="VERDICT",
        help=f"A node that cannot be reached, provisioned or measured: {' or '.join(UNREACHABLE)} (the first default).",
    ),
    skip: list[str] | None = typer.Option(
        None, metavar="STAGE", help="A stage not to run, e.g. provision; repeatable."
    ),
    framework: str | None = typer.Option(
        None, metavar="NAME", help="What the models compute with (default: what every node has; TensorFlow if both)."
    ),
    hold: str | None = typer.Option(None, metavar="DURATION", help="burn-in: how long, e.g. 4h (default 4h)."),
    sign_key: Path | None = typer.Option(None, metavar="FILE", help="Sign the pack's manifest with this SSH key."),
    on_fail: str | None = typer.Option(
        None, metavar="CMD", help="'drain' (Slurm), or a command with {node} and {reason}, for each failed node."
    ),
    on_pass: str | None = typer.Option(
        None, metavar="CMD", help="'resume' (Slurm), or a command, for each node that passes."
    ),
    apply: bool = typer.Option(False, "--apply", help="Run --on-fail and --on-pass (else they are only shown)."),
    limit: str | None = typer.Option(None, metavar="PATTERN", help="Only these hosts or groups."),
    results: Path | None = typer.Option(None, metavar="FILE", help=RESULTS_HELP),
    fmt: Output = typer.Option("table", "--format", metavar="FMT", help="table (default), or json."),
) -> None:
    """Accept new nodes: provision, preflight (drift of driver, firmware, versions and the host's CPUs, memory
    and NUMA), every GPU measured (screen, probes, model), all GPUs of a node together, pairs of nodes (each
    node in one pair, all at once), the fleet's outliers, a second pass on what failed or was slow, rerun beside
    known-good controls at the same time and judged against them, then a verdict per node and GPU with its
    reasons, actions and evidence. A node that cannot be reached, provisioned or measured is left out of the
    stages after and judged cannot judge (--unreachable fail: fail); the others go on.

    The evidence pack in --out: verdict.json, junit.xml (per node and GPU), report.html, facts.json, the
    inventory as used, the remedies, and MANIFEST.sha256 over every file, signed with --sign-key
    (`ssh-keygen -Y verify`, namespace dltestbed-acceptance).

    --init measures golden nodes instead (--level standard or burn-in) and writes what they reached to
    --expected FILE, per board, each value with its source; too noisy a measure is refused, nothing written.

    Exits 0 when every node passes (a warning passes), 1 when any fails, 3 when none fails but some cannot
    be judged; 130 when stopped (--resume goes on, and tries the nodes left out again, measured beside controls).
    """
    from dltestbed.accept import AcceptRequest, run_accept, run_init
    from dltestbed.accept.levels import seconds
    from dltestbed.cli.bench import run_observed

    request = AcceptRequest(
        inventory=inventory,
        out=out,
        level=level,
        results=results,
        resume=resume,
        golden=golden,
        expected=expected,
        slowdown=slowdown,
        parallel=1 if no_parallel else parallel,
        unreachable=unreachable,
        skip=tuple(skip or ()),
        framework=framework,
        hold_seconds=seconds(hold) if hold is not None else None,
        sign_key=sign_key,
        on_fail=on_fail,
        on_pass=on_pass,
        apply=apply,
        limit=limit,
    )
    if init:
        path, count = run_observed(lambda observer: run_init(request, observer))
        typer.echo(f"{count} expected value(s) from the golden nodes written to {path}", err=True)
        return
    outcome = run_observed(lambda observer: run_accept(request, observer))
    for done in outcome.remedies:
        typer.echo(done.line, err=True)
    if fmt == "json":
        print(json.dumps(json.loads((outcome.pack / "verdict.json").read_text(encoding="utf-8")), indent=2))
    else:
        _table(outcome)
    signed = "signed" if outcome.signed else "not signed (--sign-key)"
    typer.echo(f"accept {outcome.id}: evidence pack in {outcome.pack} ({signed})", err=True)
    raise typer.Exit(outcome.exit_code)


def _table(outcome: AcceptOutcome) -> None:
    """Each node's verdict and why, as Markdown (drawn to fit on a terminal)."""
    import sys

    from dltestbed.cli.runs import terminal

    lines = [
        f"# dltestbed accept {outcome.id}",
        "",
        "| node | verdict | GPUs | why | action |",
        "|---|---|---|---|---|",
    ]
    for n in outcome.nodes:
        act = next((r.action for r in n.reasons if r.verdict == n.verdict and r.action), "")
        why = n.summary if n.verdict != "pass" else ""
        lines.append(f"| {n.node} | {n.verdict} | {len(n.gpus)} | {why} | {act} |")
    text = "\n".join(lines) + "\n"
    if sys.stdout.isatty():
        terminal(text)
    else:
        print(text, end="")
