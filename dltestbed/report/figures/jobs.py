"""Figures of jobs and hosts: a distributed job's scaling, a shared pair's drop, and the fleet's hosts."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from dltestbed.report.figures.base import FLAG_COLOUR, colour, grid, new_figure, varying, workload_label
from dltestbed.report.fleet import FleetFlag
from dltestbed.report.jobs import DistributedStats, SharedStats
from dltestbed.report.keys import GroupKey
from dltestbed.report.stats import GroupStats


def distributed(dist: Sequence[DistributedStats]) -> Figure | None:
    """Per kind and workload: jobs' total images/sec (mean, min–max whiskers) beside workers × one worker
    alone (linear scaling), and the scaling efficiency in %."""
    if not dist:
        return None
    fig = new_figure(3.0)
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
    fig = new_figure(3.2)
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
    fig, axes = grid(len(panels), 2.6)
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
