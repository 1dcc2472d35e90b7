"""Framework against framework (NYSDS'17's question: which framework uses the hardware better): for each layer,
model, math mode and size that ran with two frameworks, each one's images/sec and launch-to-finish time, and
the other against the first (in the frameworks' registered order) with its interval and verdict: paired t on log
ratios where the runs are repetitions of one bench (interleaved, so they ran side by side), Welch otherwise,
as a layer against bare metal (report/stats.py). Pure."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from dltestbed.report.inference import Effect, estimate_cell, verdict
from dltestbed.report.keys import GroupKey
from dltestbed.report.mdtable import head as md_head
from dltestbed.report.mdtable import row as md_row
from dltestbed.report.stats import effect, spread
from dltestbed.results.records import RunRecord
from dltestbed.workload.frameworks import REGISTRY


@dataclass(frozen=True)
class Versus:
    """A framework (`other`) against the first (`first`) on the same layer and workload."""

    key: GroupKey  # the workload and layer, its framework the first's
    first: str
    other: str
    first_ips: float  # geometric mean of the ok runs' images/sec
    other_ips: float
    first_launch: float | None  # mean launch-to-finish seconds (start-up differs a lot between frameworks)
    other_launch: float | None
    runs: int  # the other's ok runs compared
    effect: Effect | None  # "overhead" of the other against the first: positive, the other is slower
    verdict: str  # the effect in words, or why there is none

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        out = dataclasses.asdict(self)
        out["key"] = self.key.to_dict()
        return out


def compare(runs: Iterable[RunRecord]) -> list[Versus]:
    """Every framework against the first that ran the same workload on the same layer (co-tenants and probes
    aside; failed runs are not compared)."""
    groups: dict[GroupKey, dict[str, list[RunRecord]]] = {}
    for r in runs:
        if not r.measured or r.is_probe or r.status != "ok" or r.images_per_sec is None:
            continue
        key = dataclasses.replace(GroupKey.of(r), framework="")
        groups.setdefault(key, {}).setdefault(r.framework, []).append(r)
    out = []
    for key, by_fw in groups.items():
        order = list(REGISTRY)  # choices.FRAMEWORKS' order
        names = sorted(by_fw, key=lambda f: order.index(f) if f in order else len(order))
        first = names[0]
        for other in names[1:]:
            a, b = by_fw[first], by_fw[other]
            unlike = _unlike(a, b, first, other)
            eff = effect(a, b) if unlike is None else None
            words = unlike or (verdict(eff) if eff is not None else "no interval: fewer than 2 runs a side")
            out.append(
                Versus(
                    dataclasses.replace(key, framework=first),
                    first,
                    other,
                    statistics.geometric_mean([r.images_per_sec or 0.0 for r in a]),
                    statistics.geometric_mean([r.images_per_sec or 0.0 for r in b]),
                    _mean_wall(a),
                    _mean_wall(b),
                    len(b),
                    eff,
                    words,
                )
            )
    return out


def _unlike(a: Sequence[RunRecord], b: Sequence[RunRecord], first: str, other: str) -> str | None:
    """Why two frameworks' runs are not compared: they computed on another device or in another math (asked
    `auto`, a CUDA build runs on the GPU and a CPU build on the CPU); None: like for like."""
    for what, of in (("device", lambda r: r.used_device), ("math", lambda r: r.math)):
        sa, sb = {of(r) for r in a}, {of(r) for r in b}
        if sa != sb:
            return f"not compared: {first} ran {what} {'/'.join(sorted(sa))}, {other} {'/'.join(sorted(sb))}"
    return None


def _mean_wall(runs: Sequence[RunRecord]) -> float | None:
    """The runs' mean launch-to-finish seconds (stats.spread, as the report's time table has it)."""
    s = spread([r.wall_seconds for r in runs])
    return s.mean if s else None


def markdown(found: Iterable[Versus]) -> list[str]:
    """The report's section: a row per layer and workload that ran with two frameworks."""
    rows = list(found)
    if not rows:
        return []
    cells = ["kind", "model", "math", "batch", "size", "first", "img/s", "other", "img/s"]
    cells += ["other against first % [interval]", "verdict", "from launch s (first / other)"]
    lines = ["", "## Framework against framework", "", *md_head(cells)]
    for v in rows:
        k, e = v.key, v.effect
        interval = estimate_cell(e)
        launch = " / ".join(f"{x:.1f}" if x is not None else "—" for x in (v.first_launch, v.other_launch))
        cells = [k.layer, k.model, k.math, str(k.batch_size), str(k.image_size), v.first, f"{v.first_ips:.1f}"]
        cells += [v.other, f"{v.other_ips:.1f}", interval, v.verdict, launch]
        lines.append(md_row(cells))
    return [
        *lines,
        "",
        "other against first: 1 − other ÷ first images/sec (positive: the other framework is slower), as the "
        "geometric mean of the per-repetition ratios (paired t on log ratios: the frameworks' runs interleaved "
        "in one bench) or the ratio of geometric means (Welch t); img/s: geometric mean of the ok runs. The "
        "same models layer for layer in both frameworks (workload/frameworks/pytorch/models.py). from launch: the "
        "launch-to-finish time, the framework's import and the model's build included.",
    ]
