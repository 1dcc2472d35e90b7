"""The report's figures, drawn with matplotlib from what the report already computed (GroupStats,
distributed and shared jobs, fleet flags, steady-state flags) and the stored steps and samples.

No statistic is computed here: an interval drawn is one the report printed. Honesty rules, kept by every
builder: throughput axes start at zero, every axis has its unit, every bar or point says how many runs
are behind it, and steps are drawn as measured (a marker per step, no smoothing).

Each builder returns a matplotlib Figure (the object-oriented API: no pyplot, no global state, safe in
threads) or None when the runs hold nothing to draw; `render` turns figures into self-contained SVG
(text as paths: no font needed to view it)."""

from __future__ import annotations

from matplotlib import rc_context
from matplotlib.figure import Figure

from dltestbed.report.analysis import Analysis
from dltestbed.report.figures.base import FLAG_COLOUR, SVG_RC, Plot, svg
from dltestbed.report.figures.jobs import distributed, fleet, shared
from dltestbed.report.figures.layers import CHANGE_AXIS_MAX, decomposition, overheads, throughput
from dltestbed.report.figures.timeline import gpu_memory_row, gpu_state, memory, steps
from dltestbed.report.fleet import rule as fleet_rule
from dltestbed.report.inference import CONFIDENCE, MEAN_T

__all__ = [
    "CAPTIONS",
    "CHANGE_AXIS_MAX",
    "FLAG_COLOUR",
    "Plot",
    "build",
    "decomposition",
    "distributed",
    "fleet",
    "gpu_memory_row",
    "gpu_state",
    "memory",
    "overheads",
    "shared",
    "steps",
    "svg",
    "throughput",
]

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
    "GPU (the one the run used) in each sample, in seconds since the run began: the steps over their own span "
    "(a note says when the first came), the GPU over the whole run; line: mean across repetitions, band: min–max. "
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
    n_runs = sum(1 for r in runs if r.measured)
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
