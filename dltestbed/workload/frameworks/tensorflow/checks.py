"""TensorFlow's products, made and checked (workload/checked.py says what a check is): a probe's product against
float64 on the same device, an all-reduce's sums against their exact value; and the devices a screen checks."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from dltestbed.workload import numerics
from dltestbed.workload.checked import Checked, Computed, verdicts
from dltestbed.workload.probes.base import Where, nvml_index


def devices(w: Where) -> list[tuple[str, int | None]]:
    """(TensorFlow's device, the GPU's NVML index, as its health is named) of each device a screen checks: every
    GPU TensorFlow sees, else the CPU."""
    return [(f"/GPU:{i}", nvml_index(w, i)) for i in range(len(w.gpu_names))] or [("/CPU:0", None)]


def set_math(tf: ModuleType, math: str) -> None:
    """TF32 on only for the tf32 case (TensorFlow turns it on by default on Ampere and later GPUs)."""
    tf.config.experimental.enable_tensor_float_32_execution(math == "tf32")


def product(tf: ModuleType, a: Any, b: Any) -> Any:
    """The product a checked case computes (tests swap it for one that flips an element)."""
    return tf.linalg.matmul(a, b)


def convolve(tf: ModuleType, x: Any, f: Any, stride: int) -> Any:
    """The convolution a checked case computes (tests swap it for one that flips an element)."""
    return tf.nn.conv2d(x, f, stride, "SAME")


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
