"""CLI start: wall time of `dltestbed --help` ÷ `python -c pass`, medians of interleaved runs. Goal <= 3."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                   env={**os.environ, "COLUMNS": "100"})  # fmt: skip
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--runs", type=int, default=30)
    a = p.parse_args()
    script = Path(sys.executable).parent / "dltestbed"
    cli = [str(script), "--help"] if script.exists() else [sys.executable, "-m", "dltestbed", "--help"]
    base = [sys.executable, "-c", "pass"]
    wall(cli), wall(base)  # warm the page cache
    clis, bases = [], []
    for _ in range(a.runs):
        clis.append(wall(cli))
        bases.append(wall(base))
    c, b = statistics.median(clis), statistics.median(bases)
    print(
        f"{' '.join(cli)}: median {c * 1000:.1f} ms   python -c pass: median {b * 1000:.1f} ms   ({a.runs} runs each)"
    )
    print(f"CLI start ratio: {c / b:.2f} (goal <= 3) {'MET' if c / b <= 3 else 'NOT MET'}")


if __name__ == "__main__":
    main()
