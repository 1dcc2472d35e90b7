"""A model against a loop written outside dltestbed, run in the same bench: bench/harness_fidelity.py stores that
loop's images/sec beside the bench's own run (role REFERENCE, the run's spec and key, `reference` naming whose
model), and each group's efficiency is its images/sec ÷ the reference's, paired by bench and repetition: the pairs'
geometric mean with its paired-t interval on the log ratios (inference.paired). Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from dltestbed.report.inference import MIN_N, paired, ratio_interval
from dltestbed.results.records import RunRecord


@dataclass(frozen=True)
class Against:
    """A group's images/sec against a reference loop's in the same benches."""

    who: str  # whose model the reference loop ran ("torchvision 0.26.0")
    pairs: int
    ratio: float  # the pairs' geometric mean of group ÷ reference
    lo: float | None  # its 95 % interval (None: fewer than MIN_N pairs)
    hi: float | None
    method: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def against(ok: Sequence[RunRecord], references: Sequence[RunRecord]) -> Against | None:
    """The group's ok runs against the reference runs of the same key, paired by bench and repetition; None when no
    reference ran beside one of them."""
    mine = {(r.bench_id, r.repetition): r.images_per_sec for r in ok if r.images_per_sec}
    paired_refs = [r for r in references if r.images_per_sec and mine.get((r.bench_id, r.repetition))]
    if not paired_refs:
        return None
    base = [r.images_per_sec or 0.0 for r in paired_refs]
    over = [mine[(r.bench_id, r.repetition)] or 0.0 for r in paired_refs]
    pairs = list(zip(base, over, strict=True))
    ratio = math.exp(sum(math.log(o / b) for b, o in pairs) / len(pairs))
    lo = hi = method = None
    if len(pairs) >= MIN_N:
        effect = paired(base, over)
        _, lo, hi = ratio_interval(effect)
        method = effect.method
    who = ", ".join(dict.fromkeys(str(r.spec.get("reference") or "a reference loop") for r in paired_refs))
    return Against(who, len(pairs), ratio, lo, hi, method)
