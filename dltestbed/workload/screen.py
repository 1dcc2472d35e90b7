"""--suite screen: the probes' checks, not their timing, for a set time on each GPU (or the CPU), with fresh
random inputs every round — what gpu-burn and the fleet screens for silent data corruption do: a mercurial
core or a flaky GPU computes a wrong element now and then, so many products are checked, each against
float64 (workload/numerics.py's bound) and against itself (the same inputs again, bit for bit)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType

from dltestbed.workload import checked, peaks, probes
from dltestbed.workload.checked import Checked
from dltestbed.workload.events import CheckEvent
from dltestbed.workload.probes import Where

Check = tuple[str, str, Callable[[int], list[Checked]]]  # probe, case, the check of a seed


def _kit(w: Where) -> ModuleType:
    """The framework's checks (frameworks/*/checks.py), which a screen's framework always brings."""
    if w.checks is None:
        raise RuntimeError("a screen ran without its framework's checks (frameworks.base.ProbeFramework.checks)")
    return w.checks


def devices(w: Where) -> list[tuple[str, int | None]]:
    """(the framework's device, the GPU's NVML index, as its health is named) of each device screened: every GPU
    the framework sees, else the CPU (the framework's checks name them)."""
    return list(_kit(w).devices(w))


def checks(w: Where, device: str, gpu: int | None, names: Sequence[str]) -> list[Check]:
    """One round's checks on a device: gemm in every math the device has, each convolution shape (the framework's
    own checks: frameworks/*/checks.py)."""
    out: list[Check] = []
    module, kit = w.framework, _kit(w)
    if "gemm" in names:
        n = checked.CHECK_N[w.scale]
        for math in peaks.MATHS if gpu is not None else ("float32",):
            out.append(("gemm", f"{math} n={n}", kit.gemm_check(module, device, gpu, n, math, repeat=True)))
    if "conv" in names:
        for name, h, wd, cin, cout, k, stride in probes.conv_shapes(w.scale):
            shape = (h, wd, cin, cout, k, stride)
            out.append(("conv", f"{name} at {h}x{wd}", kit.conv_check(module, device, gpu, shape, repeat=True)))
    return out


def add(total: CheckEvent | None, ev: CheckEvent) -> CheckEvent:
    """Two checks of one case summed up: rounds, elements and mismatches added, the worst kept, and the
    first mismatch's place and seed kept. Pure."""
    if total is None:
        return ev
    first = total.where or ev.where
    return dataclasses.replace(
        total,
        rounds=total.rounds + ev.rounds,
        elements=total.elements + ev.elements,
        mismatches=total.mismatches + ev.mismatches,
        worst=max(total.worst, ev.worst),
        where=first,
        t=ev.t,
    )


def run(
    w: Where,
    names: Sequence[str],
    seconds: float,
    seed: int,
    event: Callable[[str, str, Checked, int], CheckEvent],
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[CheckEvent]:
    """Device after device: whole rounds of checks until `seconds` have passed on the device (at least one),
    round r with fresh inputs from seed + r; then each case's checks of the device summed up (`add`: a
    store keeps a row per case and kind, not per product)."""
    for device, gpu in devices(w):
        planned = checks(w, device, gpu, names)
        totals: dict[tuple[str, str, str], CheckEvent] = {}
        deadline = clock() + seconds
        r = 0
        while r == 0 or clock() < deadline:
            for probe, case, check in planned:
                for one in check(seed + r):
                    ev = event(probe, case, one, seed + r)
                    if ev.where:
                        ev = dataclasses.replace(ev, where=f"seed {seed + r}: {ev.where}")
                    key = (probe, case, one.kind)
                    totals[key] = add(totals.get(key), ev)
            r += 1
        yield from totals.values()
