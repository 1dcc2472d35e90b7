"""The report's figures, drawn with matplotlib from what the report already computed (GroupStats,
distributed and shared jobs, fleet flags, steady-state flags) and the stored steps and samples.

No statistic is computed here: an interval drawn is one the report printed. Honesty rules, kept by every
builder: throughput axes start at zero, every axis has its unit, every bar or point says how many runs
are behind it, and steps are drawn as measured (a marker per step, no smoothing).

Each builder returns a matplotlib Figure (the object-oriented API: no pyplot, no global state, safe in
threads) or None when the runs hold nothing to draw; `render` turns figures into self-contained SVG
(text as paths: no font needed to view it)."""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from matplotlib import rc_context
from matplotlib.figure import Figure

from dltestbed.report.analysis import Analysis
from dltestbed.report.fleet import FleetFlag
from dltestbed.report.fleet import rule as fleet_rule
from dltestbed.report.inference import CONFIDENCE, MEAN_T, Effect
from dltestbed.report.jobs import DistributedStats, SharedStats
from dltestbed.report.keys import GroupKey, JobKey
from dltestbed.report.micro import CaseStats
from dltestbed.report.stats import NO_INTERVAL, GroupStats
from dltestbed.results.records import RunRecord
from dltestbed.workload.events import ResourceEvent, StepEvent

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
CHANGE_AXIS_MAX = 100.0  # decomposition: the x axis ends here; a wider interval is cut, its end written beside it
SVG_RC: Any = {"svg.fonttype": "path", "svg.hashsalt": "dltestbed", "font.size": 9.0}


@dataclass(frozen=True)
class Plot:
    """A rendered figure: where it goes in the report, its title, what it shows, and the SVG."""

    name: str  # a file stem, unique in the report: throughput, steps-2, ...
    section: str  # throughput, overhead, steps, memory, distributed, shared, fleet
    title: str
    caption: str  # what is drawn, the method behind an interval, the runs behind the points
    svg: str


# -- labels and colours


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
                "warmup": f"{v} warm-up",
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


def _figure(height: float) -> Figure:
    return Figure(figsize=(WIDTH_IN, max(2.4, height)), layout="constrained")


# -- throughput and overhead


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
    fig = _figure(3.2 + 0.15 * len(layers))
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
    ax.set_xticklabels([_wrap(workload_label(named[w], vary), 14) for w in workloads], fontsize=8)
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
    fig = _figure(0.9 + 0.62 * len(rows))
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
    by_row: dict[str, list[tuple[str, Effect]]] = {}  # resource → (layer, its change), in first-seen order
    for g in groups:
        if g.key.against_baseline and g.effect is not None:
            by_row.setdefault(f"{g.key.model} {g.key.mode} img/s", []).append((g.key.layer, g.effect))
    for c in cases:
        if c.headline and c.effect is not None:
            by_row.setdefault(f"{c.key.probe}: {c.key.case}", []).append((c.key.layer, c.effect))
    rows = list(by_row.items())
    layers = list(dict.fromkeys(lay for _, pts in rows for lay, _ in pts))
    fig = _figure(1.0 + 0.5 * len(rows) * max(1, len(layers)) ** 0.5)
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
            change, lo, hi = -e.overhead_pct, -e.hi_pct, -e.lo_pct
            yy = y + 0.3 - step * (j + 0.5)
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
                label=f"{lay} (n={e.n})" if lay not in labelled else None,
            )
            labelled.add(lay)
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
            lo_all.append(lo)
            hi_all.append(shown_hi)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)), [_wrap(name, 28) for name, _ in reversed(rows)], fontsize=7)
    pad = max(1.0, (max(hi_all) - min(lo_all)) * 0.08)
    ax.set_xlim(min(lo_all) - pad, max(hi_all) + pad)
    ax.set_ylim(-0.5, len(rows) - 0.5)
    ax.set_xlabel("change against bare metal, % (negative: the layer gives less)")
    ax.set_title(f"Layer decomposition, {CONFIDENCE:.0%} intervals")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return fig


def _why_none(g: GroupStats) -> str:
    if g.images_per_sec is None:
        return "all runs failed"
    return NO_INTERVAL


def _wrap(text: str, width: int) -> str:
    out, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return "\n".join([*out, line])


# -- steps and memory over time


def _by_group(runs: Iterable[RunRecord]) -> dict[GroupKey, list[RunRecord]]:
    """Foreground runs by the report's group key (co-tenants are the load, not a measurement)."""
    out: dict[GroupKey, list[RunRecord]] = {}
    for r in runs:
        if r.role != "cotenant":
            out.setdefault(GroupKey.of(r), []).append(r)
    return out


def _group_title(key: GroupKey, vary: Sequence[str], n: int) -> str:
    return f"{key.layer} · {workload_label(key, vary)} ({n} run{'s' if n != 1 else ''})"


def _grid(panels: int, height: float) -> tuple[Figure, list[Any]]:
    cols = 1 if panels == 1 else 2
    rows = math.ceil(panels / cols)
    fig = _figure(height * rows + 0.6)
    axes = fig.subplots(rows, cols, squeeze=False).ravel().tolist()
    for ax in axes[panels:]:
        ax.set_visible(False)
    return fig, axes[:panels]


def steps(
    runs: Sequence[RunRecord], steps_by_run: Mapping[str, Sequence[StepEvent]], flagged: Mapping[str, Sequence[str]]
) -> Figure | None:
    """Per group, every run's images/sec step by step, in the order they ran: a marker per step (hollow:
    warm-up, untimed), the warm-up shaded, runs with steady-state flags dashed, markers edged red. The x axis counts
    steps, not seconds: a first step of seconds (graph tracing) would squeeze every timed step into a sliver."""
    groups = [(k, [r for r in rs if steps_by_run.get(r.id)]) for k, rs in _by_group(runs).items()]
    groups = [(k, rs) for k, rs in groups if rs]
    if not groups:
        return None
    vary = varying([k for k, _ in groups])
    fig, axes = _grid(len(groups), 2.3)
    for ax, (key, rs) in zip(axes, groups, strict=True):
        warm_end = 0.0
        for r in sorted(rs, key=lambda r: r.repetition):
            ss = steps_by_run[r.id]
            xs = np.arange(1, len(ss) + 1)
            ys = np.array([s.images_per_sec for s in ss])
            warm = np.array([s.phase == "warmup" for s in ss])
            if warm.any():
                warm_end = max(warm_end, float(xs[warm].max()) + 0.5)
            flag = bool(flagged.get(r.id))
            label = f"rep {r.repetition}{r.arm and ' ' + r.arm}" + (" (flagged)" if flag else "")
            (line,) = ax.plot(xs, ys, linestyle="--" if flag else "-", linewidth=1, label=label)
            edge = FLAG_COLOUR if flag else line.get_color()
            ax.plot(xs[~warm], ys[~warm], "o", markersize=3, color=line.get_color(), markeredgecolor=edge)
            ax.plot(
                xs[warm],
                ys[warm],
                "o",
                markersize=3,
                markerfacecolor="white",
                color=line.get_color(),
                markeredgecolor=edge,
            )
        if warm_end > 0:
            ax.axvspan(0.5, warm_end, color="0.85", zorder=0, label="warm-up (untimed)")
        ax.set_ylim(bottom=0)
        ax.set_xlim(left=0.5)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_title(_group_title(key, vary, len(rs)), fontsize=8)
        ax.set_xlabel("step (in the order run)")
        ax.set_ylabel("images/sec per step")
        ax.legend(fontsize=6, loc="lower right")
        ax.grid(alpha=0.3)
    fig.suptitle("Images/sec of every step, per run")
    return fig


def _gib(values: np.ndarray) -> np.ndarray:
    return values / 2**30


def _profile(series: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Runs' samples on one grid of the sampling interval, each run only within its own samples (linear
    between two samples, nothing beyond its last): (grid, mean, min, max) across runs at each point."""
    gaps = [float(np.median(np.diff(t))) for t, _ in series if len(t) > 1]
    dt = max(min(gaps), 1e-3) if gaps else 1.0
    end = max(float(t[-1]) for t, _ in series)
    grid = np.arange(0.0, end + dt / 2, dt)
    stack = np.full((len(series), len(grid)), np.nan)
    for i, (t, v) in enumerate(series):
        inside = (grid >= t[0]) & (grid <= t[-1])
        stack[i, inside] = np.interp(grid[inside], t, v)
    seen = ~np.isnan(stack).all(axis=0)
    grid, stack = grid[seen], stack[:, seen]
    return grid, np.nanmean(stack, axis=0), np.nanmin(stack, axis=0), np.nanmax(stack, axis=0)


Row = tuple[str, Callable[[ResourceEvent], float]]  # a figure row's label and the value it plots of a sample
Series = Callable[[RunRecord], tuple[np.ndarray, np.ndarray]]  # a run's (seconds since it began, values)


def gpu_memory_row(samples: Sequence[ResourceEvent]) -> Row | None:
    """What the memory figure's GPU row plots: the bytes the framework's allocator holds for the run (what the
    model needs), where its samples have them; else the whole GPU's memory in use as NVML sees it (before
    dltestbed set memory growth, TensorFlow mapped nearly all of it at start: a flat line for every
    model); None without GPU samples."""
    if any(s.gpu_bytes for s in samples):
        return "GPU memory held by the framework, GiB", lambda s: float(sum(s.gpu_bytes or ()))
    if any(s.gpus for s in samples):
        return "GPU memory in use (device), GiB", lambda s: float(sum(g.get("memory_used_bytes") or 0 for g in s.gpus))
    return None


def _start(samples: Sequence[ResourceEvent], st: Sequence[StepEvent]) -> float:
    """When a run began, as its figures count: its first sample or the start of its first step."""
    return min([samples[0].t, *([st[0].t - st[0].seconds] if st else [])])


def _sampled(
    resources_by_run: Mapping[str, Sequence[ResourceEvent]],
    steps_by_run: Mapping[str, Sequence[StepEvent]],
    value: Callable[[ResourceEvent], float],
    scale: float = 1.0,
) -> Series:
    """A row of sampled values: each sample's value against the seconds since its run began."""

    def series(r: RunRecord) -> tuple[np.ndarray, np.ndarray]:
        samples = resources_by_run[r.id]
        t0 = _start(samples, steps_by_run.get(r.id) or [])
        return np.array([s.t - t0 for s in samples]), np.array([value(s) for s in samples], dtype=float) * scale

    return series


def _over_time(
    runs: Sequence[RunRecord],
    rows: Sequence[tuple[str, Series]],
    title: str,
    label: str,
) -> Figure:
    """One panel per layer (`runs` of one workload) and a row per series: mean line and min–max band across
    the layer's runs, each run on one grid of its sampling interval."""
    layers: dict[str, list[RunRecord]] = {}
    for r in runs:
        layers.setdefault(GroupKey.of(r).layer, []).append(r)
    fig = _figure(2.4 * len(rows) + 0.6)
    axes = fig.subplots(len(rows), len(layers), squeeze=False, sharey="row")
    palette: list[str] = []
    for col, (layer, rs) in enumerate(layers.items()):
        c = colour(layer, palette)
        for row, (ylabel, series) in enumerate(rows):
            grid, mean, lo, hi = _profile([series(r) for r in rs])
            ax = axes[row][col]
            ax.fill_between(grid, lo, hi, color=c, alpha=0.25, linewidth=0, label="min–max")
            ax.plot(grid, mean, color=c, linewidth=1.2, label="mean")
            ax.set_ylim(bottom=0)
            ax.set_xlim(left=0)
            ax.set_title(f"{layer} ({len(rs)} run{'s' if len(rs) != 1 else ''})", fontsize=8)
            ax.set_xlabel("seconds since the run began")
            if col == 0:
                ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=6, loc="lower right")
    fig.suptitle(f"{title}: {label}")
    return fig


def _by_workload(runs: Sequence[RunRecord], keep: Callable[[RunRecord], bool]) -> list[tuple[str, list[RunRecord]]]:
    """The foreground runs `keep` accepts, by workload (layers together), each named in words."""
    by: dict[tuple[Any, ...], list[RunRecord]] = {}
    named: dict[tuple[Any, ...], GroupKey] = {}  # a key that names each workload
    for r in runs:
        if r.role == "cotenant" or not keep(r):
            continue
        key = GroupKey.of(r)
        w = tuple(getattr(key, f) for f in WORKLOAD_FIELDS)
        named.setdefault(w, key)
        by.setdefault(w, []).append(r)
    vary = varying(list(named.values()))
    return [(workload_label(named[w], vary), rs) for w, rs in sorted(by.items(), key=lambda i: tuple(map(str, i[0])))]


def memory(
    runs: Sequence[RunRecord],
    resources_by_run: Mapping[str, Sequence[ResourceEvent]],
    steps_by_run: Mapping[str, Sequence[StepEvent]],
) -> list[tuple[str, Figure]]:
    """Per workload, one panel per layer: the workload process's host memory (RSS) over the run, mean
    line and min–max band across repetitions; a second row with GPU memory in use where samples hold
    GPUs (the HPEC'19 profiles). [(workload in words, figure)]."""
    out = []
    for label, rs in _by_workload(runs, lambda r: len(resources_by_run.get(r.id, ())) >= 2):
        rows = [("host memory (RSS), GiB", _sampled(resources_by_run, steps_by_run, lambda s: s.rss_bytes, 2**-30))]
        gpu = gpu_memory_row([s for r in rs for s in resources_by_run[r.id]])
        if gpu:
            rows.append((gpu[0], _sampled(resources_by_run, steps_by_run, gpu[1], 2**-30)))
        out.append((label, _over_time(rs, rows, "Memory over time", label)))
    return out


def _busiest(s: ResourceEvent, key: str) -> float:
    """A sample's value of its busiest GPU (the one the run used), NaN where that GPU does not report it."""
    g = max(s.gpus, key=lambda g: g.get("util_percent", 0), default={})
    return float(g.get(key, np.nan))


def gpu_state(
    runs: Sequence[RunRecord],
    resources_by_run: Mapping[str, Sequence[ResourceEvent]],
    steps_by_run: Mapping[str, Sequence[StepEvent]],
) -> list[tuple[str, Figure]]:
    """Per workload, one panel per layer: images/sec of each timed step beside the busiest GPU's SM clock,
    power and temperature over the run, so a slowdown is seen with what the GPU did at that moment."""

    def steps(r: RunRecord) -> tuple[np.ndarray, np.ndarray]:
        st = [s for s in steps_by_run.get(r.id) or [] if s.phase == "timed"]
        t0 = _start(resources_by_run[r.id], steps_by_run.get(r.id) or [])
        return np.array([s.t - t0 for s in st]), np.array([s.images_per_sec for s in st], dtype=float)

    def clocked(r: RunRecord) -> bool:
        samples = resources_by_run.get(r.id, ())
        return len(samples) >= 2 and any(g.get("sm_clock_mhz") for s in samples for g in s.gpus)

    out = []
    for label, rs in _by_workload(
        runs, lambda r: clocked(r) and any(s.phase == "timed" for s in steps_by_run.get(r.id, ()))
    ):
        rows: list[tuple[str, Series]] = [("images/sec per timed step", steps)]
        for key, ylabel in (
            ("sm_clock_mhz", "SM clock, MHz"),
            ("power_watts", "power, W"),
            ("temperature_c", "temperature, °C"),
        ):
            rows.append((ylabel, _sampled(resources_by_run, steps_by_run, partial(_busiest, key=key))))
        out.append((label, _over_time(rs, rows, "GPU clocks, power and temperature", label)))
    return out


# -- jobs and fleet


def distributed(dist: Sequence[DistributedStats]) -> Figure | None:
    """Per kind and workload: jobs' total images/sec (mean, min–max whiskers) beside workers × one worker
    alone (linear scaling), and the scaling efficiency in %."""
    if not dist:
        return None
    fig = _figure(3.0)
    ax_t, ax_e = fig.subplots(1, 2)
    vary = varying([d.key for d in dist])
    labels = [f"{d.key.target_kind} · {workload_label(d.key, vary)}\n{d.workers} workers" for d in dist]
    palette: list[str] = []
    xs = np.arange(len(dist))
    for x, d in zip(xs, dist, strict=True):
        c = colour(d.key.target_kind, palette)
        t, e, one = d.total_images_per_sec, d.efficiency_percent, d.single_images_per_sec
        if t is not None:
            ax_t.bar(x, t.mean, 0.6, color=c, zorder=2)
            ax_t.errorbar(x, t.mean, yerr=[[t.mean - t.min], [t.max - t.mean]], fmt="none", ecolor="black", capsize=3)
            ax_t.annotate(f"n={t.n}", (x, t.max), xytext=(0, 3), textcoords="offset points", ha="center", fontsize=7)
        if one is not None:
            ax_t.plot(
                [x - 0.3, x + 0.3],
                [one.mean * d.workers] * 2,
                color="black",
                linestyle="--",
                linewidth=1,
                label="workers × one alone" if x == 0 else None,
            )
        if e is not None:
            ax_e.bar(x, e.mean, 0.6, color=c, zorder=2)
            ax_e.errorbar(x, e.mean, yerr=[[e.mean - e.min], [e.max - e.mean]], fmt="none", ecolor="black", capsize=3)
            ax_e.annotate(f"n={e.n}", (x, e.max), xytext=(0, 3), textcoords="offset points", ha="center", fontsize=7)
    for ax in (ax_t, ax_e):
        ax.set_xticks(xs)
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_ylim(bottom=0)
        ax.grid(axis="y", alpha=0.3, zorder=0)
    ax_e.axhline(100, color="black", linewidth=0.8, linestyle=":")
    ax_e.set_ylim(0, max(110.0, *(d.efficiency_percent.max * 1.1 for d in dist if d.efficiency_percent)))
    ax_t.set_ylabel("total images/sec (sum of workers)")
    ax_t.set_title("Total throughput per job", fontsize=9)
    ax_e.set_ylabel("scaling efficiency, %")
    ax_e.set_title("Efficiency: total ÷ (workers × one alone)", fontsize=9)
    if any(d.single_images_per_sec for d in dist):
        ax_t.legend(fontsize=7, loc="lower right")
    fig.suptitle("Distributed jobs (whiskers: min–max over jobs)")
    return fig


def shared(pairs: Sequence[SharedStats]) -> Figure | None:
    """Per kind and workload: the foreground alone and beside its co-tenant (mean, min–max whiskers),
    with the mean drop in % and the pairs behind it."""
    if not pairs:
        return None
    fig = _figure(3.2)
    ax = fig.add_subplot()
    vary = varying([s.key for s in pairs])
    top = 0.0
    for x, sh in enumerate(pairs):
        for dx, spread, c, name in (
            (-0.2, sh.alone_images_per_sec, "#4c72b0", "alone"),
            (0.2, sh.shared_images_per_sec, "#dd8452", "with co-tenant"),
        ):
            if spread is None:
                continue
            ax.bar(x + dx, spread.mean, 0.38, color=c, label=name if x == 0 else None, zorder=2)
            ax.errorbar(
                x + dx,
                spread.mean,
                yerr=[[spread.mean - spread.min], [spread.max - spread.mean]],
                fmt="none",
                ecolor="black",
                capsize=3,
            )
            top = max(top, spread.max)
        if sh.drop_percent is not None and sh.alone_images_per_sec is not None:
            y = max(s.max for s in (sh.alone_images_per_sec, sh.shared_images_per_sec) if s is not None)
            ax.annotate(
                f"drop {sh.drop_percent.mean:.1f} %\n(n={sh.pairs} pair{'s' if sh.pairs != 1 else ''})",
                (x, y),
                xytext=(0, 4),
                textcoords="offset points",
                ha="center",
                fontsize=7,
            )
    ax.set_xticks(range(len(pairs)))
    ax.set_xticklabels(
        [f"{s.key.target_kind} · {workload_label(s.key, vary)}\nco-tenant {s.contention}" for s in pairs], fontsize=7
    )
    ax.set_ylim(0, top * 1.3 if top else 1)
    ax.set_ylabel("foreground images/sec (timed steps)")
    ax.set_title("Shared: the foreground alone and with a co-tenant (whiskers: min–max)")
    ax.grid(axis="y", alpha=0.3, zorder=0)
    ax.legend(fontsize=8, loc="upper right")
    return fig


def fleet(host_groups: Sequence[GroupStats], flags: Sequence[FleetFlag]) -> Figure | None:
    """Per kind and workload with 3 or more hosts: each host's mean images/sec with its 95 % interval,
    the hosts' median, and the hosts the fleet check flagged in red with their modified z."""
    comparisons: dict[GroupKey, list[GroupStats]] = {}
    for g in host_groups:
        if g.key.host is not None and g.images_per_sec is not None:
            comparisons.setdefault(g.key.without_host(), []).append(g)
    panels = [gs for gs in comparisons.values() if len(gs) >= 3]
    if not panels:
        return None
    flagged = {(f.host, f.key): f for f in flags}
    vary = varying([gs[0].key for gs in panels])
    fig, axes = _grid(len(panels), 2.6)
    for ax, gs in zip(axes, panels, strict=True):
        gs = sorted(gs, key=lambda g: str(g.key.host))
        rest = gs[0].key.without_host()
        ys = [g.images_per_sec.mean for g in gs if g.images_per_sec is not None]
        for x, g in enumerate(gs):
            f = flagged.get((str(g.key.host), rest))
            c = FLAG_COLOUR if f else "#1f77b4"
            ips = g.images_per_sec
            if ips is None:
                continue
            m = ips.mean
            ci = g.images_per_sec_ci
            ax.errorbar(
                [x], [m], yerr=[[m - ci[0]], [ci[1] - m]] if ci else None, fmt="s" if f else "o", color=c, capsize=3
            )
            note = f"n={ips.n}" + (f"\noutlier, z={f.robust_z:.1f}" if f else "")
            ax.annotate(
                note,
                (x, ci[1] if ci else m),
                xytext=(0, 3),
                textcoords="offset points",
                ha="center",
                fontsize=6,
                color=c,
            )
        ax.axhline(float(np.median(ys)), color="black", linestyle="--", linewidth=0.8, label="hosts' median")
        ax.set_xticks(range(len(gs)))
        ax.set_xticklabels([str(g.key.host) for g in gs], rotation=45 if len(gs) > 6 else 0, fontsize=7)
        ax.set_ylim(0, max((g.images_per_sec_ci or (0, 0))[1] for g in gs) * 1.3 or max(ys) * 1.3)
        ax.set_xlabel("host")
        ax.set_ylabel("images/sec (timed steps)")
        ax.set_title(f"{gs[0].key.layer} · {workload_label(gs[0].key, vary)}", fontsize=8)
        ax.legend(fontsize=6, loc="lower right")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Fleet: each host against its peers")
    return fig


# -- all of them, as SVG


def svg(fig: Figure) -> str:
    """The figure as self-contained SVG: text drawn as paths, ids repeatable, no date."""
    buf = io.StringIO()
    with rc_context(SVG_RC):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


CAPTIONS = {  # under each figure: what it shows and the method of each interval
    "throughput": f"Bars: mean images/sec over each group's ok runs (n above each bar); error bars: {CONFIDENCE:.0%} "
    f"{MEAN_T} (none below 2 runs). Above each layer's bar: its verdict against bare metal.",
    "overhead": f"Points: each layer's overhead against bare metal; lines: its {CONFIDENCE:.0%} interval (paired t on "
    "log ratios, or Welch t where runs do not pair). A difference is called real only when the line misses 0.",
    "decomposition": "Each layer's change against bare metal for each model's images/sec and each probe's headline "
    f"case; lines: {CONFIDENCE:.0%} intervals (paired t on log ratios, or Welch where runs do not pair); n: the pairs "
    "or the smaller group. Left of 0: the layer gives less of that resource.",
    "steps": "Every step of {n_runs} run(s) as measured, no smoothing: filled markers timed, hollow warm-up (shaded, "
    "untimed). Dashed, markers edged red: runs the steady-state check flagged (see Steady state).",
    "memory": "{label}: the workload process's resident memory (and GPU memory in use, where there are GPUs) "
    "sampled during each run; line: mean across repetitions, band: min–max, each run linear between its samples "
    "and never beyond its last.",
    "gpu": "{label}: each timed step's images/sec, and the SM clock, power draw and temperature of the busiest "
    "GPU (the one the run used) in each sample, on one time axis; line: mean across repetitions, band: min–max. "
    "A step slowing with the clock is the GPU throttling (see GPU health for the reasons).",
    "distributed": "Total: the sum of the workers' own measured images/sec per job; dashed: workers × one worker "
    "alone (linear scaling). Efficiency: total ÷ that. Whiskers: min–max over jobs; n: jobs.",
    "shared": "The foreground's images/sec alone and beside its co-tenant in the same repetition; drop: mean over "
    "pairs. Whiskers: min–max.",
    "fleet": f"Each host's mean images/sec with its {CONFIDENCE:.0%} {MEAN_T}; dashed: the hosts' median. Red: "
    "flagged, because {rule}.",
}


def build(a: Analysis) -> list[Plot]:
    """Every figure the analysis has something for, rendered, in report order."""
    flagged = {r.id: w for r, w in a.steady}
    runs, steps_by_run, resources_by_run = a.runs, a.steps, a.samples
    n_runs = sum(1 for r in runs if r.role != "cotenant")
    plots: list[Plot] = []

    def add(name: str, section: str, fig: Figure | None, caption: str) -> None:
        if fig is None:
            return
        title = fig.get_suptitle() or fig.axes[0].get_title()
        plots.append(Plot(name, section, title, caption, svg(fig)))

    with rc_context(SVG_RC):
        add("throughput", "throughput", throughput(a.groups), CAPTIONS["throughput"])
        add("overhead", "overhead", overheads(a.groups), CAPTIONS["overhead"])
        add("decomposition", "decomposition", decomposition(a.cases, a.groups), CAPTIONS["decomposition"])
        add("steps", "steps", steps(runs, steps_by_run, flagged), CAPTIONS["steps"].format(n_runs=n_runs))
        for i, (label, fig) in enumerate(memory(runs, resources_by_run, steps_by_run)):
            add(f"memory-{i + 1}", "memory", fig, CAPTIONS["memory"].format(label=label))
        for i, (label, fig) in enumerate(gpu_state(runs, resources_by_run, steps_by_run)):
            add(f"gpu-{i + 1}", "gpu", fig, CAPTIONS["gpu"].format(label=label))
        add("distributed", "distributed", distributed(a.distributed), CAPTIONS["distributed"])
        add("shared", "shared", shared(a.shared), CAPTIONS["shared"])
        caption = CAPTIONS["fleet"].format(rule=fleet_rule(a.fleet_slowdown))
        add("fleet", "fleet", fleet(a.host_groups, a.fleet), caption)
    return plots
