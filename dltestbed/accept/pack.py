"""The evidence pack: one folder with the verdicts (JSON, JUnit per node and GPU, an HTML page), every fact,
the inventory as used, the remedies, and MANIFEST.sha256 over every file (signed when a key is given:
dltestbed/evidence.py). The signed manifest is the signed verdict."""

from __future__ import annotations

import html
import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from dltestbed.accept.judge import LeftOut, NodeVerdict
from dltestbed.remedy import Done
from dltestbed.report.gpu_evidence import Reason
from dltestbed.report.validate import junit_suites
from dltestbed.report.verdicts import FAIL, PASS, SKIPPED, UNDECIDED, WARN, Judgement

VERDICT, FACTS, JUNIT, PAGE, REMEDIES = "verdict.json", "facts.json", "junit.xml", "report.html", "remedies.txt"


def _judgement(r: Reason, what: str) -> Judgement:
    """A reason as validate's JUnit writes a check: a warning passes, cannot judge is never a pass."""
    text = "\n".join(
        x for x in (r.why, r.action and f"action: {r.action}", r.evidence and f"evidence: {r.evidence}") if x
    )
    if r.verdict == WARN:  # passes, and says it warned
        return Judgement(r.check, PASS, f"{WARN}: {text}", what)
    return Judgement(r.check, r.verdict, text, what)


def every_check(nodes: Sequence[NodeVerdict]) -> list[tuple[str, Reason]]:
    """Every check made, as (whose: `node N` or `GPU N:i`, its reason): each node's own (not its GPUs' summaries)
    and each of its GPUs'."""
    out: list[tuple[str, Reason]] = []
    for n in nodes:
        out += [(f"node {n.node}", r) for r in n.reasons if not r.check.startswith("gpu ")]
        out += [(f"GPU {g.gpu}", r) for g in n.gpus for r in g.reasons]
    return out


def counts(nodes: Sequence[NodeVerdict], left: Sequence[LeftOut]) -> dict[str, int]:
    """How many checks ended in each verdict, and how many were left out."""
    made = [r.verdict for _, r in every_check(nodes)]
    return {v: made.count(v) for v in (PASS, WARN, FAIL, UNDECIDED)} | {SKIPPED: len(left)}


def junit(nodes: Sequence[NodeVerdict], left: Sequence[LeftOut] = ()) -> str:
    """A testsuite per node (its checks) and per GPU (its own), a testcase per check made, passed or not; a node or
    GPU with no check made has one skipped case (never a pass); the checks left out, each a skipped case of their
    own suite."""
    none = [Judgement("no check", SKIPPED, "no check of it was made", "acceptance")]
    suites = []
    for n in nodes:
        mine = [r for r in n.reasons if not r.check.startswith("gpu ")]
        suites.append((f"node {n.node}", [_judgement(r, "node") for r in mine] or none))
        suites += [(f"GPU {g.gpu}", [_judgement(r, "gpu") for r in g.reasons] or none) for g in n.gpus]
    if left:
        suites.append(("left out", [Judgement(x.check, SKIPPED, x.why, "acceptance") for x in left]))
    return junit_suites("dltestbed accept", suites, "dltestbed.accept")


COLOURS = {PASS: "#1a7f37", WARN: "#9a6700", FAIL: "#cf222e", UNDECIDED: "#6e7781", SKIPPED: "#6e7781"}


def _checks_table(reasons: Sequence[Reason]) -> list[str]:
    """A table of checks: each one's verdict (coloured), why, action and evidence."""
    e = html.escape
    rows = [
        f'<tr><td>{e(r.check)}</td><td style="color:{COLOURS[r.verdict]}">{e(r.verdict)}</td><td>{e(r.why)}</td>'
        f"<td>{e(r.action)}</td><td>{e(r.evidence)}</td></tr>"
        for r in reasons
    ]
    head = "<div class='t'><table><tr><th>check</th><th>verdict</th><th>why</th><th>action</th><th>evidence</th></tr>"
    return [head, *rows, "</table></div>"]


def page(summary: Mapping[str, Any], nodes: Sequence[NodeVerdict], left: Sequence[LeftOut] = ()) -> str:
    """The pack's HTML page: the verdict per node, then every check each node and each of its GPUs went through,
    with their verdicts, actions and evidence, then the checks left out and why."""
    e = html.escape
    rows = "".join(
        f'<tr><td>{e(n.node)}</td><td style="color:{COLOURS[n.verdict]}"><b>{e(n.verdict)}</b></td>'
        f"<td>{len(n.gpus)}</td><td>{e(n.summary if n.verdict != PASS else '')}</td></tr>"
        for n in nodes
    )
    tally = counts(nodes, left)
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>dltestbed accept {e(summary['id'])}</title>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        "<style>body{font-family:sans-serif;margin:1em;max-width:80em}td,th{border:1px solid #ccc;padding:4px 8px;"
        "vertical-align:top;text-align:left}table{border-collapse:collapse}.t{overflow-x:auto}</style>",
        "</head><body><main>",
        f"<h1>Acceptance {e(summary['id'])}: {e(summary['outcome'])}</h1>",
        f"<p>Level {e(summary['level'])}; {len(nodes)} node(s); inventory {e(summary['inventory'])}; "
        f"dltestbed {e(summary['dltestbed'])}; {e(summary['started_at'])} to {e(summary['finished_at'])}.</p>",
        f"<p>{e(summary['sensitivity'])}</p>",
        "<p id='checks'>Checks: " + e(", ".join(f"{c} {v}" for v, c in tally.items())) + ".</p>",
        "<div class='t'><table><tr><th>node</th><th>verdict</th><th>GPUs</th><th>why</th></tr>",
        rows,
        "</table></div>",
    ]
    for n in nodes:
        parts.append(f"<h2 id='{e(n.node)}'>{e(n.node)}: {e(n.verdict)}</h2>")
        mine = [r for r in n.reasons if not r.check.startswith("gpu ")]
        parts += _checks_table(mine) if mine else ["<p>No check of the node itself was made.</p>"]
        for g in n.gpus:
            parts.append(f"<h3 id='{e(g.gpu)}'>GPU {e(g.gpu)} ({e(g.name)}): {e(g.verdict)}</h3>")
            parts += _checks_table(g.reasons) if g.reasons else ["<p>No check of the GPU was made.</p>"]
    if left:
        parts.append("<h2 id='left-out'>Left out</h2><ul>")
        parts += [f"<li>{e(x.check)}: {e(x.why)}</li>" for x in left]
        parts.append("</ul>")
    parts.append("</main></body></html>\n")
    return "".join(parts)


def write(
    folder: Path,
    summary: Mapping[str, Any],
    nodes: Sequence[NodeVerdict],
    facts: Mapping[str, Any],
    inventory: Path,
    remedies: Sequence[Done],
    left: Sequence[LeftOut] = (),
) -> None:
    """Every file of the pack but the manifest (evidence.write_manifest writes it last): verdict.json holds every
    check of every node and GPU (their reasons, passes included), how many ended in each verdict, and the checks
    left out with why."""
    folder.mkdir(parents=True, exist_ok=True)
    doc = {
        **summary,
        "checks": counts(nodes, left),
        "left_out": [asdict(x) for x in left],
        "nodes": [asdict(n) for n in nodes],
        "remedies": [d.line for d in remedies],
    }
    (folder / VERDICT).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    (folder / FACTS).write_text(json.dumps(facts, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (folder / JUNIT).write_text(junit(nodes, left), encoding="utf-8")
    (folder / PAGE).write_text(page(summary, nodes, left), encoding="utf-8")
    (folder / REMEDIES).write_text("".join(d.line + "\n" for d in remedies) or "none asked\n", encoding="utf-8")
    shutil.copyfile(inventory, folder / f"inventory{inventory.suffix or '.txt'}")
