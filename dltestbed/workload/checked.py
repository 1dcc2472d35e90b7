"""Results checked, not only timed: a probe's product computed again with fresh inputs and held against the
same product in float64 on the same device (and, in a screen, against itself), an all-reduce's sums against
their exact value. Each framework computes its own (frameworks/*/checks.py); what a check is and its verdicts
are here, and the judging (the bound, the verdict) is workload/numerics.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dltestbed.workload import numerics

CHECK_N = {"small": 256, "full": 2048}  # a gemm check's size: its float64 reference is n^3 multiply-adds more


@dataclass(frozen=True)
class Checked:
    """A case's result checked once: against float64 (reference) or against itself (repeat), on a GPU (its
    index) or the CPU (None)."""

    kind: str  # reference | repeat
    gpu: int | None
    verdict: numerics.Verdict
    name: str = ""  # what was checked, where it is not the case's own shape ("float32 n=256")


@dataclass(frozen=True)
class Computed:
    """One checked computation of a framework: `compute()` makes its result on the device; `exact` holds (the
    result in float64, the magnitudes |A|·|B|) as the framework's tensors; `host` brings a tensor to the host as
    a float64 array (the framework's own way)."""

    gpu: int | None
    compute: Callable[[], Any]
    exact: tuple[Any, Any]
    host: Callable[[Any], Any]


def verdicts(c: Computed, tol: float, repeat: bool, name: str = "") -> list[Checked]:
    """The checks of one computation, whatever the framework: its result against float64 within `tol` (and
    against a second run of it, bit for bit, with `repeat`)."""
    got = c.host(c.compute())
    expected, magnitude = (c.host(x) for x in c.exact)
    out = [Checked("reference", c.gpu, numerics.judge(got, expected, magnitude, tol), name)]
    if repeat:
        out.append(Checked("repeat", c.gpu, numerics.judge(c.host(c.compute()), got, magnitude, 0.0), name))
    return out
