"""The evidence pack: one folder with the verdicts (JSON, JUnit per node and GPU, an HTML page), every fact,
the inventory as used, the remedies, and MANIFEST.sha256 over every file (signed when a key is given:
dltestbed/evidence.py). The signed manifest is the signed verdict."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from dltestbed.accept.judge import LeftOut, NodeVerdict
from dltestbed.remedy import Done
from dltestbed.report import html as report_html
from dltestbed.report import mdtable
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


def _lit(text: object) -> str:
    """Text as it is on the page: every ASCII punctuation mark backslash-escaped (CommonMark then makes none of
    them markup: no emphasis, link, code or table cell from a host's name or a failure's reason), on one line."""
    return re.sub(r"([!-/:-@\\[-`{-~])", r"\\\1", str(text).replace("\n", " "))


def _checks_table(reasons: Sequence[Reason]) -> list[str]:
    """A table of checks: each one's verdict, why, action and evidence."""
    rows = [
        mdtable.row([_lit(r.check), f"**{r.verdict}**", _lit(r.why), _lit(r.action), _lit(r.evidence)]) for r in reasons
    ]
    return [*mdtable.head(["check", "verdict", "why", "action", "evidence"]), *rows, ""]


def markdown(summary: Mapping[str, Any], nodes: Sequence[NodeVerdict], left: Sequence[LeftOut] = ()) -> str:
    """The pack's page as Markdown: the verdict per node, then every check each node and each of its GPUs went
    through, with their verdicts, actions and evidence, then the checks left out and why."""
    tally = counts(nodes, left)
    lines = [
        f"# {_lit(title(summary))}",
        "",
        _lit(
            f"Level {summary['level']}; {len(nodes)} node(s); inventory {summary['inventory']}; "
            f"dltestbed {summary['dltestbed']}; {summary['started_at']} to {summary['finished_at']}."
        ),
        "",
        _lit(summary["sensitivity"]),
        "",
        _lit("Checks: " + ", ".join(f"{c} {v}" for v, c in tally.items()) + "."),
        "",
        *mdtable.head(["node", "verdict", "GPUs", "why"]),
        *[
            mdtable.row(
                [_lit(n.node), f"**{n.verdict}**", str(len(n.gpus)), _lit(n.summary if n.verdict != PASS else "")]
            )
            for n in nodes
        ],
        "",
    ]
    for n in nodes:
        lines += [f"## {_lit(n.node)}: {n.verdict}", ""]
        mine = [r for r in n.reasons if not r.check.startswith("gpu ")]
        lines += _checks_table(mine) if mine else ["No check of the node itself was made.", ""]
        for g in n.gpus:
            lines += [f"### GPU {_lit(g.gpu)} {_lit(f'({g.name})')}: {g.verdict}", ""]
            lines += _checks_table(g.reasons) if g.reasons else ["No check of the GPU was made.", ""]
    if left:
        lines += ["## Left out", "", *[f"- {_lit(x.check)}: {_lit(x.why)}" for x in left], ""]
    return "\n".join(lines)


def title(summary: Mapping[str, Any]) -> str:
    """The page's title: the acceptance and its outcome."""
    return f"Acceptance {summary['id']}: {summary['outcome']}"


def page(summary: Mapping[str, Any], nodes: Sequence[NodeVerdict], left: Sequence[LeftOut] = ()) -> str:
    """The pack's HTML page: `markdown` through the report's renderer (one self-contained page that loads
    nothing, readable on a phone, printable)."""
    made = f"dltestbed accept {summary['id']}, dltestbed {summary['dltestbed']}"
    return report_html.document(markdown(summary, nodes, left), {}, title(summary), made)


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
