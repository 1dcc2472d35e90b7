"""`validate`'s judgement of correctness: a wrong answer fails whatever the reference asks. Every probe's
checked results (per host, layer, GPU and probe) and every deterministic run's losses against its
reference (per model, layer and host) become a JUnit case each; there is nothing to set, so --init
writes nothing for them. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from dltestbed.report.agreement import Agreement
from dltestbed.report.checks import CheckRow, Mismatch
from dltestbed.report.verdicts import FAIL, PASS, Judgement


def judge_results(rows: Sequence[CheckRow], bad: Sequence[Mismatch]) -> list[Judgement]:
    """A case per host, layer, GPU and probe: fail on any mismatch, naming the first."""
    out = []
    for r in rows:
        device = "CPU" if r.gpu is None else f"GPU {r.gpu}"
        name = f"{r.host} {r.layer} {device} {r.probe}"
        mine = [m for m in bad if (m.host, m.layer, m.gpu, m.check.probe) == (r.host, r.layer, r.gpu, r.probe)]
        if r.failed:
            first = mine[0].describe() if mine else ""
            out.append(
                Judgement(name, FAIL, f"{r.failed} of {r.checks} check(s) failed; first: {first}", f"results.{r.probe}")
            )
        else:
            said = f"{r.checks} check(s) ({', '.join(r.kinds)}) within tolerance; worst {r.worst_share:.2g} of it"
            out.append(Judgement(name, PASS, said, f"results.{r.probe}"))
    return out


def judge_agreement(found: Sequence[Agreement]) -> list[Judgement]:
    """A case per model, layer and host of the deterministic runs: fail when one diverged or was not
    reproducible, naming its first divergent step."""
    rows: dict[tuple[str, str, str], list[Agreement]] = {}
    for a in found:
        rows.setdefault((a.run.model, a.run.target_kind, a.run.unit), []).append(a)
    out = []
    for (model, layer, host), items in rows.items():
        bad = [a for a in items if not a.ok]
        name = f"{host} {layer} {model}"
        if bad:
            out.append(Judgement(name, FAIL, f"run {bad[0].run.id}: {bad[0].describe()}", f"same_answer.{model}"))
        else:
            identical = sum(a.identical for a in items)
            said = f"{len(items)} run(s) agree with their reference ({identical} bit for bit)"
            out.append(Judgement(name, PASS, said, f"same_answer.{model}"))
    return out
