"""How long the runs that warmed up until steady (--warmup auto) took to settle, per model and layer: the
warm-up steps each run needed, and how many reached the cap (workload/steady.py). Pure."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any

from dltestbed.report.keys import LayerKey
from dltestbed.results.records import RunRecord
from dltestbed.workload import steady
from dltestbed.workload.events import StepEvent


@dataclass(frozen=True)
class WarmupRow:
    """The warm-up steps of one model's runs on one layer, in the runs' order."""

    model: str
    layer: str
    steps: tuple[int, ...]

    @property
    def capped(self) -> int:
        """Runs whose warm-up reached the cap: never steady by the test."""
        return sum(s >= steady.CAP for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        """For --format json."""
        return {"model": self.model, "layer": self.layer, "steps": list(self.steps), "capped": self.capped}


def table(runs: Sequence[RunRecord], steps: Mapping[str, Sequence[StepEvent]]) -> list[WarmupRow]:
    """The ok runs that warmed up until steady, grouped by model and layer."""
    by: dict[tuple[str, str], list[int]] = defaultdict(list)
    for r in runs:
        if r.warmup is None and r.status == "ok" and r.measured:
            layer = LayerKey.of_run(r).layer
            by[r.model, layer].append(sum(s.phase == "warmup" for s in steps.get(r.id, ())))
    return [WarmupRow(model, layer, tuple(n)) for (model, layer), n in by.items()]


def markdown(rows: Sequence[WarmupRow]) -> list[str]:
    """The section: a line per model and layer."""
    if not rows:
        return []
    lines = ["", "## Warm-up until steady", "", "| model | layer | runs | warm-up steps | median | at the cap |"]
    lines.append("|---|---|---|---|---|---|")
    for w in rows:
        shown = ", ".join(map(str, w.steps))
        lines.append(f"| {w.model} | {w.layer} | {len(w.steps)} | {shown} | {median(w.steps):g} | {w.capped} |")
    return [
        *lines,
        "",
        f"A run warms up until its last {steady.WINDOW} steps show no trend (Theil–Sen slope of images/sec: its "
        f"95 % interval contains 0, or the change is under {steady.BAND_PCT:g} %), at most {steady.CAP} steps.",
    ]
