"""The report as Markdown (the HPEC'19-style table) or JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dltestbed.report import ROBUST_Z, accuracy, agreement_md, checks, health_md, micro_md, runtimes, versus, warmup
from dltestbed.report.analysis import Analysis
from dltestbed.report.compare import Change
from dltestbed.report.inference import CONFIDENCE, estimate_cell
from dltestbed.report.mdtable import row as md_row
from dltestbed.report.render.noise import noise_floor
from dltestbed.report.render.sections import distributed_section, fleet_section, shared_section, steady_section
from dltestbed.report.render.tables import (
    environment_section,
    environments,
    groups_table,
    num,
    overheads_table,
    summary,
)


@dataclass(frozen=True)
class FigureRef:
    """A figure as the Markdown names it: its title, what it shows, where its image is."""

    title: str
    caption: str
    src: str  # a path beside the Markdown file (NAME_files/x.svg), or figure:NAME for the HTML page


Figures = Mapping[str, Sequence[FigureRef]]  # by section: throughput, overhead, steps, memory, ...


def _figures(figures: Figures, section: str, captions: bool) -> list[str]:
    lines: list[str] = []
    for f in figures.get(section, ()):
        lines += ["", f"![{f.title}]({f.src})"] + (["", f"*{f.caption}*"] if captions else [])
    return lines


def markdown(
    a: Analysis, title: str = "dltestbed report", figures: Figures | None = None, captions: bool = True
) -> str:
    """The report in Markdown: each layer's verdict in a line, the groups' table, each layer's overhead
    with its interval and verdict, the probes, the environment of each group and its differences, the
    noise floor, fleet outliers, steady-state flags, GPU health, accuracy, the deterministic runs' agreement,
    the checked results, distributed jobs and shared pairs — each section only when the runs have it — with
    each figure in its section (captions: a line under each)."""
    figs = figures or {}
    groups = a.groups
    micro_lines = micro_md.markdown(a.cases, a.skipped, groups)
    lines = [f"# {title}", *summary(groups)]
    lines += groups_table(groups) if groups or not micro_lines else []
    lines += _figures(figs, "throughput", captions)
    lines += overheads_table(groups, a.equivalence)
    lines += _figures(figs, "overhead", captions)
    lines += versus.markdown(a.frameworks)
    lines += runtimes.markdown(a.runtimes)
    lines += micro_lines
    lines += _figures(figs, "decomposition", captions)
    lines += environments(groups)
    lines += environment_section(groups)
    lines += noise_floor(groups)
    lines += fleet_section(a.fleet, a.fleet_compared, a.fleet_slowdown)
    lines += _figures(figs, "fleet", captions)
    lines += steady_section(a.steady, a.wander)
    lines += warmup.markdown(a.warmups)
    named = {r.id: f"{r.target_kind} {r.model} rep {r.repetition}" for r in a.runs}
    lines += health_md.markdown(a.gpus, a.findings, a.gpu_flags, a.fleet, named)
    lines += _figures(figs, "gpu", captions)
    lines += accuracy.markdown(a.accuracy)
    lines += agreement_md.markdown(a.agreement)
    lines += checks.markdown(a.checked, a.mismatches)
    for section, heading in (("steps", "Steps, run by run"), ("memory", "Memory over time")):
        if figs.get(section):
            lines += ["", f"## {heading}", *_figures(figs, section, captions)]
    lines += distributed_section(a.distributed)
    lines += _figures(figs, "distributed", captions)
    lines += shared_section(a.shared)
    lines += _figures(figs, "shared", captions)
    return "\n".join(lines) + "\n"


def comparison(a: str, b: str, changes: Sequence[Change]) -> str:
    """Markdown: bench B against bench A, per group (before and after, e.g. a driver update)."""
    lines = [f"# dltestbed report: bench {b} against bench {a}", ""]
    if not changes:
        return (
            "\n".join(
                [
                    *lines,
                    "No group of runs is in both benches (same kind, model, data, mode, device, batch, "
                    "size, warm-up, steps, contention).",
                ]
            )
            + "\n"
        )
    lines += [
        f"| kind | model | batch | size | A runs | A img/s | B runs | B img/s | B vs A % [{CONFIDENCE:.0%}] | "
        "verdict (B against A) |",
        "|" + "---|" * 10,
    ]
    for c in changes:
        k, e = c.key, c.effect
        sa, sb = c.a_images_per_sec, c.b_images_per_sec
        lines.append(
            md_row(
                [
                    k.layer,
                    k.model,
                    str(k.batch_size),
                    str(k.image_size),
                    str(sa.n if sa else 0),
                    num(sa.mean if sa else None),
                    str(sb.n if sb else 0),
                    num(sb.mean if sb else None),
                    estimate_cell(e),
                    c.verdict,
                ]
            )
        )
    lines += [
        "",
        "B vs A: images/sec B lost against A (negative: B is faster), Welch t on log throughput (two "
        "benches are not paired by repetition); a change is called real only when its interval excludes 0.",
    ]
    diffs = [(c, line) for c in changes for line in c.env]
    if diffs:
        lines += ["", "## What changed in the environment", ""]
        lines += [f"- {c.key.layer}, {c.key.model}: {line}" for c, line in diffs]
    return "\n".join(lines) + "\n"


def as_json(a: Analysis) -> str:
    """{"scope", "groups", "distributed", "shared", "fleet", "fleet_rule", "steady", "steady_wander", "frameworks",
    "runtimes", "warmup", "micro", "health", "accuracy", "agreement", "checks"} as JSON."""
    rule = {
        "method": "leave-one-out modified z-score (peers' median and MAD)",
        "z_below": -ROBUST_Z,
        "min_slowdown_pct": a.fleet_slowdown,
    }
    return json.dumps(
        {
            "scope": a.scope,
            "groups": [g.to_dict() for g in a.groups],
            "distributed": [d.to_dict() for d in a.distributed],
            "shared": [s.to_dict() for s in a.shared],
            "fleet": [f.to_dict() for f in a.fleet],
            "fleet_rule": rule,
            "steady": [{"run": r.id, "flags": w} for r, w in a.steady],
            "steady_wander": a.wander.to_dict() if a.wander else None,
            "frameworks": [v.to_dict() for v in a.frameworks],
            "runtimes": [r.to_dict() for r in a.runtimes],
            "warmup": [w.to_dict() for w in a.warmups],
            "micro": {"cases": [c.to_dict() for c in a.cases], "skipped": [s.__dict__ for s in a.skipped]},
            "health": {
                "findings": [f.to_dict() for f in a.findings],
                "gpus": [g.to_dict() for g in a.gpus],
                "gpu_flags": [f.to_dict() for f in a.gpu_flags],
            },
            "accuracy": [x.to_dict() for x in a.accuracy],
            "agreement": [x.to_dict() for x in a.agreement],
            "checks": {"rows": [c.to_dict() for c in a.checked], "mismatches": [m.to_dict() for m in a.mismatches]},
        },
        indent=2,
    )
