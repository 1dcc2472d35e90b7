"""The report's sections of jobs and flags: distributed jobs, shared pairs, the fleet's slow hosts and the runs
the steady-state check flagged."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from dltestbed.kinds import BASELINE
from dltestbed.report import FLEET_MIN_SLOWDOWN, ROBUST_Z
from dltestbed.report.analysis import SteadyFlag
from dltestbed.report.fleet import FleetFlag
from dltestbed.report.fleet import rule as fleet_rule
from dltestbed.report.inference import CONFIDENCE, PAIRED_T, TREND_BAND_PCT, WELCH_T, estimate_cell
from dltestbed.report.jobs import DistributedStats, SharedStats
from dltestbed.report.mdtable import row as md_row
from dltestbed.report.render.tables import num
from dltestbed.report.trends import Wander


def fleet_section(flags: Sequence[FleetFlag], compared: int, slowdown: float = FLEET_MIN_SLOWDOWN) -> list[str]:
    if not compared:
        return []
    lines = ["", "## Fleet: hosts slower than their peers", ""]
    if not flags:
        return [
            *lines,
            f"No host is slower than its peers ({compared} comparison(s) of 3 or more hosts of the "
            f"same kind and workload; a host is flagged when {fleet_rule(slowdown)}).",
        ]
    lines += [
        "| kind | model | batch | size | host | img/s | peers' median img/s | below by % | modified z | hosts |",
        "|" + "---|" * 10,
    ]
    for f in flags:
        k = f.key
        lines.append(
            md_row(
                [
                    k.layer,
                    k.model,
                    str(k.batch_size),
                    str(k.image_size),
                    f.host,
                    f"{f.images_per_sec:.1f}",
                    f"{f.peers_median:.1f}",
                    f"{(1 - f.images_per_sec / f.peers_median) * 100:.1f}",
                    f"{f.robust_z:.1f}",
                    str(f.hosts),
                ]
            )
        )
    return [*lines, "", f"A host is flagged when {fleet_rule(slowdown)}."]


def steady_section(flags: Sequence[SteadyFlag], wander: Wander | None) -> list[str]:
    if not flags and wander is None:
        return []
    lines = ["", "## Steady state: runs to look at", ""]
    for r, words in flags:
        lines.append(f"- {r.id} ({r.target_kind}, {r.model}, rep {r.repetition}): {'; '.join(words)}")
    if not flags:
        lines.append("None: no run trends beyond this machine's wander, and none holds an outlier step.")
    seen = (
        f"here {wander.sd_pct:.1f} % (sd of the change over the timed steps between runs of one setting, pooled "
        f"over {wander.settings} settings and {wander.runs} runs, df {wander.df})"
        if wander
        else "unknown here (no setting ran twice), so each run is judged by its own interval alone"
    )
    return [
        *lines,
        "",
        "Trend: Theil–Sen slope of the timed steps' images/sec with its interval, flagged from a "
        f"{TREND_BAND_PCT:g} % change over the run, when it also lies beyond t × the machine's wander (the other "
        f"runs' wander, t at its df and the runs' Bonferroni level), {seen}; and "
        "a setting whose runs trend together (t-interval of their mean change). Runs and settings are judged "
        f"together (Bonferroni), each judgement at {(1 - CONFIDENCE) / 2 * 100:g} %, so that steady runs are "
        f"flagged with at most {(1 - CONFIDENCE) * 100:g} % chance; outlier steps: modified z beyond "
        f"{ROBUST_Z:g}. Flags change no number.",
    ]


def _against_bm(d: DistributedStats) -> str:
    """A job row's cost against bare metal in one cell: `baseline` for bm, else the estimate and its interval."""
    return "baseline" if d.key.target_kind == BASELINE else estimate_cell(d.effect)


def _costs(dist: Sequence[DistributedStats]) -> list[str]:
    """Each layer's jobs against bare metal's in words, each side's network named where they differ (the study's
    finding: a pod network's overlay against the host's network)."""
    nets = {(d.key, d.workers): d.network for d in dist}
    out = []
    for d in dist:
        if d.verdict is None or d.effect is None:
            continue
        bm = nets.get((replace(d.key, target_kind=BASELINE), d.workers), "")
        on = f" on the {d.network} network, bm on the {bm} one" if d.network and bm and d.network != bm else ""
        out.append(
            f"- {d.key.target_kind}{on}: {d.key.model}, {d.workers} workers, job totals against bm's: {d.verdict} "
            f"({d.effect.method}, n = {d.effect.n})"
        )
    return ["", *out] if out else []


def distributed_section(dist: Sequence[DistributedStats]) -> list[str]:
    lines: list[str] = []
    if dist:
        lines += [
            "",
            "## Distributed: total throughput and scaling efficiency",
            "",
            "| kind | network | model | batch/worker | size | workers | jobs | total img/s mean | total img/s std | "
            "per worker img/s | 1 worker alone img/s | efficiency % mean | efficiency % min | "
            "efficiency % max | total vs bm: slower % [95 % CI] |",
            "|" + "---|" * 15,
        ]
        for d in dist:
            k = d.key
            jobs = f"{d.jobs}" + (f" (+{d.failed_jobs} failed)" if d.failed_jobs else "")
            t, e = d.total_images_per_sec, d.efficiency_percent
            lines.append(
                md_row(
                    [
                        k.target_kind,
                        d.network or "—",
                        k.model,
                        str(k.batch_size),
                        str(k.image_size),
                        str(d.workers),
                        jobs,
                        num(t.mean if t else None),
                        num(t.std if t else None),
                        num(d.worker_images_per_sec.mean if d.worker_images_per_sec else None),
                        num(d.single_images_per_sec.mean if d.single_images_per_sec else None),
                        num(e.mean if e else None),
                        num(e.min if e else None),
                        num(e.max if e else None),
                        _against_bm(d),
                    ]
                )
            )
        lines += [
            "",
            "total: the sum of the workers' own measured images/sec in one job (not one worker × N);",
            "efficiency: total ÷ (workers × one worker of the same kind alone, run just before the job);",
            f"total vs bm: a layer's job totals against bare metal's of the same workload and workers ({PAIRED_T} "
            f"where each job has bm's on the same nodes in the same repetition, else {WELCH_T}); where the "
            "kinds ran on different networks (a pod network's overlay against the host's), that is the network's "
            "cost too.",
        ]
        lines += _costs(dist)
    return lines


def shared_section(shared: Sequence[SharedStats]) -> list[str]:
    lines: list[str] = []
    if shared:
        lines += [
            "",
            "## Shared: the foreground alone and with a co-tenant",
            "",
            "| kind | model | batch | size | co-tenant | pairs | alone img/s | with co-tenant img/s | "
            "drop % mean | drop % min | drop % max | co-tenant img/s | QoS (Kubernetes) |",
            "|" + "---|" * 13,
        ]
        for sh in shared:
            k = sh.key
            pairs = f"{sh.pairs}" + (f" (+{sh.failed_pairs} failed)" if sh.failed_pairs else "")
            dr = sh.drop_percent
            lines.append(
                md_row(
                    [
                        k.target_kind,
                        k.model,
                        str(k.batch_size),
                        str(k.image_size),
                        sh.contention,
                        pairs,
                        num(sh.alone_images_per_sec.mean if sh.alone_images_per_sec else None),
                        num(sh.shared_images_per_sec.mean if sh.shared_images_per_sec else None),
                        num(dr.mean if dr else None),
                        num(dr.min if dr else None),
                        num(dr.max if dr else None),
                        num(sh.cotenant_images_per_sec.mean if sh.cotenant_images_per_sec else None),
                        sh.qos or "—",
                    ]
                )
            )
        lines += [
            "",
            "drop: images/sec the foreground lost to the co-tenant, per pair of runs in the same repetition;",
            "QoS: each pod's class on Kubernetes, as its requests make it (--k8s-qos: Guaranteed, its share of the "
            "node's CPU and memory as requests and limits; BestEffort, none).",
        ]
    return lines
