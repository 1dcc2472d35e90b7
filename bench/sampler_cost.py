"""The sampler's cost: images/sec of the workload with its resource sampling every second (on a GPU: memory,
use, clocks, power, temperature, throttle reasons and PCIe throughput through NVML) ÷ the same run sampled
only at its start and end, in interleaved pairs. The health checks before and after a run and the XID
watch (a thread waiting in the driver) are in both arms: they are outside the timed steps.

Goal: no detectable difference at n = 10 pairs: the 95 % interval of the ratio (paired t on log ratios,
as the report's overheads) contains 1. On a machine without a GPU it measures the CPU-side sampling only.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys

from scipy import stats

from dltestbed.config import spec_json, workload_spec
from dltestbed.workload.gpu import Nvml

NEVER = 1e9  # a sample interval no run reaches: only the first and the last sample


def images_per_sec(a: argparse.Namespace, interval: float) -> float:
    """One workload run's images/sec over its timed steps, sampled every `interval` seconds."""
    spec = workload_spec(
        model=a.model,
        image_size=a.image_size,
        batch_size=a.batch_size,
        warmup=a.warmup,
        steps=a.steps,
        device=a.device,
        sample_interval=interval,
    )
    argv = [sys.executable, "-m", "dltestbed.workload", "--spec", spec_json(spec)]
    out = subprocess.run(argv, capture_output=True, text=True, check=False)
    for line in reversed(out.stdout.splitlines()):
        event = json.loads(line)
        if event.get("event") == "summary":
            return float(event["images_per_sec"])
        if event.get("event") == "error":
            sys.exit(f"the workload failed: {event['message']}")
    sys.exit(f"the workload ended without a summary (exit {out.returncode})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", default="resnet50")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--pairs", type=int, default=10)
    p.add_argument("--interval", type=float, default=1.0, help="the sampled arm's interval, seconds (default 1)")
    p.add_argument("--device", choices=("auto", "cpu", "gpu"), help="default: gpu where NVML sees one, else cpu")
    a = p.parse_args()
    nvml = Nvml.open()
    if nvml is not None:
        nvml.close()
    a.device = a.device or ("gpu" if nvml else "cpu")
    ratios = []
    for i in range(a.pairs):  # interleaved, the order alternating: drift falls on both arms alike
        arms = [(a.interval, "sampled"), (NEVER, "bare")]
        got = {name: images_per_sec(a, interval) for interval, name in (arms if i % 2 == 0 else arms[::-1])}
        ratios.append(got["sampled"] / got["bare"])
        print(f"pair {i + 1}: sampled {got['sampled']:.1f}, bare {got['bare']:.1f} img/s, ratio {ratios[-1]:.4f}")
    logs = [math.log(r) for r in ratios]
    n, mean = len(logs), statistics.fmean(logs)
    half = float(stats.t.ppf(0.975, n - 1)) * statistics.stdev(logs) / math.sqrt(n) if n > 1 else math.inf
    lo, hi = math.exp(mean - half), math.exp(mean + half)
    verdict = "no detectable difference" if lo <= 1 <= hi else "a detectable difference"
    print(
        f"{a.device}, {a.model} b{a.batch_size} {a.image_size}px, n = {n} pairs: sampled every {a.interval:g} s ÷ "
        f"start and end only = {math.exp(mean):.4f} [{lo:.4f}, {hi:.4f}] (95 %, paired t on log ratios): {verdict}"
    )


if __name__ == "__main__":
    main()
