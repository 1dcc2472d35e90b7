"""`dltestbed accept`: from an inventory of new nodes to a verdict per node and GPU, an evidence pack (signed when
a key is given), and the failed nodes drained when asked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from dltestbed.choices import DEFAULT_FRAMEWORK, FRAMEWORKS, LEVELS, UNREACHABLE, or_list
from dltestbed.cli.options import RESULTS_HELP, Output

if TYPE_CHECKING:  # annotations only: the command imports it when it runs (CLI start-up)
    from dltestbed.accept import AcceptOutcome

LEVEL = "quick"  # --level's default
# At most 4 lines at 80 columns; each level in full: docs/reference.md (and choices.LEVELS).
LEVEL_HELP = f"{or_list(LEVELS)} (default: {LEVEL}): minutes a node, longer runs, or those then held for hours."
SKIP_HELP = "A stage not to run; repeatable."  # the stages' names are added when --help is shown (help_when_shown)
WHAT, JUDGE, PACK = "What to run", "Judging", "The pack, and after"
# Each line fits 78 columns (80, less rich's margin), so that no command wraps at 80; tests/unit/test_cli.py holds it.
EXAMPLES = """[bold]Examples[/]

  dltestbed accept --inventory rack7.yml --out rack7 --sign-key ~/.ssh/ops
  dltestbed accept --inventory rack7.yml --out rack7 --resume   after a stop
  dltestbed accept --inventory rack7.yml --level standard --skip pairs
  dltestbed accept --inventory rack7.yml --on-fail drain --on-pass resume \\
      --apply                                        Slurm: drain, resume
  dltestbed accept --inventory rack7.yml --on-fail 'page {node} {reason}'
  dltestbed accept --inventory gold.yml --init --level standard \\
      --expected site.toml                 the site's values, per board
  ssh-keygen -Y verify -f allowed_signers -I ops@site \\
      -n dltestbed-acceptance -s rack7/MANIFEST.sha256.sig \\
      < rack7/MANIFEST.sha256                 anyone can check the pack

In full: docs/reference.md, "accept: new nodes to a signed verdict\""""


def help_when_shown() -> dict[str, str]:
    """The help of the options whose names live in a registry too slow to import at every start (the stages
    import the whole acceptance): cli.helpstyle.tidy fills it in when --help is shown."""
    from dltestbed.accept.stages import SKIPPABLE, STAGES

    needed = [name for name in STAGES if name not in SKIPPABLE]
    return {"skip": f"A stage not to run: {or_list(SKIPPABLE)}; repeatable (the verdict needs {', '.join(needed)})."}


def accept(
    inventory: Path = typer.Option(
        ..., metavar="FILE", help="Ansible inventory of the nodes (group bare_metal).", rich_help_panel=WHAT
    ),
    level: str = typer.Option(LEVEL, metavar="NAME", help=LEVEL_HELP, rich_help_panel=WHAT),
    skip: list[str] | None = typer.Option(None, metavar="STAGE", help=SKIP_HELP, rich_help_panel=WHAT),
    framework: str | None = typer.Option(
        None,
        metavar="NAME",
        help=f"What the models compute with: {or_list(FRAMEWORKS)} (default: the one every node has; "
        f"{DEFAULT_FRAMEWORK} where they have more).",
        rich_help_panel=WHAT,
    ),
    hold: str | None = typer.Option(
        None, metavar="DURATION", help="burn-in: how long, e.g. 4h (default 4h).", rich_help_panel=WHAT
    ),
    limit: str | None = typer.Option(None, metavar="PATTERN", help="Only these hosts or groups.", rich_help_panel=WHAT),
    parallel: int | None = typer.Option(
        None, metavar="N", help="Measure at most N nodes at once (default: every node at once).", rich_help_panel=WHAT
    ),
    no_parallel: bool = typer.Option(
        False, "--no-parallel", help="Measure one node at a time (--parallel 1).", rich_help_panel=WHAT
    ),
    golden: Path | None = typer.Option(
        None,
        metavar="FILE",
        help="A golden spec (YAML, fact: value) for the drift check; else the fleet's majority.",
        rich_help_panel=JUDGE,
    ),
    expected: Path | None = typer.Option(
        None,
        metavar="FILE",
        help="The site's expected values per board (TOML), over the shipped ones.",
        rich_help_panel=JUDGE,
    ),
    slowdown: float = typer.Option(
        5.0, metavar="PCT", help="A node this far below its peers' median is slow (default: 5).", rich_help_panel=JUDGE
    ),
    unreachable: str = typer.Option(
        UNREACHABLE[0],
        metavar="VERDICT",
        help=f"A node that cannot be reached, provisioned or measured: {' or '.join(UNREACHABLE)} (the first default).",
        rich_help_panel=JUDGE,
    ),
    init: bool = typer.Option(
        False,
        "--init",
        help="Measure these (golden) nodes and write --expected FILE from them instead of judging.",
        rich_help_panel=JUDGE,
    ),
    out: Path = typer.Option(
        Path("acceptance"), metavar="DIR", help="The evidence pack's folder (and --resume's).", rich_help_panel=PACK
    ),
    resume: bool = typer.Option(
        False,
        "--resume",
        help="Go on with the acceptance in --out: no finished stage again; the nodes left out again.",
        rich_help_panel=PACK,
    ),
    sign_key: Path | None = typer.Option(
        None, metavar="FILE", help="Sign the pack's manifest with this SSH key.", rich_help_panel=PACK
    ),
    on_fail: str | None = typer.Option(
        None,
        metavar="CMD",
        help="'drain' (Slurm), or a command with {node} and {reason}, for each failed node.",
        rich_help_panel=PACK,
    ),
    on_pass: str | None = typer.Option(
        None, metavar="CMD", help="'resume' (Slurm), or a command, for each node that passes.", rich_help_panel=PACK
    ),
    apply: bool = typer.Option(
        False, "--apply", help="Run --on-fail and --on-pass (else they are only shown).", rich_help_panel=PACK
    ),
    results: Path | None = typer.Option(None, metavar="FILE", help=RESULTS_HELP, rich_help_panel=PACK),
    fmt: Output = typer.Option(
        "table", "--format", metavar="FMT", help="table (default), or json.", rich_help_panel=PACK
    ),
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
    be judged; 2 on bad input, or when a stage cannot go on (one error: line; --resume goes on from it once
    mended); 130 when stopped (--resume goes on, and tries the nodes left out again, measured beside controls).
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
