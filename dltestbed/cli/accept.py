"""`dltestbed accept`: from an inventory of new nodes to a verdict per node and GPU, an evidence pack (signed when
a key is given), and the failed nodes drained when asked."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Annotated, ClassVar

import typer

from dltestbed.choices import or_list
from dltestbed.cli.grouped import grouped
from dltestbed.cli.options import Output
from dltestbed.panels import opt
from dltestbed.requests.accept import AcceptRequest, Judging, Nodes, Pack

if TYPE_CHECKING:  # annotations only: the command imports it when it runs (CLI start-up)
    from dltestbed.accept import AcceptOutcome

WHAT, JUDGE, PACK = Nodes.PANEL, Judging.PANEL, Pack.PANEL
# Each line fits 78 columns (80, less rich's margin), so that no command wraps at 80; tests/unit/test_cli.py holds it.
EXAMPLES = """[bold]Examples[/]

  dltestbed accept --inventory rack7.yml --out rack7 --sign-key ~/.ssh/ops
  dltestbed accept --inventory rack7.yml --out rack7 --resume   after a stop
  dltestbed accept --inventory rack7.yml --level standard --skip pairs
  dltestbed accept --inventory rack7.yml --on-fail drain --on-pass resume \\
      --apply                                        Slurm: drain, resume
  dltestbed accept --inventory k8s.yml --on-fail taint --on-pass untaint \\
      --apply                 Kubernetes: taint, untaint, with the reason
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
    return {"--skip": f"A stage not to run: {or_list(SKIPPABLE)}; repeatable (the verdict needs {', '.join(needed)})."}


@dataclass(frozen=True)
class Asked:
    """What the command line says beyond the library's request, each in the panel it belongs to."""

    PANEL: ClassVar[str] = PACK
    DEFAULTS_SHOWN: ClassVar[bool] = True

    no_parallel: Annotated[
        bool, opt("--no-parallel", help="Measure one node at a time (--parallel 1).", panel=WHAT)
    ] = False
    init: Annotated[
        bool,
        opt(
            "--init",
            help="Measure these (golden) nodes and write --expected FILE from them instead of judging.",
            panel=JUDGE,
        ),
    ] = False
    fmt: Annotated[Output, opt("--format", metavar="FMT", help="table (default), or json.")] = "table"


@grouped
def accept(request: AcceptRequest, asked: Asked) -> None:
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
    from dltestbed.accept import run_accept, run_init
    from dltestbed.cli.bench import run_observed

    if asked.no_parallel:
        request = replace(request, nodes=replace(request.nodes, parallel=1))
    if asked.init:
        path, count = run_observed(lambda observer: run_init(request, observer))
        typer.echo(f"{count} expected value(s) from the golden nodes written to {path}", err=True)
        return
    outcome = run_observed(lambda observer: run_accept(request, observer))
    for done in outcome.remedies:
        typer.echo(done.line, err=True)
    if asked.fmt == "json":
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
