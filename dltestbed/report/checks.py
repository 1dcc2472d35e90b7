"""Results checked, not only timed: the probes' products against float64 and against themselves, a row per
host, layer, GPU and probe, and every mismatch named with its GPU. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dltestbed.report.keys import with_framework
from dltestbed.results.records import RunRecord
from dltestbed.workload.events import CheckEvent


@dataclass(frozen=True)
class Mismatch:
    """A check that failed: which run, host, layer and GPU, and what was wrong."""

    run_id: str
    host: str
    layer: str
    gpu: int | None
    check: CheckEvent

    @property
    def device(self) -> str:
        """The GPU by its index, or the CPU."""
        return "the CPU" if self.gpu is None else f"GPU {self.gpu}"

    def describe(self) -> str:
        """One line: where, which case, how many elements and the worst."""
        c = self.check
        what = "differs from its own repeat" if c.kind == "repeat" else "is beyond the bound against float64"
        rounds = f" over {c.rounds} rounds of fresh inputs" if c.rounds > 1 else f" (seed {c.seed})"
        return (
            f"{self.host} {self.layer} {self.device}: {c.probe} {c.case} {what}: {c.mismatches} of {c.elements} "
            f"element(s){rounds}, worst error {c.worst:.3g} × |A|·|B| (allowed {c.tolerance:.3g}); {c.where}"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        c = self.check
        return {
            "run_id": self.run_id,
            "host": self.host,
            "layer": self.layer,
            "gpu": self.gpu,
            "probe": c.probe,
            "case": c.case,
            "kind": c.kind,
            "mismatches": c.mismatches,
            "elements": c.elements,
            "worst": c.worst if c.worst != float("inf") else None,
            "tolerance": c.tolerance,
            "seed": c.seed,
            "where": c.where,
        }


@dataclass(frozen=True)
class CheckRow:
    """A host, layer, GPU and probe: how many products were checked (a screen's rounds counted), how many
    elements were beyond their tolerance, the worst error against its tolerance."""

    host: str
    layer: str
    gpu: int | None
    probe: str
    framework: str  # whose product (each framework's gemm and conv are its own)
    checks: int  # products checked
    failed: int  # elements beyond the tolerance, over them all
    worst_share: float  # the largest worst error ÷ tolerance among its reference checks (≤ 1: all within)
    kinds: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        share = self.worst_share if self.worst_share != float("inf") else None
        return {**self.__dict__, "worst_share": share, "kinds": list(self.kinds)}


def _share(c: CheckEvent) -> float:
    if c.tolerance > 0:
        return c.worst / c.tolerance
    return 0.0 if c.worst == 0 else float("inf")


def summarise(
    runs: Sequence[RunRecord], checks: Mapping[str, Sequence[CheckEvent]]
) -> tuple[list[CheckRow], list[Mismatch]]:
    """The rows (in the runs' order) and the mismatches (in the order they were made)."""
    rows: dict[tuple[str, str, int | None, str, str], list[CheckEvent]] = {}
    bad: list[Mismatch] = []
    for r in runs:
        host = r.machine or r.host
        for c in checks.get(r.id, ()):
            rows.setdefault((host, r.target_kind, c.gpu, c.probe, r.framework), []).append(c)
            if not c.ok:
                bad.append(Mismatch(r.id, r.host, r.target_kind, c.gpu, c))
    out = [
        CheckRow(
            host,
            layer,
            gpu,
            probe,
            framework,
            sum(c.rounds for c in items),
            sum(c.mismatches for c in items),
            max(_share(c) for c in items),
            tuple(dict.fromkeys(c.kind for c in items)),
        )
        for (host, layer, gpu, probe, framework), items in rows.items()
    ]
    return out, sorted(bad, key=lambda m: m.check.t)


def markdown(rows: Sequence[CheckRow], bad: Sequence[Mismatch]) -> list[str]:
    """The section's lines; none when no probe checked its result."""
    if not rows:
        return []
    lines = [
        "",
        "## Results checked",
        "",
        "Each gemm and conv case's product against the same product in float64 on the same device, element by "
        "element, within the bound every correct implementation meets (Higham's γ_k for the math's roundings; "
        "see `workload/numerics.py`); with --suite screen also against itself (the same inputs again: bit for "
        "bit); each all-reduce's sums exactly. Worst: the largest error as a share of its tolerance.",
        "",
        "| host | layer | GPU | probe | products checked | elements wrong | worst | kinds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        failed = f"**{r.failed}**" if r.failed else "0"
        gpu = "CPU" if r.gpu is None else str(r.gpu)
        worst = "∞" if r.worst_share == float("inf") else f"{r.worst_share:.2g}"
        lines.append(
            f"| {r.host} | {r.layer} | {gpu} | {with_framework(r.probe, r.framework)} | {r.checks} | {failed} | "
            f"{worst} | {', '.join(r.kinds)} |"
        )
    if bad:
        lines += ["", *[f"- **error** {m.describe()}" for m in bad]]
    return lines
