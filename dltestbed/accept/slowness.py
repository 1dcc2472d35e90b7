"""When a node is slow, in numbers: slower than its peers in a measure of the first pass (a suspect, by the peer
rule judge.py states), below the median of the known-good controls measured beside it, or falling from burn-in's
first round to its last. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import median

from dltestbed.report import ROBUST_Z
from dltestbed.report.gpu_evidence import Reason
from dltestbed.report.inference import PeerScore, slow_outliers
from dltestbed.report.verdicts import FAIL, UNDECIDED

PEERS_MIN = 3  # nodes needed to judge one against the others
CONTROLS_MIN = 2  # known-good nodes beside a suspect in the second pass, to judge it against their median
BURN_IN_ACTION = "drain the node; look at its cooling, power and clocks over time (a board that slows as it heats)"


@dataclass(frozen=True)
class Suspect:
    """A node slower than its peers in one measure of the first pass."""

    node: str
    measure: str
    value: float
    score: PeerScore
    peers: int


def suspects(measures: Mapping[str, Mapping[str, float]], slowdown: float) -> list[Suspect]:
    """Every node slower than its peers in a measure (needs PEERS_MIN nodes), measure by measure."""
    out = []
    for name, values in measures.items():
        if len(values) >= PEERS_MIN:
            for node, sc in slow_outliers(values, ROBUST_Z, slowdown).items():
                out.append(Suspect(node, name, values[node], sc, len(values) - 1))
    return out


def against_controls(value: float, controls: Mapping[str, float]) -> tuple[float, float]:
    """A rerun against its controls' values: their median and how far below it the rerun is, in % (negative:
    above it)."""
    mid = median(controls.values())
    return mid, (1 - value / mid) * 100


def slow_beside(
    measured: Mapping[str, Mapping[str, float]], nodes: Sequence[str], controls: Sequence[str], slowdown: float
) -> list[str]:
    """The nodes (of `nodes`) slow in any measure against the median of the controls measured beside them
    (measure → node → value): `slowdown` % or more below it, with CONTROLS_MIN controls or more."""
    slow = []
    for node in nodes:
        for values in measured.values():
            beside = {c: values[c] for c in controls if c in values}
            if node in values and len(beside) >= CONTROLS_MIN and against_controls(values[node], beside)[1] >= slowdown:
                slow.append(node)
                break
    return slow


def trends(rounds: Sequence[Mapping[tuple[str, str, str], float]], slowdown: float) -> dict[str, list[Reason]]:
    """Burn-in's rounds, each (node, unit, measure) → value: a unit (a node, or one of its GPUs) whose value fell
    by `slowdown` % or more from the first round to the last fails its node. Fewer than 2 rounds: nothing."""
    out: dict[str, list[Reason]] = {}
    if len(rounds) < 2:
        return out
    first, last = rounds[0], rounds[-1]
    for (node, unit, measure), v in first.items():
        w = last.get((node, unit, measure))
        if w is None:
            why = f"{unit} {measure}: no result in the last of {len(rounds)} burn-in rounds"
            out.setdefault(node, []).append(Reason("burn-in", UNDECIDED, why))
            continue
        if v <= 0 or (1 - w / v) * 100 < slowdown:
            continue
        fell = (1 - w / v) * 100
        why = f"{unit} {measure} fell {fell:.0f} % from the first of {len(rounds)} burn-in rounds to the last"
        out.setdefault(node, []).append(Reason("burn-in", FAIL, why, BURN_IN_ACTION, f"{v:.4g} → {w:.4g}"))
    return out
