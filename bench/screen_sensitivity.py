"""The screen's sensitivity, measured rather than assumed: one bit flipped in one element of a product, as a failing
core would, through the checks' own product hook (workload/frameworks/pytorch/checks.product) and judged by the
screen's own check (torchchecked.gemm_check: the product against float64 within numerics.bound).

For each math and bit position — the significand's lowest and highest bit, the exponent's lowest and highest —
`--trials` products (fresh inputs each, a random element each): the share of flips the check catches. Then
the smallest error the comparison can see at each math: the bound times |A|·|B|, relative to the element's own
size (median over the elements). Last, the screen's detection rate when one product in N is faulty, for a
screen of `--products` products: 1 − (1 − p)^(products / N), p the share caught for that bit.

PyTorch on this machine's CPU, n = --n (the bound grows with n: a GPU's screen checks n = 2048).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import torch

from dltestbed.workload import numerics, peaks
from dltestbed.workload.frameworks.pytorch import checks as torchchecked

# Where a math's product is stored: its integer view, and its significand's bits (the exponent's follow).
STORED = {"float32": (torch.int32, 23, 8), "tf32": (torch.int32, 23, 8), "bfloat16": (torch.int16, 7, 8),
          "float16": (torch.int16, 10, 5)}  # fmt: skip


def bits(math: str) -> dict[str, int]:
    """The bit positions flipped, by name."""
    _, m, e = STORED[math]
    return {
        "significand, lowest": 0,
        "significand, highest": m - 1,
        "exponent, lowest": m,
        "exponent, highest": m + e - 1,
    }


class Flip:
    """The product hook: computes the product, then flips `bit` of one random element (the first call of each
    check only: its reference product)."""

    def __init__(self, bit: int, rng: np.random.Generator) -> None:
        self.bit, self.rng, self.armed = bit, rng, True

    def __call__(self, torch_: Any, a: Any, b: Any) -> Any:
        out = a @ b
        if self.armed:
            self.armed = False
            view = out.view(STORED_VIEW[out.dtype]).reshape(-1)
            i = int(self.rng.integers(view.numel()))
            view[i] = view[i] ^ (1 << self.bit)
        return out


STORED_VIEW = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}


def caught(math: str, bit: int, n: int, trials: int) -> float:
    """The share of `trials` single flips of `bit` that the screen's check catches."""
    rng = np.random.default_rng(bit)
    hits = 0
    plain = torchchecked.product
    try:
        for t in range(trials):
            torchchecked.product = Flip(bit, rng)  # type: ignore[assignment]
            (ref,) = torchchecked.gemm_check(torch, "cpu", None, n, math)(1000 * bit + t)
            hits += ref.verdict.mismatches > 0
    finally:
        torchchecked.product = plain
    return hits / trials


def smallest(math: str, n: int, seeds: int = 5) -> float:
    """The smallest error the comparison sees, relative to an element's size: the bound × |A|·|B| / |C|, median
    over the elements of `seeds` products."""
    ratios = []
    for s in range(seeds):
        a, b = (torchchecked.normal(torch, (n, n), s * 2 + i, "cpu").to(torch.float64) for i in (0, 1))
        c, mag = (a @ b).numpy(), (a.abs() @ b.abs()).numpy()
        ratios.append(float(np.median(numerics.bound(n, math) * mag / np.abs(c))))
    return statistics.median(ratios)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=256)
    p.add_argument("--trials", type=int, default=100)
    p.add_argument("--products", type=int, default=1000, help="products a screen checks in its time (per GPU)")
    p.add_argument("--every", default="1,10,100,1000", help="the N of 'one product in N is faulty'")
    a = p.parse_args()
    every = [int(x) for x in a.every.split(",")]
    torch.manual_seed(0)
    print(f"PyTorch {torch.__version__} on the CPU, n = {a.n}, {a.trials} flips per row")
    print("| math | smallest error seen (median element) | bit flipped | caught | "
          + " | ".join(f"screen, 1 in {n}" for n in every) + " |")  # fmt: skip
    print("|---|---|---|---|" + "---|" * len(every))
    for math in peaks.MATHS:
        seen = smallest(math, a.n)
        for name, bit in bits(math).items():
            share = caught(math, bit, a.n, a.trials)
            rates = [1 - (1 - share) ** (a.products / n) for n in every]
            print(f"| {math} | {seen:.2e} | {name} (bit {bit}) | {share:.0%} | "
                  + " | ".join(f"{r:.0%}" for r in rates) + " |")  # fmt: skip


if __name__ == "__main__":
    main()
