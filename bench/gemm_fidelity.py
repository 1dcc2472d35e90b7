"""GEMM fidelity: what dltestbed's PyTorch GEMM probe reads ÷ a bare loop of the same length and data, per math,
measured in one run; beside it, the probe's revision 1 (a chain x <- x @ b ended by a read of x on the host) and a
bare burst (10 products after 3, the figure the H200's 0.83 was measured against), each with the GPU's SM clock,
power and share of samples at its power cap while it ran (NVML, every 50 ms, in a thread), so the cause of a gap
is seen, not guessed.

Every arm runs the probe's own calibrated products a call (a call lasts at least CALL_SECONDS: 0.2 s at full
scale), on the probe's own inputs (the same seed), after the same ramp of untimed calls the calibration makes:
- probe: the probe's case timed as the workload times it (probes.timed: calibration, warm-up, timed calls);
- bare: `torch.matmul(a, b)` that many times, then a synchronize, as a user writes it (a fresh output each
  product, where the probe writes into one): the same length, the same data;
- chain: revision 1 of the probe, the same length;
- burst: 3 products, then 10 timed (milliseconds of work: the GPU never reaches its power cap).
Arms are interleaved in rounds (probe and bare swap places each round), and each arm's figure is the median of its timed
calls; ratios are per round, then their median and range. Goal: probe ÷ bare ≥ 0.97 for bfloat16, float16 and TF32
on a GPU; ≥ 0.95 on a CPU (float32 at the small scale's n).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from dltestbed.workload.frameworks.pytorch import probes as torchprobes
from dltestbed.workload.frameworks.pytorch.checks import set_math
from dltestbed.workload.gpu import Nvml
from dltestbed.workload.probes import base

POWER_CAP = 0x4  # nvmlClocksEventReasonSwPowerCap (report/health.REASONS)


class Sampler:
    """NVML's SM clock, power and power-cap bit of GPU 0, every `interval` s while `sampling()` is open."""

    def __init__(self, interval: float = 0.05) -> None:
        self.nvml = Nvml.open()
        self.interval = interval

    @contextmanager
    def sampling(self) -> Iterator[list[dict[str, Any]]]:
        got: list[dict[str, Any]] = []
        stop = threading.Event()

        def run() -> None:
            while not stop.wait(self.interval):
                if self.nvml is not None:
                    got.extend(self.nvml.sample()[:1])

        t = threading.Thread(target=run, daemon=True)
        t.start()
        try:
            yield got
        finally:
            stop.set()
            t.join()


def conditions(samples: list[dict[str, Any]]) -> str:
    """The samples' mean SM clock and power and the share at the power cap, in words ("" without NVML)."""
    if not samples:
        return ""
    clocks = [s["sm_clock_mhz"] for s in samples if s.get("sm_clock_mhz") is not None]
    power = [s["power_watts"] for s in samples if s.get("power_watts") is not None]
    capped = sum(bool(int(s.get("clock_reasons", 0)) & POWER_CAP) for s in samples) / len(samples)
    said = [f"SM {statistics.mean(clocks):.0f} MHz"] if clocks else []
    said += [f"{statistics.mean(power):.0f} W"] if power else []
    return ", ".join([*said, f"power cap in {capped:.0%} of {len(samples)} samples"])


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def ramp(call: Callable[[int], None], reps: int) -> None:
    """The untimed calls the probe's calibration makes before its warm-up: 1, then doubling up to `reps`."""
    call(1)
    n = 1
    while n < reps:
        call(n)
        n *= 2


def timed_calls(call: Callable[[int], None], reps: int, warmup: int, steps: int, work: float) -> list[float]:
    """FLOP/s of each timed call of `reps` products, after the ramp and the warm-up."""
    ramp(call, reps)
    out = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        call(reps)
        dt = time.perf_counter() - t0
        if i >= warmup:
            out.append(work * reps / dt)
    return out


def arms(case: base.Case, w: base.Where, n: int, math: str, reps: int, device: str) -> dict[str, Callable[[int], None]]:
    """The bare loop and revision 1 of the probe, on the probe's own inputs."""
    a, b = torchprobes.gemm_inputs(torch, w, n, math)

    def bare(k: int) -> None:
        set_math(torch, math)
        with torch.no_grad():
            for _ in range(k):
                torch.matmul(a, b)
        sync(device)

    def chain(k: int) -> None:  # revision 1, as it was
        set_math(torch, math)
        x = a
        with torch.no_grad():
            for _ in range(k):
                x = x @ b
        float(x[0, :8].float().sum())

    return {"bare": bare, "chain": chain}


def burst(call: Callable[[int], None], work: float) -> list[float]:
    """3 products, then 10 timed at once."""
    call(3)
    t0 = time.perf_counter()
    call(10)
    return [work * 10 / (time.perf_counter() - t0)]


def one_math(w: base.Where, case: base.Case, args: argparse.Namespace, sampler: Sampler) -> None:
    device = torchprobes.device(w)
    n = int(case.name.split("n=")[1])
    seen: list[int] = []
    probe_call = case.call

    def counting(k: int) -> None:
        seen.append(k)
        probe_call(k)

    case.call = counting
    list(base.timed(case, w.scale, args.warmup, args.steps))  # once, to learn the calibrated reps
    reps = seen[-1]
    case.call = probe_call
    others = arms(case, w, n, case.math, reps, device)
    figures: dict[str, list[float]] = {k: [] for k in ("probe", "bare", "chain", "burst")}
    said: dict[str, list[dict[str, Any]]] = {k: [] for k in figures}
    ratios: list[float] = []
    for r in range(args.rounds):
        order = ["probe", "bare", "chain", "burst"]
        order = order if r % 2 == 0 else order[1::-1] + order[2:]
        got: dict[str, float] = {}
        for arm in order:
            with sampler.sampling() as samples:
                if arm == "probe":
                    values = [v[0][2] for _, phase, v, _ in base.timed(case, w.scale, args.warmup, args.steps)
                              if phase == "timed"]  # fmt: skip
                elif arm == "burst":
                    values = burst(others["bare"], case.work)
                else:
                    values = timed_calls(others[arm], reps, args.warmup, args.steps, case.work)
            got[arm] = statistics.median(values)
            figures[arm].append(got[arm])
            said[arm] += samples
        ratios.append(got["probe"] / got["bare"])
    unit = 1e12
    print(f"{case.math} n={n}: {reps} products a call ({case.work * reps / unit:.3g} TFLOP), {args.rounds} rounds")
    for arm, values in figures.items():
        print(f"  {arm:6} {statistics.median(values) / unit:9.4g} TFLOP/s  {conditions(said[arm])}")
    print(
        f"  probe ÷ bare {statistics.median(ratios):.3f} [{min(ratios):.3f}, {max(ratios):.3f}]"
        f"; chain ÷ bare {statistics.median(figures['chain']) / statistics.median(figures['bare']):.3f}"
        f"; bare ÷ burst {statistics.median(figures['bare']) / statistics.median(figures['burst']):.3f}"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", choices=("small", "full"), help="the probe's scale (default: full on a GPU, else small)")
    p.add_argument("--maths", default="", help="comma-separated (default: every math the device has)")
    p.add_argument("--warmup", type=int, default=2, help="warm-up calls, as acceptance's probes (2)")
    p.add_argument("--steps", type=int, default=5, help="timed calls an arm (5: accept --level quick)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (3)")
    args = p.parse_args()
    gpu = torch.cuda.is_available()
    scale = args.scale or ("full" if gpu else "small")
    names = (torch.cuda.get_device_name(0),) if gpu else ()
    w = base.Where(torch, names, scale, (), 0)
    n = base.GEMM_N[scale][-1]
    cases = [c for c in torchprobes.gemm(w) if isinstance(c, base.Case) and c.name.endswith(f"n={n}")]
    wanted = [m for m in args.maths.split(",") if m]
    print(f"{names[0] if names else 'CPU'}, PyTorch {torch.__version__}, gemm revision {torchprobes.GEMM_REVISION}")
    sampler = Sampler()
    for case in cases:
        if not wanted or case.math in wanted:
            one_math(w, case, args, sampler)


if __name__ == "__main__":
    main()
