"""PyTorch's products, made and checked (workload/checked.py says what a check is): a probe's product
computed again with fresh inputs and held against the same product in float64 on the same device, an
all-reduce's sums against their exact value. The judging (the bound, the verdict) is workload/numerics.py's."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from dltestbed.workload import numerics
from dltestbed.workload.checked import Checked, Computed, verdicts
from dltestbed.workload.probes.base import Where, nvml_index


def dtype(torch: ModuleType, math: str) -> Any:
    return getattr(torch, "float32" if math == "tf32" else math)  # tf32: float32 data on tensor cores


def set_math(torch: ModuleType, math: str) -> None:
    """TF32 on only for the tf32 case, for matmuls and convolutions both (PyTorch's convolutions default to on);
    half-precision products accumulated in float32 (PyTorch may otherwise reduce in half precision, which
    numerics.bound does not allow for, and TensorFlow does not do)."""
    torch.backends.cuda.matmul.allow_tf32 = math == "tf32"
    torch.backends.cudnn.allow_tf32 = math == "tf32"
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False


def normal(torch: ModuleType, shape: tuple[int, ...], seed: int, where: str) -> Any:
    """Standard normal values from a seed, made on the CPU (the same values on every device) and moved."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float32).to(where)


def same_padding(size: int, k: int, stride: int) -> tuple[int, int]:
    """TensorFlow's SAME padding of one dimension, (before, after): the output is ceil(size / stride), the
    odd pixel after. Pure."""
    out = -(-size // stride)
    total = max((out - 1) * stride + k - size, 0)
    return total // 2, total - total // 2


def convolve(torch: ModuleType, x: Any, f: Any, stride: int) -> Any:
    """x (N, C, H, W) convolved with f (Cout, Cin, k, k) as TensorFlow's SAME does: by the convolution's own
    padding where it is even on both sides (the models' layers: no copy of the input), else padded first."""
    k = f.shape[-1]
    (top, bottom), (left, right) = (same_padding(x.shape[d], k, stride) for d in (2, 3))
    if (top, left) == (bottom, right):
        return torch.nn.functional.conv2d(x, f, stride=stride, padding=(top, left))
    padded = torch.nn.functional.pad(x, (left, right, top, bottom))
    return torch.nn.functional.conv2d(padded, f, stride=stride)


def devices(w: Where) -> list[tuple[str, int | None]]:
    """(PyTorch device, the GPU's NVML index, as its health is named) of each device a screen checks: every GPU
    PyTorch sees, else the CPU."""
    return [(f"cuda:{i}", nvml_index(w, i)) for i in range(len(w.gpu_names))] or [("cpu", None)]


def _host(torch: ModuleType) -> Callable[[Any], Any]:
    """A PyTorch tensor on the host, as a float64 array."""
    return lambda t: t.to(torch.float64).cpu().numpy()


def product(torch: ModuleType, a: Any, b: Any) -> Any:
    """The product a checked case computes (bench/screen_sensitivity.py swaps it for one that flips a bit)."""
    return a @ b


def gemm_check(
    torch: ModuleType, where: str, gpu: int | None, n: int, math: str, repeat: bool = False
) -> Callable[[int], list[Checked]]:
    """A check of an n x n x n product in `math`: fresh normal inputs from the seed, rounded to the math's format,
    the product against float64 of the same rounded values within numerics.bound(n, math)."""
    dt = dtype(torch, math)

    def check(seed: int) -> list[Checked]:
        a, b = (normal(torch, (n, n), seed + i, where).to(dt) for i in (0, 1))
        a64, b64 = a.to(torch.float64), b.to(torch.float64)  # the values the device holds, exactly

        def compute() -> Any:
            set_math(torch, math)
            with torch.no_grad():
                return product(torch, a, b)

        exact = a64 @ b64, a64.abs() @ b64.abs()
        return verdicts(Computed(gpu, compute, exact, _host(torch)), numerics.bound(n, math), repeat, f"{math} n={n}")

    return check


def conv_check(
    torch: ModuleType, where: str, gpu: int | None, shape: tuple[int, int, int, int, int, int], repeat: bool = False
) -> Callable[[int], list[Checked]]:
    """A check of a float32 convolution (TF32 off) of shape (H, W, Cin, Cout, k, stride): fresh inputs from the
    seed, against float64 within the direct bound for k·k·Cin times numerics.FAST_CONV."""
    h, wd, cin, cout, k, stride = shape

    def check(seed: int) -> list[Checked]:
        x, f = normal(torch, (1, cin, h, wd), seed, where), normal(torch, (cout, cin, k, k), seed + 1, where)
        x64, f64 = x.to(torch.float64), f.to(torch.float64)

        def compute() -> Any:
            set_math(torch, "float32")
            with torch.no_grad():
                return convolve(torch, x, f, stride)

        exact = convolve(torch, x64, f64, stride), convolve(torch, x64.abs(), f64.abs(), stride)
        tol = numerics.bound(k * k * cin, "float32", numerics.FAST_CONV)
        return verdicts(Computed(gpu, compute, exact, _host(torch)), tol, repeat)

    return check


def allreduce_check(
    torch: ModuleType, dist: Any, where: str, gpu: int | None, size: int
) -> Callable[[int], list[Checked]]:
    """Rank r contributes (r + 1) x a pattern of small integers (from the seed); the sum must be the pattern x
    n(n+1)/2 exactly (integers below 2^24 are exact in float32, in any order), so the tolerance is 0."""

    def check(seed: int) -> list[Checked]:
        n, rank = dist.get_world_size(), dist.get_rank()
        pattern = (torch.arange(size // 4, dtype=torch.float32) % 7 + 1 + seed % 5).to(where)
        got = pattern * (rank + 1)
        dist.all_reduce(got)
        expected = (pattern.to(torch.float64) * (n * (n + 1) / 2)).cpu().numpy()
        verdict = numerics.judge(got.to(torch.float64).cpu().numpy(), expected, expected, 0.0)
        return [Checked("reference", gpu, verdict)]

    return check
