"""The report's tables of groups: the summary, the environments, each group's throughput, elapsed time and
overhead against bare metal (the noise floor of the A/A arm: render/noise.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from dltestbed.report.environment import math_words
from dltestbed.report.inference import CONFIDENCE
from dltestbed.report.keys import GroupKey
from dltestbed.report.mdtable import row as md_row
from dltestbed.report.stats import NO_INTERVAL, OVERHEAD_ESTIMATE, GroupStats, Spread


def num(v: float | None, digits: int = 1) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def spread_cells(s: Spread | None, digits: int) -> list[str]:
    if s is None:
        return ["—"] * 4
    return [num(s.mean, digits), num(s.min, digits), num(s.max, digits), num(s.std, digits)]


def summary(groups: Sequence[GroupStats]) -> list[str]:
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


def environments(groups: Sequence[GroupStats]) -> list[str]:
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
        extra = [f for f in ("scenario", "contention", "framework") if len({getattr(g.key, f) for g, _ in envs}) > 1]
        head = ["kind", *extra, "model", "batch", "size", *differ]
        lines += ["", md_row(head), "|" + "---|" * len(head)]
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
            lines.append(md_row(cells))
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


FACTS: dict[str, Callable[[GroupKey], str]] = {  # what a group's row may say of its workload, in this order
    "framework": lambda k: k.framework,
    "data": lambda k: k.data,
    "mode": lambda k: k.mode,
    "device": lambda k: k.device,
    "math": math_label,
    "batch": lambda k: str(k.batch_size),
    "size": lambda k: str(k.image_size),
}
SAID_WHEN_SHARED = tuple(f for f in FACTS if f != "framework")  # one framework: not said above every table


def _group_row(g: GroupStats, columns: Mapping[str, bool], varying: Sequence[str]) -> str:
    """A group's row of groups_table."""
    k, ips = g.key, g.images_per_sec
    row = [
        k.layer,
        *([str(k.host)] if columns["host"] else []),
        *([k.scenario, str(k.workers)] if columns["scenario"] else []),
        k.model,
        *[FACTS[f](k) for f in varying],
        *([k.contention] if columns["contention"] else []),
        f"{g.runs - g.failed}" + (f" (+{g.failed} failed)" if g.failed else ""),
        num(ips.mean if ips else None, 1),
        num(ips.std if ips else None, 1),
        f"{ips.min:.1f}–{ips.max:.1f}" if ips else "—",
        overhead_cell(g),
        *([reference_cell(g)] if columns["reference"] else []),
    ]
    return md_row(row)


def reference_cell(g: GroupStats) -> str:
    """A group against its reference loop: "1.015 [1.002, 1.027] (torchvision 0.26.0)"; "—" where none ran."""
    a = g.reference
    if a is None:
        return "—"
    interval = f" [{a.lo:.3f}, {a.hi:.3f}]" if a.lo is not None and a.hi is not None else ""
    return f"{a.ratio:.3f}{interval} ({a.who})"


def groups_table(groups: Sequence[GroupStats]) -> list[str]:
    """One row per group: throughput over repetitions and the overhead against bare metal with its interval;
    what every group shares is said once above it; elapsed time (and GPU memory) in a table of its own."""
    columns = {
        "contention": any(g.key.contention != "none" for g in groups),
        "host": any(g.key.host is not None for g in groups),
        "scenario": any(g.key.scenario != "single" for g in groups),
        "reference": any(g.reference for g in groups),
    }
    shared = {f: fn(groups[0].key) for f, fn in FACTS.items() if groups and len({fn(g.key) for g in groups}) == 1}
    varying = [f for f in FACTS if f not in shared]
    head = [
        "kind",
        *(["host"] if columns["host"] else []),
        *(["scenario", "workers"] if columns["scenario"] else []),
        "model",
        *varying,
        *(["contention"] if columns["contention"] else []),
        "runs",
        "img/s mean",
        "sd",
        "min–max",
        f"overhead % [{CONFIDENCE:.0%} interval]",
        *([f"against reference [{CONFIDENCE:.0%} interval]"] if columns["reference"] else []),
    ]
    said = {f: v for f, v in shared.items() if f in SAID_WHEN_SHARED}
    lines = [""]
    if said:
        lines += ["Every row: " + ", ".join(f"{f} {v}" for f, v in said.items()) + ".", ""]
    lines += [md_row(head), "|" + "---|" * len(head)]
    lines += [_group_row(g, columns, varying) for g in groups]
    lines += [
        "",
        "img/s: total timed images ÷ timed seconds per run (warm-up excluded), its arithmetic mean and sample",
        f"sd over repetitions (— below 2 runs); {OVERHEAD_ESTIMATE}; against bare metal (bm) with the same",
        "framework, model, data, mode, device, math, batch and size (— where no bm run matches). math: the",
        "arithmetic the run used (mixed as it resolved on the target; float32 means TF32 off; default: TensorFlow's",
        "own, before dltestbed recorded it). Failed runs are counted but not averaged. Distributed rows are per",
        "worker; co-tenants are not rows (see the shared table).",
    ]
    if columns["reference"]:
        lines += [
            "against reference: the group's img/s ÷ a loop written outside dltestbed (bench/harness_fidelity.py), run",
            "in the same bench and repetition: the pairs' geometric mean, its interval by paired t on log ratios (one",
            "pair: its ratio alone); whose model in brackets; the two models' FLOPs may differ.",
        ]
    show_wall = any(g.wall_seconds for g in groups)
    show_memory = any(g.gpu_memory_peak_bytes for g in groups)
    return lines + elapsed_table(groups, columns["host"], show_wall, show_memory)


def compiled_cell(counts: Mapping[str, int]) -> str:
    """A group's compiled runs by where their graphs came from: "1 compiled, 2 from the cache" ("—": none)."""
    words = {"miss": "compiled", "hit": "from the cache", "partial": "partly cached"}
    return ", ".join(f"{counts[k]} {w}" for k, w in words.items() if counts.get(k)) or "—"


def frameworks_vary(groups: Sequence[GroupStats]) -> bool:
    """Whether the groups ran with more than one framework: then a table that names a row's model names its
    framework too."""
    return len({g.key.framework for g in groups}) > 1


def elapsed_table(groups: Sequence[GroupStats], show_host: bool, show_wall: bool, show_memory: bool) -> list[str]:
    """Each group's elapsed time per run (and launch to finish, GPU memory peak)."""
    fw = frameworks_vary(groups)
    head = ["kind", *(["host"] if show_host else []), "model", *(["framework"] if fw else [])]
    head += ["elapsed s mean", "min", "max", "sd"]
    head += ["from launch s"] if show_wall else []
    show_compiled = any(g.compile_cache for g in groups)
    head += ["compiled step"] if show_compiled else []
    head += ["GPU memory peak GiB"] if show_memory else []
    lines = ["", "### Time per run", "", md_row(head), "|" + "---|" * len(head)]
    for g in groups:
        k = g.key
        row = [k.layer, *([str(k.host)] if show_host else []), k.model, *([k.framework] if fw else [])]
        row += spread_cells(g.elapsed_seconds, 2)
        row += [num(g.wall_seconds.mean if g.wall_seconds else None, 1)] if show_wall else []
        row += [compiled_cell(g.compile_cache)] if show_compiled else []
        peak = g.gpu_memory_peak_bytes
        row += [num(peak.mean / 2**30 if peak else None, 2)] if show_memory else []
        lines.append(md_row(row))
    lines += [
        "",
        "elapsed: warm-up + timed wall time per run"
        + (
            "; from launch: launch to finish as dltestbed saw it (the elapsed time of the CLOSER'18 study: the "
            "layer's own start-up, the framework's import and the model's build included)"
            if show_wall
            else ""
        )
        + (
            "; compiled step: each compiled run's graphs compiled afresh or read from the bench's compile cache "
            "(shared by the runs of a machine and kind: the first compiles)"
            if show_compiled
            else ""
        )
        + (
            "; GPU memory peak: the most the framework's allocator held at once on the run's GPUs"
            if show_memory
            else ""
        )
        + ".",
    ]
    return lines


def overheads_table(groups: Sequence[GroupStats], equivalence: float | None) -> list[str]:
    """Each layer's overhead against bare metal with its interval, method and verdict (and TOST)."""
    show_host = any(g.key.host is not None for g in groups)
    lines: list[str] = []
    effects = [g for g in groups if g.effect is not None or (g.key.target_kind != "bm" and g.runs)]
    if effects:
        equiv = any(g.equivalence for g in effects)
        fw = frameworks_vary(effects)
        lines += [
            "",
            f"## Overhead against bare metal, {CONFIDENCE:.0%} intervals",
            "",
            "| kind | "
            + ("host | " if show_host else "")
            + "model | "
            + ("framework | " if fw else "")
            + "batch | size | runs | method | overhead % [interval] | verdict |"
            + (f" within ±{equivalence:g} % (TOST) |" if equiv else ""),
            "|" + "---|" * (8 + show_host + fw + equiv),
        ]
        for g in effects:
            k, e = g.key, g.effect
            kind = k.layer
            cell = overhead_cell(g)  # the main table's number, not another estimate
            lines.append(
                md_row(
                    [
                        kind,
                        *([str(k.host)] if show_host else []),
                        k.model,
                        *([k.framework] if fw else []),
                        str(k.batch_size),
                        str(k.image_size),
                        str(e.n if e else g.runs - g.failed),
                        e.method if e else "—",
                        cell,
                        g.verdict or NO_INTERVAL,
                        *([g.equivalence or "—"] if equiv else []),
                    ]
                )
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


def environment_section(groups: Sequence[GroupStats]) -> list[str]:
    lines: list[str] = []
    diffs = [(g, line) for g in groups for line in g.env]
    if diffs:
        lines += ["", "## Environment differences against bare metal", ""]
        lines += [f"- {g.key.layer}, {g.key.model}: {line}" for g, line in diffs]
    return lines
