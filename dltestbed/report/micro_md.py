"""The report's layer decomposition in Markdown: a row per layer with each model's overhead beside each probe's
headline change against bare metal, then the probes' table (each case per layer, its fraction of its limit, its
change with its interval), the GPU while each case ran, the limits' sources and notes, and what was skipped
(report/micro.py summarises the cases). Pure."""

from __future__ import annotations

from collections.abc import Sequence

from dltestbed.report.inference import Effect
from dltestbed.report.keys import with_framework
from dltestbed.report.micro import CaseStats, Skipped
from dltestbed.report.stats import GroupStats

ABOVE_LIMIT = 1.05  # a fraction of the limit beyond the clock's and the datasheet's rounding: the limit is wrong
# How tables show a unit: the largest scale the value reaches (a latency: the smallest unit it reaches).
SCALES = {
    "FLOP/s": ((1e12, "TFLOP/s"), (1e9, "GFLOP/s"), (1e6, "MFLOP/s")),
    "B/s": ((1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s")),
    "s": ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")),
}


def change(e: Effect) -> str:
    """A change against bare metal in % with its interval, negative: less than bare metal
    ("-35.2 [-40.1, -30.0]"); "(n.s.)" when the interval contains 0."""
    tail = "" if e.excludes_zero else " (n.s.)"
    return f"{-e.overhead_pct:+.1f} [{-e.hi_pct:+.1f}, {-e.lo_pct:+.1f}]{tail}"


def show(value: float, unit: str) -> str:
    """A value in the largest unit it reaches, 3 significant digits: 0.0312e9 B/s → "31.2 MB/s"."""
    scales = SCALES.get(unit, ((1.0, unit),))
    div, name = next(((d, n) for d, n in scales if abs(value) >= d), scales[-1])
    return f"{value / div:.3g} {name}"


def markdown(cases: Sequence[CaseStats], skipped: Sequence[Skipped], models: Sequence[GroupStats]) -> list[str]:
    """The decomposition (one row per layer: each model's overhead and each probe's headline change) and
    the probes' table, each case per layer, and what was skipped."""
    if not cases and not skipped:
        return []
    lines = ["", "## Layer decomposition: which resource each layer costs", ""]
    lines += _decomposition(cases, models)
    lines += _probes_table(cases)
    lines += _gpu_while(cases)
    lines += _said(cases)
    if skipped:
        lines += [
            "",
            "### Skipped probes and failed runs: no number",
            "",
            "| layer | probe | case | why |",
            "|---|---|---|---|",
        ]
        lines += [f"| {s.target_kind} | {s.probe} | {s.case} | {'; '.join(s.reasons)} |" for s in skipped]
    return lines


def _decomposition(cases: Sequence[CaseStats], models: Sequence[GroupStats]) -> list[str]:
    """A row per layer: each model's overhead and each probe's headline change against bare metal."""
    layers = list(dict.fromkeys(c.key.layer for c in cases if c.key.against_baseline))
    if not layers:
        return ["Only bare metal ran the probes: nothing to decompose (add --targets cbm, vm or cvm)."]
    heads = [c for c in cases if c.headline]
    probes = list(dict.fromkeys((c.key.probe, c.key.framework) for c in heads))  # each framework's its own column
    effects: dict[tuple[str, str], Effect] = {}  # the first group of a layer and model, as the table has it
    for g in models:
        if g.effect is not None:
            model = with_framework(f"{g.key.model} {g.key.mode}", g.key.framework)
            effects.setdefault((g.key.layer, model), g.effect)
    model_cols = list(dict.fromkeys(m for _, m in effects))
    cols = [*[f"{m} img/s" for m in model_cols], *[f"{p}: {_headline_case(heads, p, fw)}" for p, fw in probes]]
    lines = ["| layer | " + " | ".join(cols) + " |", "|" + "---|" * (len(cols) + 1)]
    for layer in layers:
        cells = [change(e) if (e := effects.get((layer, m))) else "—" for m in model_cols]
        for p, fw in probes:
            c = next((c for c in heads if (c.key.layer, c.key.probe, c.key.framework) == (layer, p, fw)), None)
            cells.append(change(c.effect) if c and c.effect else (c.why_none if c else "—"))
        lines.append(f"| {layer} | " + " | ".join(cells) + " |")
    lines.append("")
    return [
        *lines,
        "Change against bare metal in % with its 95 % interval (negative: less throughput, FLOP/s or "
        "bandwidth than bare metal; n.s.: the interval contains 0). Models: images/sec; probes: the median "
        "of each run's timed calls, repetitions compared with bare metal's by paired t on log ratios "
        "(Welch when the runs do not pair up).",
    ]


def _probes_table(cases: Sequence[CaseStats]) -> list[str]:
    """Each case per layer: its values, the fraction of its limit, its change against bare metal."""
    lines = [
        "",
        "### Probes",
        "",
        "| probe | case | layer | runs | mean | min | max | of limit | change vs bm % | method |",
        "|" + "---|" * 10,
    ]
    above = [c for c in cases if c.fraction is not None and c.fraction > ABOVE_LIMIT]
    for c in cases:
        u = c.key.unit
        frac = f"{c.fraction * 100:.0f} %" if c.fraction is not None else "—"
        frac += " (above its limit!)" if c in above else ""
        eff = change(c.effect) if c.effect else (c.why_none or "baseline")
        lines.append(
            f"| {c.key.probe} | {c.key.shown} | {c.key.layer} | {c.runs} | "
            f"{show(c.value.mean, u)} | {show(c.value.min, u)} | {show(c.value.max, u)} | {frac} | {eff} | "
            f"{c.effect.method if c.effect else '—'} |"
        )
    if above:
        lines += [
            "",
            "Above its limit: a measure no hardware of this limit can reach. The limit does not fit what ran "
            "(before dltestbed named each GEMM's math, a GPU's float32 case ran as TF32, TensorFlow's default on "
            "Ampere and later) or the device is not the one the table names: "
            + "; ".join(
                f"{c.key.probe} {c.key.shown} on {c.key.layer} {c.fraction * 100:.0f} %"
                for c in above
                if c.fraction is not None
            )
            + ".",
        ]
    return lines


def _gpu_while(cases: Sequence[CaseStats]) -> list[str]:
    """Each GPU case's clock and power while it ran: a case at its power cap reads less than a burst would."""
    rows = [f"- {c.key.probe} {c.key.shown} on {c.key.layer}: {c.gpu}" for c in cases if c.gpu]
    if not rows:
        return []
    head = "The GPU while each case ran (mean SM clock, power, share of samples at the power cap), per run:"
    return ["", head, *rows]


def _said(cases: Sequence[CaseStats]) -> list[str]:
    """The limits' sources and the probes' notes, each once with the layers it was said on."""
    lines: list[str] = []
    for head, attr in (("Limits", "limit_source"), ("Notes", "note")):
        said: dict[tuple[str, str], list[str]] = {}  # (probe, text) → layers
        for c in cases:
            if getattr(c, attr):
                layers_of = said.setdefault((c.key.probe, getattr(c, attr)), [])
                if c.key.layer not in layers_of:
                    layers_of.append(c.key.layer)
        if said:
            lines += ["", f"{head}:", *[f"- {p} on {', '.join(ls)}: {text}" for (p, text), ls in said.items()]]
    return lines


def _headline_case(heads: Sequence[CaseStats], probe: str, framework: str) -> str:
    return next(c.key.shown for c in heads if (c.key.probe, c.key.framework) == (probe, framework))
