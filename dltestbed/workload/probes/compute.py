"""The compute probes, through the framework: chained GEMMs per math, and the models' convolutions."""

from __future__ import annotations

import math as math_lib
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

from dltestbed.workload import checked, peaks
from dltestbed.workload.checked import CHECK_N, set_math
from dltestbed.workload.probes.base import CONVS, GEMM_N, Case, Skip, Where, cpu_peak


def gemm(w: Where) -> list[Case | Skip]:
    """Chained n x n matmuls (x <- x @ b, b scaled to keep |x| steady): 2 n^3 FLOP each, per math: float32 with
    TF32 off (the non-tensor-core rate), TF32, bfloat16, float16 — each against its own dense peak."""
    why = "TensorFlow converts half precision on a CPU"
    return gemm_plan(w, lambda n, math: _gemm_case(w.framework, w, n, math), why)


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


def _gemm_case(tf: ModuleType, w: Where, n: int, math: str) -> Case:
    dt = getattr(tf, "float32" if math == "tf32" else math)
    with tf.device(w.device):
        x0 = tf.cast(tf.random.normal((n, n), seed=w.seed), dt)
        b = tf.cast(tf.random.normal((n, n), seed=w.seed + 1) / math_lib.sqrt(n), dt)

    @tf.function
    def chain(x: Any, reps: Any) -> Any:
        for _ in tf.range(reps):
            x = tf.linalg.matmul(x, b)
        return tf.reduce_sum(tf.cast(x[0, :8], tf.float32))

    def call(reps: int) -> None:
        set_math(tf, math)
        with tf.device(w.device):
            float(chain(x0, tf.constant(reps)))

    check = checked.gemm_check(tf, w.device, w.gpu, CHECK_N[w.scale], math) if at_size(w, n) else None
    return gemm_case(w, n, math, call, check)


def conv_shapes(scale: str) -> list[tuple[str, int, int, int, int, int, int]]:
    """CONVS at a scale: small takes a quarter of the height and width (at least the kernel's)."""
    if scale != "small":
        return list(CONVS)
    return [(name, max(k, -(-h // 4)), max(k, -(-wd // 4)), cin, cout, k, s) for name, h, wd, cin, cout, k, s in CONVS]


def conv(w: Where) -> list[Case | Skip]:
    """Forward convolutions at the models' heaviest layers' shapes: 2 H' W' k^2 Cin Cout FLOP each (float32,
    TF32 off)."""
    tf = w.framework
    cases: list[Case | Skip] = []
    for i, (name, h, wd, cin, cout, k, stride) in enumerate(conv_shapes(w.scale)):
        with tf.device(w.device):
            x = tf.random.normal((1, h, wd, cin), seed=w.seed)
            f = tf.random.normal((k, k, cin, cout), seed=w.seed + 1) / math_lib.sqrt(k * k * cin)

        @tf.function
        def many(reps: Any, x: Any = x, f: Any = f, stride: int = stride) -> Any:
            acc = tf.constant(0.0)
            for _ in tf.range(reps):
                acc += tf.reduce_sum(tf.nn.conv2d(x + acc * 0.0, f, stride, "SAME")[0, 0, 0])
            return acc

        def call(reps: int, many: Any = many) -> None:
            set_math(tf, "float32")
            with tf.device(w.device):
                float(many(tf.constant(reps)))

        ho, wo = -(-h // stride), -(-wd // stride)
        flop = 2.0 * ho * wo * k * k * cin * cout
        cases.append(
            Case(
                "conv",
                f"{name} at {h}x{wd}",
                "FLOP/s",
                flop,
                call,
                headline=(i == 0),
                math="float32",
                note="float32, TF32 off",
                check=checked.conv_check(tf, w.device, w.gpu, (h, wd, cin, cout, k, stride)),
            )
        )
    return cases
