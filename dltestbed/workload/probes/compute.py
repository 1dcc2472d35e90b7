"""The compute probes' plan, whatever framework computes them (frameworks/*/probes.py): the gemm cases per math
and size, against the device's peak, and the models' convolution shapes at a scale."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from dltestbed.workload import peaks
from dltestbed.workload.probes.base import CONVS, GEMM_N, Case, Skip, Where, cpu_peak


def gemm_plan(w: Where, case: Callable[[int, str], Case], half_why: str) -> list[Case | Skip]:
    """Any framework's gemm cases: `case(n, math)` for each math the target has (a CPU: float32) and each size;
    on a CPU, the skipped maths (`half_why`: why half precision is measured on a GPU only)."""
    cases: list[Case | Skip] = [case(n, math) for math in peaks.MATHS if w.gpu_names or math == "float32"
                                for n in GEMM_N[w.scale]]  # fmt: skip
    if not w.gpu_names:
        cases.append(Skip("a GPU's tensor-core math (Ampere or later)", "tf32"))
        for dtype in ("bfloat16", "float16"):
            cases.append(Skip(f"measured on a GPU only ({half_why})", dtype))
    return cases


def at_size(w: Where, n: int) -> bool:
    """Whether a gemm case is the one timed at size (its math's check and, for float32, the headline)."""
    return n == GEMM_N[w.scale][-1]


def gemm_case(w: Where, n: int, math: str, call: Callable[[int], None], check: Any = None, revision: int = 1) -> Case:
    """Any framework's gemm case of n and math: its work, its limit (the GPU's peak, else the CPUs'), the revision
    of the framework's gemm code."""
    if w.gpu_names:
        limit, src = peaks.gpu_peak(w.gpu_names[0], math)
    else:
        limit, src = cpu_peak(len(os.sched_getaffinity(0)))
    headline = math == "float32" and at_size(w, n)
    return Case("gemm", f"{math} n={n}", "FLOP/s", 2.0 * n**3, call, headline=headline, limit=limit,
                limit_source=src, math=math, check=check, revision=revision)  # fmt: skip


def conv_shapes(scale: str) -> list[tuple[str, int, int, int, int, int, int]]:
    """CONVS at a scale: small takes a quarter of the height and width (at least the kernel's)."""
    if scale != "small":
        return list(CONVS)
    return [(name, max(k, -(-h // 4)), max(k, -(-wd // 4)), cin, cout, k, s) for name, h, wd, cin, cout, k, s in CONVS]
