"""The report's "Same answer" section in Markdown: a row per model, layer and host of the deterministic runs
compared step by step with their reference (report/agreement.py), then each run that diverged. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from dltestbed.report.agreement import DRIFT, FIRST_K_ROOT, Agreement, tolerance_text
from dltestbed.report.mdtable import row as md_row


def _rows(found: Sequence[Agreement]) -> list[str]:
    rows: dict[tuple[str, str, str], list[Agreement]] = {}
    named = len({a.run.framework for a in found}) > 1  # a report of two frameworks names each row's
    for a in found:
        worker = f" worker {a.run.worker_index}" if a.run.worker_index is not None else ""
        model = f"{a.run.model} ({a.run.framework})" if named else a.run.model
        rows.setdefault((model, a.run.target_kind + worker, a.run.unit), []).append(a)
    out = []
    for (model, layer, host), items in rows.items():
        identical = sum(a.identical for a in items)
        bad = [a for a in items if not a.ok]
        firsts = [a.first for a in bad if a.first is not None]
        verdict = f"**{len(bad)} {bad[0].verdict}**" if bad else ("identical" if identical == len(items) else "within")
        tols = sorted({a.tolerance for a in items})
        differs = sorted({d.split(":", 1)[0] for a in items for d in a.differs})
        cells = [
            model,
            layer,
            host,
            str(len(items)),
            f"{identical}/{len(items)}",
            f"{max(a.max_abs for a in items):.3g}",
            f"{max(a.max_rel for a in items):.2e}",
            " / ".join(tolerance_text(t) for t in tols),
            str(min(firsts)) if firsts else "—",
            verdict,
            ", ".join(differs) or "none",
        ]
        out.append(md_row(cells))
    return out


def markdown(found: Sequence[Agreement]) -> list[str]:
    """The section's lines; none when no deterministic run had a reference to compare with."""
    if not found:
        return []
    refs = sorted({f"{a.reference.target_kind} ({a.basis})" for a in found})
    lines = [
        "",
        "## Same answer (deterministic runs, loss per step)",
        "",
        f"Each run's loss at every step against {', '.join(refs)} of the same work (framework, model, data, "
        "sizes, steps, math, seed, worker). On the same stack (the framework's build, Keras, oneDNN, CPU model "
        "and count, GPU and driver, CUDA libraries) the losses must be bit for bit the same; on another stack "
        f"within a relative tolerance: {FIRST_K_ROOT} × the math's unit roundoff at step 0 (one forward pass, "
        f"reordered sums), {DRIFT:.0%} at later steps (training amplifies the first differences; beyond that it "
        "is not the same training).",
        "",
        "| model | layer | host | runs | bit for bit | largest abs Δ | largest rel Δ | tolerance | first "
        "divergent step | verdict | stack differs in |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *_rows(found),
    ]
    bad = [a for a in found if not a.ok]
    if bad:
        lines += ["", *[f"- **error** {a.run.host}, {a.run.target_kind} run {a.run.id}: {a.describe()}" for a in bad]]
    return lines
