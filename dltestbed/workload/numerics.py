"""Is a product right? A matrix product or convolution computed on the device, checked element by element
against the same product in float64, within a bound that holds for every correct implementation. Pure
(numpy only): the probes compute, this module judges.

The bound (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., 2002, §3.5, eq. 3.13): a
dot product of length k summed in floating point with unit roundoff u, in any order, satisfies
    |ĉ − c| ≤ γ_k · (|a|·|b|),   γ_k = k·u / (1 − k·u),
so each element's error, divided by the same product of the magnitudes, is at most γ_k — whatever the
summation order, blocking or split-K the library picks. Inputs rounded to a narrower format first (TF32
does that inside the tensor core) add (1 + u_in)² per product; a result stored in a narrower format adds
(1 + u_out). An element beyond the bound cannot come from a correct implementation: a flipped exponent or
high significand bit, a wrong kernel, a failing core. (A flipped low significand bit stays inside it: no
check of this kind can tell it from rounding.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Unit roundoffs 2^-p of the formats (p: significand bits with the hidden one).
U_FP32, U_TF32, U_FP16, U_BF16 = 2.0**-24, 2.0**-11, 2.0**-11, 2.0**-8
# Tensor cores accumulate in float32 but do not round to nearest (Fasi, Higham, Mikaitis, Pranesh, "Numerical
# behavior of NVIDIA tensor cores", PeerJ Comput. Sci. 7:e330, 2021: truncation in V100, T4 and A100
# accumulation): a unit roundoff of 2^-23, twice float32's.
U_TC_ACC = 2.0**-23


@dataclass(frozen=True)
class Rounding:
    """Where a math mode rounds: the inputs (to a narrower format inside the unit), the accumulation, the
    stored result. 0: exact there (the reference is computed from the very values the device holds)."""

    inputs: float
    accumulate: float
    result: float
    source: str


# TensorFlow's half-precision matmuls accumulate in float32 (cuBLAS compute type 32F, its default,
# TF_FP16_MATMUL_USE_FP32_COMPUTE); bfloat16 has no other accumulation on tensor cores.
ROUNDING = {
    "float32": Rounding(0.0, U_FP32, 0.0, "float32 in, float32 sums (TF32 off)"),
    "tf32": Rounding(U_TF32, U_TC_ACC, 0.0, "inputs rounded to TF32 (10-bit significand), float32 tensor-core sums"),
    "bfloat16": Rounding(0.0, U_TC_ACC, U_BF16, "bfloat16 in, float32 tensor-core sums, bfloat16 out"),
    "float16": Rounding(0.0, U_TC_ACC, U_FP16, "float16 in, float32 tensor-core sums, float16 out"),
}
# A convolution may run as a fast algorithm (Winograd, FFT) whose transforms scale the rounding errors by a
# constant of the tile (Barabasz, Anderson, Soodhalter, Gregg, "Error analysis and improving the accuracy of
# Winograd convolution for deep neural networks", ACM TOMS 46(4), 2020: F(4x4, 3x3) about an order of
# magnitude over direct): its bound is the direct one times this.
FAST_CONV = 16.0


def bound(k: int, math: str, fast: float = 1.0) -> float:
    """The largest error a correct product of length-k dot products in `math` can make on an element,
    relative to |A|·|B| there (see the module's note)."""
    r = ROUNDING[math]
    ku = k * r.accumulate
    gamma = ku / (1 - ku)
    return fast * ((1 + r.inputs) ** 2 * (1 + gamma) * (1 + r.result) - 1)


@dataclass(frozen=True)
class Verdict:
    """One product checked: its largest error relative to the bound's scale, how many elements were beyond
    the bound, and the worst of them (index, got, expected)."""

    elements: int
    mismatches: int
    worst: float  # the largest |got − expected| / (|A|·|B|) over the elements
    tolerance: float
    at: tuple[int, ...] = ()
    got: float = 0.0
    expected: float = 0.0

    @property
    def ok(self) -> bool:
        """Every element within the bound."""
        return self.mismatches == 0

    def where(self) -> str:
        """The worst element in words."""
        if not self.at:
            return ""
        return f"element {self.at}: {self.got:.9g}, expected {self.expected:.9g}"


def judge(got: Any, expected: Any, magnitude: Any, tolerance: float) -> Verdict:
    """Each element of `got` against `expected` (float64 arrays of one shape), relative to `magnitude`
    (|A|·|B|, the same shape): how many lie beyond `tolerance`, and the worst. A NaN or inf is beyond it."""
    # numpy loads only for the modes that check with it
    import numpy as np

    got, expected, magnitude = (np.asarray(x, dtype=np.float64) for x in (got, expected, magnitude))
    with np.errstate(divide="ignore", invalid="ignore"):
        err = np.abs(got - expected) / np.where(magnitude > 0, magnitude, np.finfo(np.float64).tiny)
    err = np.where(np.isfinite(err), err, np.inf)
    bad = int(np.count_nonzero(err > tolerance))
    i = np.unravel_index(int(np.argmax(err)), err.shape)
    worst = float(err[i])
    at = tuple(int(x) for x in i)
    return Verdict(int(err.size), bad, worst, tolerance, at, float(got[i]), float(expected[i]))
