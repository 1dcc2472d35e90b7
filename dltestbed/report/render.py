"""The report as Markdown (the HPEC'19-style table) or JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dltestbed.report import FLEET_MIN_SLOWDOWN, ROBUST_Z, accuracy, agreement_md, checks, health_md, micro, warmup
from dltestbed.report.analysis import Analysis, SteadyFlag
from dltestbed.report.compare import Change
from dltestbed.report.environment import math_words
from dltestbed.report.fleet import FleetFlag
from dltestbed.report.fleet import rule as fleet_rule
from dltestbed.report.inference import CONFIDENCE, mde_pct, repetitions_needed
from dltestbed.report.jobs import DistributedStats, SharedStats
from dltestbed.report.keys import GroupKey
from dltestbed.report.stats import NO_INTERVAL, OVERHEAD_ESTIMATE, GroupStats, Spread


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


def _num(v: float | None, digits: int = 1) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def _spread_cells(s: Spread | None, digits: int) -> list[str]:
    if s is None:
        return ["—"] * 4
    return [_num(s.mean, digits), _num(s.min, digits), _num(s.max, digits), _num(s.std, digits)]


def noise_floor(groups: Sequence[GroupStats]) -> list[str]:
    """The A/A table (--aa): bare metal against itself in the same repetitions, whose interval must
    contain 0; the run-to-run variation per kind; what these repetitions can detect."""
    rows = [g for g in groups if g.key.arm and g.effect is not None]
    if not rows:
        return []
    lines = [
        "",
        f"## Noise floor: A/A (bare metal twice per repetition), {CONFIDENCE:.0%} intervals",
        "",
        "| model | batch | size | n | A′ vs A % [interval] | contains 0 | run-to-run CV | smallest detectable "
        "at n (95 %, 80 % power) | n for 1 % | n for 2 % | n for 5 % |",
        "|" + "---|" * 11,
    ]
    for g in rows:
        e, k = g.effect, g.key
        assert e is not None and e.sd_log is not None
        same = [o for o in groups if _same_workload(o.key, k)]
        cvs = ", ".join(f"{o.key.layer} {o.cv * 100:.2f} %" for o in same if o.cv is not None)
        need = [repetitions_needed(e.sd_log, pct) for pct in (1.0, 2.0, 5.0)]
        lines.append(
            "| "
            + " | ".join(
                [
                    k.model,
                    str(k.batch_size),
                    str(k.image_size),
                    str(e.n),
                    f"{e.overhead_pct:.2f} [{e.lo_pct:.2f}, {e.hi_pct:.2f}]",
                    "no" if e.excludes_zero else "yes",
                    cvs,
                    f"{mde_pct(e.sd_log, e.n):.2f} %",
                    *[str(x) if x else ">10000" for x in need],
                ]
            )
            + " |"
        )
    lines += [
        "",
        "A′ vs A: paired t on log ratios of two bare-metal runs in each repetition; an interval that "
        "excludes 0 means something besides the layer varies between runs. CV: sample std ÷ mean of images/sec "
        "over repetitions. Smallest detectable and n needed: from the A/A spread of log ratios, paired, "
        "95 % confidence, 80 % power.",
    ]
    return lines


def _same_workload(a: GroupKey, b: GroupKey) -> bool:
    """Whether two groups ran the same model, sizes, scenario, mode, data and device (the noise floor's peers)."""
    return (a.model, a.batch_size, a.image_size, a.scenario, a.mode, a.data, a.device) == (
        b.model,
        b.batch_size,
        b.image_size,
        b.scenario,
        b.mode,
        b.data,
        b.device,
    )


def _fleet(flags: Sequence[FleetFlag], compared: int, slowdown: float = FLEET_MIN_SLOWDOWN) -> list[str]:
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
            "| "
            + " | ".join(
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
            + " |"
        )
    return [*lines, "", f"A host is flagged when {fleet_rule(slowdown)}."]


def _steady(flags: Sequence[SteadyFlag]) -> list[str]:
    if not flags:
        return []
    lines = ["", "## Steady state: runs to look at", ""]
    for r, words in flags:
        lines.append(f"- {r.id} ({r.target_kind}, {r.model}, rep {r.repetition}): {'; '.join(words)}")
    return [
        *lines,
        "",
        "Trend: Theil–Sen slope of the timed steps' images/sec with its interval, 95 % over every run judged "
        "together (Bonferroni: each run's at 1 − 0.05/n for n runs), flagged from a 2 % change over the run; "
        "outlier steps: modified z beyond 3.5. Flags change no number.",
    ]


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
    micro_lines = micro.markdown(a.cases, a.skipped, groups)
    lines = [f"# {title}", *_summary(groups)]
    lines += _groups_table(groups) if groups or not micro_lines else []
    lines += _figures(figs, "throughput", captions)
    lines += _overheads(groups, a.equivalence)
    lines += _figures(figs, "overhead", captions)
    lines += micro_lines
    lines += _figures(figs, "decomposition", captions)
    lines += _environments(groups)
    lines += _environment(groups)
    lines += noise_floor(groups)
    lines += _fleet(a.fleet, a.fleet_compared, a.fleet_slowdown)
    lines += _figures(figs, "fleet", captions)
    lines += _steady(a.steady)
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
    lines += _distributed(a.distributed)
    lines += _figures(figs, "distributed", captions)
    lines += _shared(a.shared)
    lines += _figures(figs, "shared", captions)
    return "\n".join(lines) + "\n"


def _summary(groups: Sequence[GroupStats]) -> list[str]:
    """Each layer's verdict against bare metal, one line each: the answer before the evidence."""
    rows = [g for g in groups if g.key.against_baseline and g.runs]
    if not rows:
        return []
    lines = ["", "Each layer against bare metal (the tables and figures below give the evidence):", ""]
    for g in rows:
        k = g.key
        what = f"{k.layer}, {k.model} b{k.batch_size} {k.image_size} px"
        host = f" on {k.host}" if k.host is not None else ""
        lines.append(f"- **{what}**{host}: {g.verdict or NO_INTERVAL}")
    return lines


def _environments(groups: Sequence[GroupStats]) -> list[str]:
    """What each group ran on: the facts every group shares once, then a row per group for the rest."""
    envs = [(g, g.environment) for g in groups if g.environment]
    if not envs:
        return []
    fields = list(dict.fromkeys(f for _, e in envs for f in e))
    common = [f for f in fields if len({e.get(f, "—") for _, e in envs}) == 1]
    differ = [f for f in fields if f not in common]
    lines = ["", "## Environment of each group", ""]
    lines += [f"- {f}: {envs[0][1].get(f, '—')}" for f in common]
    if differ:
        extra = [f for f in ("scenario", "contention") if len({getattr(g.key, f) for g, _ in envs}) > 1]
        head = ["kind", *extra, "model", "batch", "size", *differ]
        lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for g, e in envs:
            k = g.key
            cells = [
                k.layer,
                *[str(getattr(k, f)) for f in extra],
                k.model,
                str(k.batch_size),
                str(k.image_size),
                *[e.get(f, "—").replace("|", "\\|") for f in differ],
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def math_label(key: GroupKey) -> str:
    """A group's math in a table cell: "mixed_bfloat16 + XLA", "float32"; "—" where no math was recorded."""
    return math_words(key.math or "—", key.xla)


def overhead_cell(g: GroupStats) -> str:
    """A group's overhead in one cell: `baseline` for bare metal, else the one estimate with its 95 %
    interval where there is one (stats.OVERHEAD_ESTIMATE)."""
    if not g.key.against_baseline:
        return "baseline"
    if g.overhead_percent is None:
        return "—"
    e = g.effect
    return f"{g.overhead_percent:.1f}" + (f" [{e.lo_pct:.1f}, {e.hi_pct:.1f}]" if e else "")


def _groups_table(groups: Sequence[GroupStats]) -> list[str]:
    """One row per group: throughput over repetitions and the overhead against bare metal with its interval;
    what every group shares is said once above it; elapsed time (and GPU memory) in a table of its own."""
    show_contention = any(g.key.contention != "none" for g in groups)
    show_host = any(g.key.host is not None for g in groups)
    show_scenario = any(g.key.scenario != "single" for g in groups)
    show_wall = any(g.wall_seconds for g in groups)
    show_memory = any(g.gpu_memory_peak_bytes for g in groups)
    facts = {
        "data": lambda k: k.data,
        "mode": lambda k: k.mode,
        "device": lambda k: k.device,
        "math": math_label,
        "batch": lambda k: str(k.batch_size),
        "size": lambda k: str(k.image_size),
    }
    same = {f: fn(groups[0].key) for f, fn in facts.items() if groups and len({fn(g.key) for g in groups}) == 1}
    varying = [f for f in facts if f not in same]
    head = [
        "kind",
        *(["host"] if show_host else []),
        *(["scenario", "workers"] if show_scenario else []),
        "model",
        *varying,
        *(["contention"] if show_contention else []),
        "runs",
        "img/s mean",
        "sd",
        "min–max",
        f"overhead % [{CONFIDENCE:.0%} interval]",
    ]
    lines = [""]
    if same:
        lines += ["Every row: " + ", ".join(f"{f} {v}" for f, v in same.items()) + ".", ""]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for g in groups:
        k = g.key
        ips = g.images_per_sec
        row = [
            k.layer,
            *([str(k.host)] if show_host else []),
            *([k.scenario, str(k.workers)] if show_scenario else []),
            k.model,
            *[facts[f](k) for f in varying],
            *([k.contention] if show_contention else []),
            f"{g.runs - g.failed}" + (f" (+{g.failed} failed)" if g.failed else ""),
            _num(ips.mean if ips else None, 1),
            _num(ips.std if ips else None, 1),
            f"{ips.min:.1f}–{ips.max:.1f}" if ips else "—",
            overhead_cell(g),
        ]
        lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        "img/s: total timed images ÷ timed seconds per run (warm-up excluded), its arithmetic mean and sample",
        f"sd over repetitions (— below 2 runs); {OVERHEAD_ESTIMATE}; against bare metal (bm) with the same",
        "model, data, mode, device, math, batch and size (— where no bm run matches). math: the arithmetic",
        "asked for (float32 means TF32 off; default: TensorFlow's own, before dltestbed recorded it). Failed",
        "runs are counted but not averaged. Distributed rows are per worker; co-tenants are not rows (see the",
        "shared table).",
    ]
    return lines + _elapsed_table(groups, show_host, show_wall, show_memory)


def _elapsed_table(groups: Sequence[GroupStats], show_host: bool, show_wall: bool, show_memory: bool) -> list[str]:
    """Each group's elapsed time per run (and launch to finish, GPU memory peak)."""
    head = ["kind", *(["host"] if show_host else []), "model", "elapsed s mean", "min", "max", "sd"]
    head += ["from launch s"] if show_wall else []
    head += ["GPU memory peak GiB"] if show_memory else []
    lines = ["", "### Time per run", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for g in groups:
        k = g.key
        row = [k.layer, *([str(k.host)] if show_host else []), k.model, *_spread_cells(g.elapsed_seconds, 2)]
        row += [_num(g.wall_seconds.mean if g.wall_seconds else None, 1)] if show_wall else []
        peak = g.gpu_memory_peak_bytes
        row += [_num(peak.mean / 2**30 if peak else None, 2)] if show_memory else []
        lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        "elapsed: warm-up + timed wall time per run"
        + (
            "; from launch: launch to finish as dltestbed saw it (the elapsed time of the CLOSER'18 study: the "
            "layer's own start-up, TensorFlow's import and the model's build included)"
            if show_wall
            else ""
        )
        + ("; GPU memory peak: the most TensorFlow's allocator held at once on the run's GPUs" if show_memory else "")
        + ".",
    ]
    return lines


def _overheads(groups: Sequence[GroupStats], equivalence: float | None) -> list[str]:
    """Each layer's overhead against bare metal with its interval, method and verdict (and TOST)."""
    show_host = any(g.key.host is not None for g in groups)
    lines: list[str] = []
    effects = [g for g in groups if g.effect is not None or (g.key.target_kind != "bm" and g.runs)]
    if effects:
        equiv = any(g.equivalence for g in effects)
        lines += [
            "",
            f"## Overhead against bare metal, {CONFIDENCE:.0%} intervals",
            "",
            "| kind | " + ("host | " if show_host else "") + "model | batch | size | runs | method | "
            "overhead % [interval] | verdict |" + (f" within ±{equivalence:g} % (TOST) |" if equiv else ""),
            "|" + "---|" * (8 + show_host + equiv),
        ]
        for g in effects:
            k, e = g.key, g.effect
            kind = k.layer
            cell = overhead_cell(g)  # the main table's number, not another estimate
            lines.append(
                "| "
                + " | ".join(
                    [
                        kind,
                        *([str(k.host)] if show_host else []),
                        k.model,
                        str(k.batch_size),
                        str(k.image_size),
                        str(e.n if e else g.runs - g.failed),
                        e.method if e else "—",
                        cell,
                        g.verdict or NO_INTERVAL,
                        *([g.equivalence or "—"] if equiv else []),
                    ]
                )
                + " |"
            )
        lines += [
            "",
            "paired t on log ratios: repetition i of the layer against repetition i of bare metal in the "
            "same bench (they ran side by side); Welch t on log throughput where runs are not paired. A "
            "difference is called real only when its interval excludes 0; otherwise the row gives the "
            "smallest slowdown these repetitions would detect (80 % power).",
        ]
    if equivalence is not None:
        lines += [
            "",
            f"within ±{equivalence:g} %: two one-sided tests at 5 % — equivalent when the 90 % interval "
            "lies inside the margin, not equivalent when the 95 % interval lies wholly outside it, "
            "undecided otherwise.",
        ]
    return lines


def _environment(groups: Sequence[GroupStats]) -> list[str]:
    lines: list[str] = []
    diffs = [(g, line) for g in groups for line in g.env]
    if diffs:
        lines += ["", "## Environment differences against bare metal", ""]
        lines += [f"- {g.key.layer}, {g.key.model}: {line}" for g, line in diffs]
    return lines


def _distributed(dist: Sequence[DistributedStats]) -> list[str]:
    lines: list[str] = []
    if dist:
        lines += [
            "",
            "## Distributed: total throughput and scaling efficiency",
            "",
            "| kind | model | batch/worker | size | workers | jobs | total img/s mean | total img/s std | "
            "per worker img/s | 1 worker alone img/s | efficiency % mean | efficiency % min | "
            "efficiency % max |",
            "|" + "---|" * 13,
        ]
        for d in dist:
            k = d.key
            jobs = f"{d.jobs}" + (f" (+{d.failed_jobs} failed)" if d.failed_jobs else "")
            t, e = d.total_images_per_sec, d.efficiency_percent
            lines.append(
                "| "
                + " | ".join(
                    [
                        k.target_kind,
                        k.model,
                        str(k.batch_size),
                        str(k.image_size),
                        str(d.workers),
                        jobs,
                        _num(t.mean if t else None),
                        _num(t.std if t else None),
                        _num(d.worker_images_per_sec.mean if d.worker_images_per_sec else None),
                        _num(d.single_images_per_sec.mean if d.single_images_per_sec else None),
                        _num(e.mean if e else None),
                        _num(e.min if e else None),
                        _num(e.max if e else None),
                    ]
                )
                + " |"
            )
        lines += [
            "",
            "total: the sum of the workers' own measured images/sec in one job (not one worker × N);",
            "efficiency: total ÷ (workers × one worker of the same kind alone, run just before the job).",
        ]
    return lines


def _shared(shared: Sequence[SharedStats]) -> list[str]:
    lines: list[str] = []
    if shared:
        lines += [
            "",
            "## Shared: the foreground alone and with a co-tenant",
            "",
            "| kind | model | batch | size | co-tenant | pairs | alone img/s | with co-tenant img/s | "
            "drop % mean | drop % min | drop % max | co-tenant img/s |",
            "|" + "---|" * 12,
        ]
        for sh in shared:
            k = sh.key
            pairs = f"{sh.pairs}" + (f" (+{sh.failed_pairs} failed)" if sh.failed_pairs else "")
            dr = sh.drop_percent
            lines.append(
                "| "
                + " | ".join(
                    [
                        k.target_kind,
                        k.model,
                        str(k.batch_size),
                        str(k.image_size),
                        sh.contention,
                        pairs,
                        _num(sh.alone_images_per_sec.mean if sh.alone_images_per_sec else None),
                        _num(sh.shared_images_per_sec.mean if sh.shared_images_per_sec else None),
                        _num(dr.mean if dr else None),
                        _num(dr.min if dr else None),
                        _num(dr.max if dr else None),
                        _num(sh.cotenant_images_per_sec.mean if sh.cotenant_images_per_sec else None),
                    ]
                )
                + " |"
            )
        lines += ["", "drop: images/sec the foreground lost to the co-tenant, per pair of runs in the same repetition."]
    return lines


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
            "| "
            + " | ".join(
                [
                    k.layer,
                    k.model,
                    str(k.batch_size),
                    str(k.image_size),
                    str(sa.n if sa else 0),
                    _num(sa.mean if sa else None),
                    str(sb.n if sb else 0),
                    _num(sb.mean if sb else None),
                    f"{e.overhead_pct:.1f} [{e.lo_pct:.1f}, {e.hi_pct:.1f}]" if e else "—",
                    c.verdict,
                ]
            )
            + " |"
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
    """{"scope", "groups", "distributed", "shared", "fleet", "fleet_rule", "steady", "warmup", "micro",
    "health", "accuracy", "agreement", "checks"} as JSON."""
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
