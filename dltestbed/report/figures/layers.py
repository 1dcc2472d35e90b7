"""Figures of the layers against bare metal: throughput per group, each layer's overhead with its interval, and
the decomposition of a layer's change over the models and the probes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matplotlib.figure import Figure

from dltestbed.report.figures.base import FLAG_COLOUR, colour, new_figure, varying, workload_label, wrap
from dltestbed.report.inference import CONFIDENCE, Effect
from dltestbed.report.keys import GroupKey
from dltestbed.report.micro import CaseStats
from dltestbed.report.stats import NO_INTERVAL, GroupStats

CHANGE_AXIS_MAX = 100.0  # decomposition: the x axis ends here; a wider interval is cut, its end written beside it


def throughput(groups: Sequence[GroupStats]) -> Figure | None:
    """Mean images/sec per layer and workload (scenario single: distributed and shared runs have figures
    of their own), with the 95 % t-interval of the mean as error bars, the number of runs and (for each
    layer against bare metal) the verdict, abbreviated, above each bar."""
    fg = [g for g in groups if g.key.scenario == "single" and g.runs]
    if not fg:
        return None
    named: dict[tuple[Any, ...], GroupKey] = {}  # each workload once, in order, with a key that names it
    layers: list[str] = []
    for grp in fg:
        named.setdefault(grp.key.workload, grp.key)
        layers += [grp.key.layer] if grp.key.layer not in layers else []
    workloads = list(named)
    vary = varying(list(named.values()))
    fig = new_figure(3.2 + 0.15 * len(layers))
    ax = fig.add_subplot()
    width = 0.8 / len(layers)
    palette: list[str] = []
    top = 0.0
    for li, layer in enumerate(layers):
        xs, ys, lo, hi, notes = [], [], [], [], []
        for wi, w in enumerate(workloads):
            one = next((c for c in fg if c.key.layer == layer and c.key.workload == w), None)
            if one is None:
                continue
            x = wi - 0.4 + width * (li + 0.5)
            if one.images_per_sec is None:
                ax.text(x, 0, " all runs failed", rotation=90, ha="center", va="bottom", fontsize=7, color=FLAG_COLOUR)
                continue
            m = one.images_per_sec.mean
            ci = one.images_per_sec_ci
            xs.append(x)
            ys.append(m)
            lo.append(m - ci[0] if ci else 0.0)
            hi.append(ci[1] - m if ci else 0.0)
            notes.append((x, ci[1] if ci else m, _bar_note(one)))
        if not xs:
            continue
        ax.bar(xs, ys, width * 0.92, color=colour(layer, palette), label=layer, zorder=2)
        ax.errorbar(xs, ys, yerr=[lo, hi], fmt="none", ecolor="black", capsize=3, linewidth=1, zorder=3)
        for x, y, note in notes:
            ax.annotate(note, (x, y), xytext=(0, 3), textcoords="offset points", ha="center", va="bottom", fontsize=7)
            top = max(top, y)
    ax.set_xticks(range(len(workloads)))
    ax.set_xticklabels([wrap(workload_label(named[w], vary), 14) for w in workloads], fontsize=8)
    ax.set_ylim(0, top * 1.25 if top > 0 else 1)
    ax.set_ylabel("images/sec (timed steps)")
    ax.set_xlabel("workload")
    ax.set_title("Throughput per layer and workload")
    ax.grid(axis="y", alpha=0.3, zorder=0)
    ax.legend(title="layer", fontsize=8, loc="upper right", ncols=min(4, len(layers)))
    return fig


def _bar_note(g: GroupStats) -> str:
    """n and, against bare metal, the verdict in a word or two."""
    n = g.images_per_sec.n if g.images_per_sec else 0
    note = f"n={n}"
    if not g.key.against_baseline:
        return note
    words = g.verdict or ""
    if words.startswith(("slower", "faster")) and g.effect is not None:
        return note + f"\n{words.split(' ')[0]} {abs(g.effect.overhead_pct):.1f} %"
    if words.startswith("no difference"):
        return note + "\nno diff."
    if words.startswith("refused"):
        return note + "\nnot comparable"
    return note


def overheads(groups: Sequence[GroupStats]) -> Figure | None:
    """Each layer's overhead against bare metal with its 95 % interval (the report's paired t on log
    ratios, or Welch), and the verdict in words above it; rows without an interval say why."""
    rows = [g for g in groups if g.key.against_baseline and g.runs]
    if not rows:
        return None
    vary = varying([g.key for g in rows])
    fig = new_figure(0.9 + 0.62 * len(rows))
    ax = fig.add_subplot()
    palette: list[str] = []
    lo_all, hi_all = [0.0], [0.0]
    for i, g in enumerate(rows):
        y = len(rows) - 1 - i
        e = g.effect
        layer = g.key.layer
        n = e.n if e else (g.images_per_sec.n if g.images_per_sec else 0)
        ax.text(
            0.01,
            y + 0.42,
            f"{layer} · {workload_label(g.key, vary)} (n={n}): {g.verdict or _why_none(g)}",
            transform=ax.get_yaxis_transform(),
            fontsize=7,
            va="top",
            ha="left",
            bbox={"facecolor": "white", "edgecolor": "none", "pad": 1, "alpha": 0.85},
        )
        if e is None:
            continue
        c = colour(layer, palette)
        ax.errorbar(
            [e.overhead_pct],
            [y - 0.1],
            xerr=[[e.overhead_pct - e.lo_pct], [e.hi_pct - e.overhead_pct]],
            fmt="o",
            color=c,
            ecolor=c,
            capsize=4,
            markersize=5,
        )
        lo_all.append(e.lo_pct)
        hi_all.append(e.hi_pct)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks([])
    pad = max(1.0, (max(hi_all) - min(lo_all)) * 0.08)
    ax.set_xlim(min(lo_all) - pad, max(hi_all) + pad)
    ax.set_ylim(-0.5, len(rows) - 0.5)
    for y in range(len(rows) - 1):
        ax.axhline(y + 0.5, color="0.8", linewidth=0.6)
    ax.set_xlabel("overhead against bare metal, % (positive: slower)")
    ax.set_title(f"Overhead against bare metal, {CONFIDENCE:.0%} intervals")
    ax.grid(axis="x", alpha=0.3)
    return fig


def decomposition(cases: Sequence[CaseStats], groups: Sequence[GroupStats]) -> Figure | None:
    """Per resource (each model's images/sec, each probe's headline case), every layer's change against
    bare metal with its interval: which resource a layer costs, at a glance."""
    if not any(c.effect is not None for c in cases if c.headline):
        return None  # without a probe it is the overhead figure again
    rows = _decomposition_rows(cases, groups)
    layers = list(dict.fromkeys(lay for _, pts in rows for lay, _ in pts))
    fig = new_figure(1.0 + 0.5 * len(rows) * max(1, len(layers)) ** 0.5)
    ax = fig.add_subplot()
    palette: list[str] = []
    step = 0.6 / max(1, len(layers))
    lo_all, hi_all = [0.0], [0.0]
    labelled: set[str] = set()
    for i, (_, pts) in enumerate(rows):
        y = len(rows) - 1 - i
        for lay, e in pts:
            j = layers.index(lay)
            col = colour(lay, palette)
            label = f"{lay} (n={e.n})" if lay not in labelled else None
            lo, shown_hi = _change_point(ax, y + 0.3 - step * (j + 0.5), e, col, label)
            labelled.add(lay)
            lo_all.append(lo)
            hi_all.append(shown_hi)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)), [wrap(name, 28) for name, _ in reversed(rows)], fontsize=7)
    pad = max(1.0, (max(hi_all) - min(lo_all)) * 0.08)
    ax.set_xlim(min(lo_all) - pad, max(hi_all) + pad)
    ax.set_ylim(-0.5, len(rows) - 0.5)
    ax.set_xlabel("change against bare metal, % (negative: the layer gives less)")
    ax.set_title(f"Layer decomposition, {CONFIDENCE:.0%} intervals")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return fig


def _decomposition_rows(
    cases: Sequence[CaseStats], groups: Sequence[GroupStats]
) -> list[tuple[str, list[tuple[str, Effect]]]]:
    """Each resource with its layers' changes: the models' images/sec first, then the probes' headline cases."""
    by_row: dict[str, list[tuple[str, Effect]]] = {}  # resource → (layer, its change), in first-seen order
    for g in groups:
        if g.key.against_baseline and g.effect is not None:
            by_row.setdefault(f"{g.key.model} {g.key.mode} img/s", []).append((g.key.layer, g.effect))
    for c in cases:
        if c.headline and c.effect is not None:
            by_row.setdefault(f"{c.key.probe}: {c.key.shown}", []).append((c.key.layer, c.effect))
    return list(by_row.items())


def _change_point(ax: Any, yy: float, e: Effect, col: str, label: str | None) -> tuple[float, float]:
    """One layer's change with its interval at height yy, cut at the axis' end; returns the interval as drawn."""
    change, lo, hi = -e.overhead_pct, -e.hi_pct, -e.lo_pct
    shown_hi = min(hi, CHANGE_AXIS_MAX)  # a wide interval (few runs) would squeeze every other one
    ax.errorbar(
        [min(change, CHANGE_AXIS_MAX)],
        [yy],
        xerr=[
            [max(0.0, min(change, CHANGE_AXIS_MAX) - lo)],
            [max(0.0, shown_hi - min(change, CHANGE_AXIS_MAX))],
        ],
        fmt="o",
        color=col,
        ecolor=col,
        capsize=3,
        markersize=4,
        label=label,
    )
    if hi > CHANGE_AXIS_MAX:
        ax.annotate(
            f"→ {hi:+.0f}",
            (CHANGE_AXIS_MAX, yy),
            fontsize=6,
            color=col,
            va="center",
            ha="right",
            xytext=(0, 5),
            textcoords="offset points",
        )
    return lo, shown_hi


def _why_none(g: GroupStats) -> str:
    if g.images_per_sec is None:
        return "all runs failed"
    return NO_INTERVAL
