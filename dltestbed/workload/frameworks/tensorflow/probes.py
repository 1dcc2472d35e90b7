"""TensorFlow's probes (the others need no framework: workload/probes/): chained GEMMs per math and the models'
convolutions through TensorFlow, each with its check (checks.py); and between a job's workers, the all-reduce
over sizes and the network as an all-gather, through its collectives."""

from __future__ import annotations

import math as math_lib
from collections.abc import Callable
from types import ModuleType
from typing import Any

from dltestbed.workload.checked import CHECK_N
from dltestbed.workload.frameworks.tensorflow import checks
from dltestbed.workload.probes.base import GATHER_BYTES, Case, Skip, Where, allreduce_cases, size_words
from dltestbed.workload.probes.compute import at_size, conv_shapes, gemm_case, gemm_plan


def gemm(w: Where) -> list[Case | Skip]:
    """Chained n x n matmuls (x <- x @ b, b scaled to keep |x| steady): 2 n^3 FLOP each, per math: float32 with
    TF32 off (the non-tensor-core rate), TF32, bfloat16, float16 — each against its own dense peak."""
    why = "TensorFlow converts half precision on a CPU"
    return gemm_plan(w, lambda n, math: _gemm_case(w.framework, w, n, math), why)


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
        checks.set_math(tf, math)
        with tf.device(w.device):
            float(chain(x0, tf.constant(reps)))

    check = checks.gemm_check(tf, w.device, w.gpu, CHECK_N[w.scale], math) if at_size(w, n) else None
    return gemm_case(w, n, math, call, check)


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
            checks.set_math(tf, "float32")
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
                check=checks.conv_check(tf, w.device, w.gpu, (h, wd, cin, cout, k, stride)),
            )
        )
    return cases


def _collective(w: Where, make: Callable[[Any], Any], x: Any) -> Callable[[int], None]:
    """A call doing `reps` collectives `make(replica_context)(x)`, blocking on the last result."""
    tf, strategy = w.framework, w.strategy

    @tf.function
    def once() -> Any:
        return strategy.run(lambda: make(tf.distribute.get_replica_context())(x))

    def call(reps: int) -> None:
        out = None
        for _ in range(reps):
            out = once()
        float(tf.reshape(strategy.experimental_local_results(out)[0], [-1])[0])

    return call


def agreeing(tf: Any, strategy: Any) -> Callable[[float], float]:
    """The largest of a value over a job's workers, by an all-gather through the job's strategy (compiled once)."""
    holder = tf.Variable([0.0], dtype=tf.float64, trainable=False)

    @tf.function
    def gather() -> Any:
        return strategy.run(lambda: tf.distribute.get_replica_context().all_gather(holder + 0.0, axis=0))

    def agree(value: float) -> float:
        holder.assign([value])
        return float(tf.reduce_max(strategy.experimental_local_results(gather())[0]))

    return agree


def allreduce(w: Where) -> list[Case | Skip]:
    """All-reduce (sum) of float32 tensors over message sizes through MultiWorkerMirroredStrategy, as
    nccl-tests reports it: algorithm bandwidth = bytes ÷ time, bus bandwidth = algbw × 2(n−1)/n."""
    if w.strategy is None:
        raise Skip("runs between the workers of a job: --scenario distributed")
    tf, n = w.framework, int(w.strategy.num_replicas_in_sync)  # a rank per replica, as nccl-tests counts GPUs
    if n < 2:
        raise Skip("one replica: nothing to all-reduce between (a machine with one GPU)")

    def call(size: int) -> Callable[[int], None]:
        x = tf.ones([size // 4], tf.float32)
        return _collective(w, lambda ctx: lambda t: ctx.all_reduce(tf.distribute.ReduceOp.SUM, t), x)

    def check(size: int) -> Any:
        return checks.allreduce_check(tf, w.strategy, w.gpu, size)

    return allreduce_cases(w.scale, n, call, check, f"{n} replicas on {w.workers} workers")


def net(w: Where) -> list[Case | Skip]:
    """Between the workers, through TensorFlow's own gRPC path (its collectives): the latency of a
    4-byte all-reduce, and the bytes each worker receives per second in an all-gather."""
    if w.strategy is None:
        raise Skip("runs between the workers of a job: --scenario distributed")
    tf, n = w.framework, w.workers
    one = tf.ones([1], tf.float32)
    size = GATHER_BYTES[w.scale]
    part = tf.ones([size // 4], tf.float32)
    via = f"{n} workers, TensorFlow gRPC collectives"
    return [
        Case(
            "net",
            "latency: 4 B all-reduce",
            "s",
            1.0,
            _collective(w, lambda ctx: lambda t: ctx.all_reduce(tf.distribute.ReduceOp.SUM, t), one),
            note=via,
        ),
        Case(
            "net",
            f"all-gather {size_words(size)} a worker: received",
            "B/s",
            float(size * (n - 1)),
            _collective(w, lambda ctx: lambda t: ctx.all_gather(t, axis=0), part),
            headline=True,
            note=via,
        ),
    ]


# its probes by name (frameworks.base.ProbeFramework.probes), beside the catalog's that need no framework
PROBES: dict[str, Callable[[Where], list[Case | Skip]]] = {
    "gemm": gemm,
    "conv": conv,
    "net": net,
    "allreduce": allreduce,
}
