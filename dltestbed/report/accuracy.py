"""Accuracy, as the HPEC'19 Singularity study tabled it: the top-1 accuracy of --accuracy runs (trained on
four fifths of a real dataset, tested on the held-out fifth) per layer, with its spread over repetitions,
and its difference from bare metal with a 95 % interval. Pure.

Method: each repetition trains from its own seed, the same on every target, so a layer's run is paired with
bare metal's run of the same seed on the same machine: a paired t-interval of the differences, in
percentage points. Where the runs do not pair up (a seed or machine missing), Welch's t-interval of the
difference of the means. Below 2 runs a side: the difference alone, no interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import mean, stdev
from typing import Any

from dltestbed.kinds import BASELINE
from dltestbed.report import inference
from dltestbed.report.keys import LayerKey
from dltestbed.report.mdtable import row as md_row
from dltestbed.results.records import RunRecord

PAIRED, WELCH = "paired t on the differences (same seed, same machine)", "Welch t on the difference of means"


@dataclass(frozen=True)
class Difference:
    """A layer's accuracy minus bare metal's, in percentage points, with its interval (None: too few runs)."""

    points: float
    lo: float | None
    hi: float | None
    method: str
    n: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return self.__dict__.copy()


def difference(base: Sequence[float], layer: Sequence[float], pairs: Sequence[tuple[float, float]]) -> Difference:
    """The layer's mean minus the baseline's (in the values' unit), paired where every layer value has its
    pair (`pairs`: (baseline, layer)), else Welch. Pure."""
    if pairs and len(pairs) == len(layer):
        d = [x - b for b, x in pairs]
        ends = inference.mean_interval(d)
        return Difference(mean(d), ends[0] if ends else None, ends[1] if ends else None, PAIRED, len(d))
    n = min(len(base), len(layer))
    if n < inference.MIN_N:
        return Difference(mean(layer) - mean(base), None, None, WELCH, n)
    m, se, df = inference.welch_terms(base, layer)
    lo, hi = inference.t_interval(m, se, df)
    return Difference(m, lo, hi, WELCH, n)


@dataclass(frozen=True)
class AccuracyRow:
    """One model (and its data and settings) on one layer: its runs' top-1 accuracy in %."""

    model: str
    layer: str
    images: int  # held-out images per run
    runs: tuple[RunRecord, ...]
    against: Difference | None  # the difference from bare metal's runs of the same work (None: bare metal)

    @property
    def values(self) -> list[float]:
        """Each run's top-1 accuracy in %."""
        return [100 * r.top1 for r in self.runs if r.top1 is not None]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        v = self.values
        return {
            "model": self.model,
            "layer": self.layer,
            "held_out_images": self.images,
            "runs": [r.id for r in self.runs],
            "top1_percent": v,
            "mean_percent": mean(v),
            "sd_points": stdev(v) if len(v) > 1 else None,
            "vs_baseline": self.against.to_dict() if self.against else None,
        }


def _work(r: RunRecord) -> tuple[Any, ...]:
    """What must be the same for two runs' accuracies to be compared: all but the seed and the layer."""
    return (r.model, r.fingerprint.get("dataset_digest"), r.batch_size, r.image_size, r.warmup, r.steps, r.math, r.xla)


def _layer(r: RunRecord) -> str:
    return LayerKey.of_run(r).layer


def table(runs: Sequence[RunRecord]) -> list[AccuracyRow]:
    """A row per work and layer of the runs that measured accuracy, bare metal first within each work."""
    groups: dict[tuple[Any, ...], dict[str, list[RunRecord]]] = {}
    for r in runs:
        if r.top1 is not None and r.measured:
            groups.setdefault(_work(r), {}).setdefault(_layer(r), []).append(r)
    out = []
    for layers in groups.values():
        base = layers.get(BASELINE, [])
        by_seed = {(b.spec.get("seed"), b.unit): 100 * (b.top1 or 0) for b in base}
        for layer in sorted(layers, key=lambda name: name != BASELINE):
            mine = layers[layer]
            against = None
            if layer != BASELINE and base:
                pairs = [
                    (by_seed[k], 100 * (r.top1 or 0)) for r in mine if (k := (r.spec.get("seed"), r.unit)) in by_seed
                ]
                against = difference(list(by_seed.values()), [100 * (r.top1 or 0) for r in mine], pairs)
            images = mine[0].eval_images or 0
            out.append(AccuracyRow(mine[0].model, layer, images, tuple(mine), against))
    return out


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v:.1f}"


def markdown(rows: Sequence[AccuracyRow]) -> list[str]:
    """The section's lines (none without an --accuracy run)."""
    if not rows:
        return []
    lines = [
        "",
        "## Accuracy (trained, then tested on held-out images)",
        "",
        "Top-1 accuracy of each run on the held-out fifth of the dataset after its training; each repetition "
        f"trains from its own seed, the same on every layer. Against bare metal: {PAIRED}, or {WELCH} where "
        "runs do not pair up; 95 % interval, in percentage points.",
        "",
        "| model | layer | held-out images | runs | top-1 % (mean) | sd (points) | range % | vs bare metal (points) "
        "[95 % interval] | method |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        v = row.values
        sd = _pct(stdev(v)) if len(v) > 1 else "—"
        d = row.against
        vs = (
            "baseline"
            if d is None
            else f"{d.points:+.1f}" + (f" [{d.lo:+.1f}, {d.hi:+.1f}]" if d.lo is not None and d.hi is not None else "")
        )
        method = "" if d is None else (d.method.split(" ")[0] + (f", n = {d.n}" if d.n else ""))
        cells = [
            row.model,
            row.layer,
            str(row.images),
            str(len(v)),
            _pct(mean(v)),
            sd,
            f"{min(v):.1f}–{max(v):.1f}",
            vs,
            method,
        ]
        lines.append(md_row(cells))
    return lines
