"""Figures over a run's time: every step as measured, memory sampled during the runs, and the busiest GPU's
clock, power and temperature beside the steps."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from dltestbed.report.figures.base import (
    FLAG_COLOUR,
    WORKLOAD_FIELDS,
    by_group,
    colour,
    grid,
    group_title,
    new_figure,
    varying,
    workload_label,
)
from dltestbed.report.keys import GroupKey
from dltestbed.results.records import RunRecord
from dltestbed.workload.events import ResourceEvent, StepEvent


def steps(
    runs: Sequence[RunRecord], steps_by_run: Mapping[str, Sequence[StepEvent]], flagged: Mapping[str, Sequence[str]]
) -> Figure | None:
    """Per group, every run's images/sec step by step, in the order they ran: a marker per step (hollow:
    warm-up, untimed), the warm-up shaded, runs with steady-state flags dashed, markers edged red. The x axis counts
    steps, not seconds: a first step of seconds (graph tracing) would squeeze every timed step into a sliver."""
    groups = [(k, [r for r in rs if steps_by_run.get(r.id)]) for k, rs in by_group(runs).items()]
    groups = [(k, rs) for k, rs in groups if rs]
    if not groups:
        return None
    vary = varying([k for k, _ in groups])
    fig, axes = grid(len(groups), 2.3)
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
        ax.set_title(group_title(key, vary, len(rs)), fontsize=8)
        ax.set_xlabel("step (in the order run)")
        ax.set_ylabel("images/sec per step")
        ax.legend(fontsize=6, loc="lower right")
        ax.grid(alpha=0.3)
    fig.suptitle("Images/sec of every step, per run")
    return fig


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
    spanned: int | None = None,
) -> Figure:
    """One panel per layer (`runs` of one workload) and a row per series: mean line and min–max band across
    the layer's runs, each run on one grid of its sampling interval; row `spanned` over its own points' span."""
    layers: dict[str, list[RunRecord]] = {}
    for r in runs:
        layers.setdefault(GroupKey.of(r).layer, []).append(r)
    fig = new_figure(2.4 * len(rows) + 0.6)
    axes = fig.subplots(len(rows), len(layers), squeeze=False, sharey="row")
    palette: list[str] = []
    for col, (layer, rs) in enumerate(layers.items()):
        c = colour(layer, palette)
        for row, (ylabel, series) in enumerate(rows):
            data = [series(r) for r in rs]
            grid, mean, lo, hi = _profile(data)
            ax = axes[row][col]
            ax.fill_between(grid, lo, hi, color=c, alpha=0.25, linewidth=0, label="min–max")
            ax.plot(grid, mean, color=c, linewidth=1.2, label="mean")
            ax.set_ylim(bottom=0)
            if row == spanned:
                _own_span(ax, min(t[0] for t, _ in data if len(t)), max(t[-1] for t, _ in data if len(t)))
            else:
                ax.set_xlim(left=0)
            ax.set_title(f"{layer} ({len(rs)} run{'s' if len(rs) != 1 else ''})", fontsize=8)
            ax.set_xlabel("seconds since the run began")
            if col == 0:
                ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=6, loc="lower right")
    fig.suptitle(f"{title}: {label}")
    return fig


def _own_span(ax: Any, lo: float, hi: float) -> None:
    """A panel's x range its points' own, `lo` to `hi` (steps after a compiled run's long start-up would be squeezed
    against its right edge), with when the first came in a note."""
    pad = 0.03 * (hi - lo) or 0.5
    ax.set_xlim(lo - pad, hi + pad)
    ax.ticklabel_format(axis="x", useOffset=False)
    note = f"timed steps from {lo:.3g} s (start-up and warm-up before)"
    ax.text(0.02, 0.04, note, transform=ax.transAxes, fontsize=6)


def _by_workload(runs: Sequence[RunRecord], keep: Callable[[RunRecord], bool]) -> list[tuple[str, list[RunRecord]]]:
    """The foreground runs `keep` accepts, by workload (layers together), each named in words."""
    by: dict[tuple[Any, ...], list[RunRecord]] = {}
    named: dict[tuple[Any, ...], GroupKey] = {}  # a key that names each workload
    for r in runs:
        if not r.measured or not keep(r):
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
        out.append((label, _over_time(rs, rows, "GPU clocks, power and temperature", label, spanned=0)))
    return out
