"""Provisioning and SSH, measured on lab hosts (root): three ratios from one run.

1. provision time for 8 fresh lab hosts ÷ for 1 fresh lab host (goal <= 2.0)
2. a second provision of the 8 ÷ the first (goal <= 0.5)
3. images/sec of the same run over SSH on a lab host ÷ run locally, interleaved pairs (goal >= 0.98)

The wheelhouse is built before the clock starts (it is cached by the controller, and built once
per source change, not per host). Each provision is `dltestbed provision` as a user runs it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLI = [sys.executable, "-m", "dltestbed"]


def timed(*args: str) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([*CLI, *args], capture_output=True, text=True)
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return took


def lab_up(name: str, hosts: int, subnet: str) -> str:
    out = subprocess.run(
        [*CLI, "lab", "up", "--hosts", str(hosts), "--name", name, "--subnet", subnet],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip().splitlines()[-1]


def bench_ips(results: Path, *extra: str, model: str, size: int, batch: int, steps: int) -> float:
    args = [
        "bench",
        "--model",
        model,
        "--image-size",
        str(size),
        "--batch-size",
        str(batch),
        "--warmup",
        "5",
        "--steps",
        str(steps),
        "--targets",
        "bm",
        "--repeat",
        "1",
        "--results",
        str(results),
        "--format",
        "json",
        *extra,
    ]
    out = subprocess.run([*CLI, *args], capture_output=True, text=True, check=True)
    (run,) = json.loads(out.stdout)
    return float(run["images_per_sec"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--hosts", type=int, default=8)
    p.add_argument("--pairs", type=int, default=4)
    p.add_argument("--steps", type=int, default=60)
    a = p.parse_args()
    from dltestbed.provision import wheelhouse

    t0 = time.perf_counter()
    wheelhouse.build("cpu")
    print(f"wheelhouse ready in {time.perf_counter() - t0:.1f} s (not counted)", flush=True)
    try:
        inv1 = lab_up("pbone", 1, "10.213.71.0/24")
        t1 = timed("provision", "--layout", "single", "--inventory", inv1)
        print(f"provision 1 fresh host: {t1:.1f} s", flush=True)
        inv8 = lab_up("pbmany", a.hosts, "10.213.72.0/24")
        t8 = timed("provision", "--layout", "distributed", "--inventory", inv8)
        print(f"provision {a.hosts} fresh hosts: {t8:.1f} s", flush=True)
        t8b = timed("provision", "--layout", "distributed", "--inventory", inv8)
        print(f"provision {a.hosts} hosts again: {t8b:.1f} s", flush=True)
        subprocess.run([*CLI, "lab", "teardown", "--name", "pbmany"], capture_output=True, check=True)

        local, remote = [], []
        with tempfile.TemporaryDirectory() as tmp:
            results = Path(tmp) / "r.sqlite"
            kw = {"model": "alexnet", "size": 64, "batch": 32, "steps": a.steps}
            for i in range(a.pairs):
                order = ("local", "ssh") if i % 2 == 0 else ("ssh", "local")
                for side in order:
                    if side == "local":
                        local.append(bench_ips(results, **kw))
                    else:
                        remote.append(bench_ips(results, "--inventory", inv1, **kw))
                print(f"pair {i + 1}: local {local[-1]:.1f} img/s, ssh {remote[-1]:.1f} img/s", flush=True)
    finally:
        for name in ("pbone", "pbmany"):
            subprocess.run([*CLI, "lab", "teardown", "--name", name], capture_output=True)
    ssh_ratio = statistics.fmean(remote) / statistics.fmean(local)
    print()
    print(f"provision {a.hosts} hosts ÷ 1 host: {t8 / t1:.2f} (goal <= 2.0) {'MET' if t8 / t1 <= 2 else 'NOT MET'}")
    print(
        f"re-run ÷ first run ({a.hosts} hosts): {t8b / t8:.2f} (goal <= 0.5) {'MET' if t8b / t8 <= 0.5 else 'NOT MET'}"
    )
    print(
        f"images/sec over SSH ÷ local: {ssh_ratio:.3f} (goal >= 0.98) {'MET' if ssh_ratio >= 0.98 else 'NOT MET'}"
        f"  [per pair: {', '.join(f'{r / lo:.3f}' for r, lo in zip(remote, local, strict=True))}]"
    )


if __name__ == "__main__":
    main()
