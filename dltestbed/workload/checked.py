"""Results checked, not only timed: a probe's product computed again with fresh inputs and held against the
same product in float64 on the same device (and, in a screen, against itself), an all-reduce's sums against
their exact value. The computing is here; the judging (the bound, the verdict) is workload/numerics.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from dltestbed.workload import numerics

CHECK_N = {"small": 256, "full": 2048}  # a gemm check's size: its float64 reference is n^3 multiply-adds more


@dataclass(frozen=True)
class Checked:
    """A case's result checked once: against float64 (reference) or against itself (repeat), on a GPU (its
    index) or the CPU (None)."""

    kind: str  # reference | repeat
    gpu: int | None
    verdict: numerics.Verdict
    name: str = ""  # what was checked, where it is not the case's own shape ("float32 n=256")


def set_math(tf: ModuleType, math: str) -> None:
    """TF32 on only for the tf32 case (TensorFlow turns it on by default on Ampere and later GPUs)."""
    tf.config.experimental.enable_tensor_float_32_execution(math == "tf32")


def product(tf: ModuleType, a: Any, b: Any) -> Any:
    """The product a checked case computes (tests swap it for one that flips an element)."""
    return tf.linalg.matmul(a, b)


def convolve(tf: ModuleType, x: Any, f: Any, stride: int) -> Any:
    """The convolution a checked case computes (tests swap it for one that flips an element)."""
    return tf.nn.conv2d(x, f, stride, "SAME")


@dataclass(frozen=True)
class Computed:
    """One checked computation of a framework: `compute()` makes its result on the device; `exact` holds (the
    result in float64, the magnitudes |A|·|B|) as the framework's tensors; `host` brings a tensor to the host as
    a float64 array (the framework's own way)."""

    gpu: int | None
    compute: Callable[[], Any]
    exact: tuple[Any, Any]
    host: Callable[[Any], Any]


def verdicts(c: Computed, tol: float, repeat: bool, name: str = "") -> list[Checked]:
    """The checks of one computation, whatever the framework: its result against float64 within `tol` (and
    against a second run of it, bit for bit, with `repeat`)."""
    got = c.host(c.compute())
    expected, magnitude = (c.host(x) for x in c.exact)
    out = [Checked("reference", c.gpu, numerics.judge(got, expected, magnitude, tol), name)]
    if repeat:
        out.append(Checked("repeat", c.gpu, numerics.judge(c.host(c.compute()), got, magnitude, 0.0), name))
    return out


def _host(tf: ModuleType) -> Callable[[Any], Any]:
    """A TensorFlow tensor on the host, as a float64 array."""
    return lambda t: tf.cast(t, tf.float64).numpy()


def gemm_check(tf: ModuleType, device: str, gpu: int | None, n: int, math: str, repeat: bool = False) -> Any:
    """A check of an n x n x n product in `math` on `device`: fresh normal inputs from the seed, rounded to
    the math's format, the product against float64 within numerics.bound(n, math)."""

    def check(seed: int) -> list[Checked]:
        dt = getattr(tf, "float32" if math == "tf32" else math)
        with tf.device(device):
            g = tf.random.Generator.from_seed(seed)
            a, b = tf.cast(g.normal((n, n)), dt), tf.cast(g.normal((n, n)), dt)
            a64, b64 = tf.cast(a, tf.float64), tf.cast(b, tf.float64)  # the values the device holds, exactly

            def compute() -> Any:
                set_math(tf, math)
                with tf.device(device):
                    return product(tf, a, b)

            exact = tf.linalg.matmul(a64, b64), tf.linalg.matmul(tf.abs(a64), tf.abs(b64))
            computed = Computed(gpu, compute, exact, _host(tf))
            return verdicts(computed, numerics.bound(n, math), repeat, f"{math} n={n}")

    return check


def conv_check(
    tf: ModuleType, device: str, gpu: int | None, shape: tuple[int, int, int, int, int, int], repeat: bool = False
) -> Any:
    """A check of a float32 convolution (TF32 off) of shape (H, W, Cin, Cout, k, stride) on `device`: fresh
    inputs from the seed, against float64 within the direct bound for k·k·Cin times numerics.FAST_CONV."""
    h, wd, cin, cout, k, stride = shape

    def check(seed: int) -> list[Checked]:
        with tf.device(device):
            g = tf.random.Generator.from_seed(seed)
            x, f = g.normal((1, h, wd, cin)), g.normal((k, k, cin, cout))
            x64, f64 = tf.cast(x, tf.float64), tf.cast(f, tf.float64)

            def compute() -> Any:
                set_math(tf, "float32")
                with tf.device(device):
                    return convolve(tf, x, f, stride)

            exact = tf.nn.conv2d(x64, f64, stride, "SAME"), tf.nn.conv2d(tf.abs(x64), tf.abs(f64), stride, "SAME")
            tol = numerics.bound(k * k * cin, "float32", numerics.FAST_CONV)
            return verdicts(Computed(gpu, compute, exact, _host(tf)), tol, repeat)

    return check


def allreduce_check(tf: ModuleType, strategy: Any, gpu: int | None, size: int) -> Any:
    """A check of an all-reduce's sums: replica i (of every worker's devices) contributes (i + 1) x a pattern
    of small integers (from the seed); the sum must be the pattern x n(n+1)/2 exactly for the n replicas in
    sync, in any order (integers below 2^24 are exact in float32), so the tolerance is 0."""
    n = int(strategy.num_replicas_in_sync)

    def check(seed: int) -> list[Checked]:
        pattern = tf.cast(tf.range(size // 4) % 7 + 1 + seed % 5, tf.float32)

        @tf.function
        def once() -> Any:  # the pattern is captured, as the timed collectives do: placed per replica
            def mine() -> Any:
                ctx = tf.distribute.get_replica_context()
                own = pattern * tf.cast(ctx.replica_id_in_sync_group + 1, tf.float32)
                return ctx.all_reduce(tf.distribute.ReduceOp.SUM, own)

            return strategy.run(mine)

        got = strategy.experimental_local_results(once())[0]
        expected = tf.cast(pattern, tf.float64) * (n * (n + 1) / 2)
        verdict = numerics.judge(tf.cast(got, tf.float64).numpy(), expected.numpy(), expected.numpy(), 0.0)
        return [Checked("reference", gpu, verdict)]

    return check
