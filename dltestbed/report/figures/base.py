"""What every figure shares: the layers' colours, the width, the SVG settings, labels of a workload, a new figure
or a grid of panels, and a figure as self-contained SVG."""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib import rc_context
from matplotlib.figure import Figure
from matplotlib.text import Text

from dltestbed.report.keys import GroupKey, JobKey
from dltestbed.results.records import RunRecord

KIND_COLOURS = {"bm": "#1f77b4", "cbm": "#ff7f0e", "vm": "#2ca02c", "cvm": "#d62728"}


OTHER_COLOURS = ("#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


FLAG_COLOUR = "#c00000"


WIDTH_IN = 6.4  # every figure's width: read on a phone it scales down, printed it fits a page


WORKLOAD_FIELDS = (
    "model",
    "batch_size",
    "image_size",
    "mode",
    "data",
    "device",
    "scenario",
    "workers",
    "contention",
    "warmup",
    "steps",
)


SVG_RC: Any = {"svg.fonttype": "path", "svg.hashsalt": "dltestbed", "font.size": 9.0}


@dataclass(frozen=True)
class Plot:
    """A rendered figure: where it goes in the report, its title, what it shows, and the SVG."""

    name: str  # a file stem, unique in the report: throughput, steps-2, ...
    section: str  # throughput, overhead, steps, memory, distributed, shared, fleet
    title: str
    caption: str  # what is drawn, the method behind an interval, the runs behind the points
    svg: str


def workload_label(key: GroupKey | JobKey, vary: Iterable[str] = ("model", "batch_size", "image_size")) -> str:
    """A group's workload in a few words, naming only the fields in `vary` (those that differ between groups);
    a default (one worker; no co-tenant, which only the shared scenario calls "alone") is left unsaid."""
    words = []
    for f in WORKLOAD_FIELDS:
        if f not in vary or not hasattr(key, f):
            continue
        v = getattr(key, f)
        if (f == "workers" and v == 1) or (
            f == "contention" and v == "none" and getattr(key, "scenario", "") != "shared"
        ):
            continue
        words.append(
            {
                "batch_size": f"b{v}",
                "image_size": f"{v}px",
                "workers": f"{v} workers",
                "contention": "alone" if v == "none" else f"with {v}",
                "warmup": "warm-up until steady" if v is None else f"{v} warm-up",  # None: --warmup auto
                "steps": f"{v} steps",
            }.get(f, str(v))
        )
    return " ".join(words)


def varying(keys: Sequence[GroupKey | JobKey]) -> list[str]:
    """The workload fields whose values differ between keys; the model always."""
    return [
        "model",
        *[f for f in WORKLOAD_FIELDS if f != "model" and len({str(getattr(k, f, None)) for k in keys}) > 1],
    ]


def colour(layer: str, order: list[str]) -> str:
    """One colour per layer across every figure: the kinds' own, then a palette in order of appearance."""
    base = layer.split(" ")[0]
    if layer == base and base in KIND_COLOURS:
        return KIND_COLOURS[base]
    if layer not in order:
        order.append(layer)
    return OTHER_COLOURS[order.index(layer) % len(OTHER_COLOURS)]


def new_figure(height: float) -> Figure:
    return Figure(figsize=(WIDTH_IN, max(2.4, height)), layout="constrained")


def wrap(text: str, width: int) -> str:
    out, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return "\n".join([*out, line])


def by_group(runs: Iterable[RunRecord]) -> dict[GroupKey, list[RunRecord]]:
    """Foreground runs by the report's group key (co-tenants are the load, not a measurement)."""
    out: dict[GroupKey, list[RunRecord]] = {}
    for r in runs:
        if r.measured:
            out.setdefault(GroupKey.of(r), []).append(r)
    return out


def group_title(key: GroupKey, vary: Sequence[str], n: int) -> str:
    return f"{key.layer} · {workload_label(key, vary)} ({n} run{'s' if n != 1 else ''})"


def grid(panels: int, height: float) -> tuple[Figure, list[Any]]:
    cols = 1 if panels == 1 else 2
    rows = math.ceil(panels / cols)
    fig = new_figure(height * rows + 0.6)
    axes = fig.subplots(rows, cols, squeeze=False).ravel().tolist()
    for ax in axes[panels:]:
        ax.set_visible(False)
    return fig, axes[:panels]


def gib(values: np.ndarray) -> np.ndarray:
    return values / 2**30


def fit(text: Text, width: float) -> None:
    """Wrap a title at words until no line is wider than `width` (display units), at its colon first: a title
    never runs past its figure or into its neighbour's."""
    words = " ".join(text.get_text().split())
    if ": " in words:
        text.set_text(words.replace(": ", ":\n", 1))
    chars = len(words)
    while (seen := text.get_window_extent().width) > width and chars > 8:
        chars = min(chars - 1, int(chars * width / seen))
        text.set_text(wrap(words, chars))


def fit_titles(fig: Figure) -> None:
    """Each title fitted to what it has: the figure's (its suptitle) to the figure's width, a panel's to its panel's
    once laid out (the layout leaves a title's width to the title; laid out only for a title that may not fit)."""
    for t in fig.texts:
        if t.get_window_extent().width > 0.96 * fig.bbox.width:
            fit(t, 0.96 * fig.bbox.width)
    wide = [ax for ax in fig.axes if ax.title.get_window_extent().width > 0.5 * ax.bbox.width]
    if wide:
        fig.draw_without_rendering()
    for ax in wide:
        if ax.title.get_window_extent().width > ax.bbox.width:
            fit(ax.title, ax.bbox.width)


def svg(fig: Figure) -> str:
    """The figure as self-contained SVG, its titles fitted: text drawn as paths, ids repeatable, no date."""
    buf = io.StringIO()
    fit_titles(fig)
    with rc_context(SVG_RC):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()
