"""The probes between a job's workers: all-reduce over sizes, and the network as an all-gather."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dltestbed.workload import checked
from dltestbed.workload.probes.base import GATHER_BYTES, Case, Skip, Where, allreduce_cases, size_words


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
        return checked.allreduce_check(tf, w.strategy, w.gpu, size)

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
