"""The report as Markdown (the HPEC'19-style table) or JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence

from dltestbed.report.stats import GroupStats, Spread


def _num(v: float | None, digits: int = 1) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def _spread_cells(s: Spread | None, digits: int) -> list[str]:
    if s is None:
        return ["—"] * 4
    return [_num(s.mean, digits), _num(s.min, digits), _num(s.max, digits), _num(s.std, digits)]


def markdown(groups: Sequence[GroupStats], title: str = "dltestbed report") -> str:
    """A Markdown table: one row per group, overhead against bare metal in the last column."""
    show_contention = any(g.key["contention"] != "none" for g in groups)
    show_host = any("host" in g.key for g in groups)
    head = ["kind", *(["host"] if show_host else []), "model", "data", "mode", "device", "batch", "size"]
    head += ["contention"] if show_contention else []
    head += ["runs", "img/s mean", "img/s min", "img/s max", "img/s std",
             "elapsed s mean", "elapsed s min", "elapsed s max", "elapsed s std", "overhead %"]  # fmt: skip
    lines = [f"# {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for g in groups:
        k = g.key
        row = [k["target_kind"], *([str(k["host"])] if show_host else []), k["model"], k["data"], k["mode"],
               k["device"], str(k["batch_size"]), str(k["image_size"])]  # fmt: skip
        row += [k["contention"]] if show_contention else []
        runs = f"{g.runs - g.failed}" + (f" (+{g.failed} failed)" if g.failed else "")
        row += [runs, *_spread_cells(g.images_per_sec, 1), *_spread_cells(g.elapsed_seconds, 2)]
        row.append(_num(g.overhead_percent, 1))
        lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        "img/s: total timed images ÷ timed seconds per run (warm-up excluded); elapsed: warm-up + timed",
        "wall time per run; std: sample standard deviation over repetitions (— below 2 runs);",
        "overhead %: images/sec lost against bare metal (bm) with the same model, data, mode, device,",
        "batch and size (— where no bm run matches). Failed runs are counted but not averaged.",
    ]
    return "\n".join(lines) + "\n"


def as_json(groups: Sequence[GroupStats]) -> str:
    """The groups as a JSON array."""
    return json.dumps([g.to_dict() for g in groups], indent=2)
