"""The timed loop: warm-up steps, then timed steps, each timed only once its result is ready."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from dltestbed.errors import ConfigError
from dltestbed.workload.events import StepEvent, SummaryEvent
from dltestbed.workload.steady import Warmup


def on_gpu(device: str | None) -> bool:
    """Whether a framework's device name is a GPU's: TensorFlow's "/job:localhost/replica:0/task:0/device:GPU:0",
    PyTorch's "cuda:0"."""
    return device is not None and (":GPU:" in device.upper() or device.startswith("cuda"))


class StepError(Exception):
    """A step failed; `index` says which (the cause is chained)."""

    def __init__(self, index: int) -> None:
        super().__init__(f"step {index} failed")
        self.index = index


def per_replica(strategy: Any, make: Callable[[int], Iterator[tuple[Any, Any]]], local: int) -> Iterator[Any]:
    """Each of this worker's `local` replicas its own batches (`make(r)`: replica r's batches, from its own
    seed) as the strategy's distributed values: `strategy.run` on a plain tensor would feed every replica
    the same batch. Batches that are the same tensors as the step before (synthetic data) are placed on
    the replicas' devices once, not copied every step."""
    sources = [make(r) for r in range(local)]
    held: tuple[tuple[int, ...], Any] | None = None
    while True:
        batches = [next(it) for it in sources]
        ids = tuple(id(t) for b in batches for t in b)
        if held is None or held[0] != ids:

            def part(i: int, batches: list[tuple[Any, Any]] = batches) -> Any:
                # replica ids run worker by worker: this worker's r-th replica is id % local
                return strategy.experimental_distribute_values_from_function(
                    lambda ctx: batches[ctx.replica_id_in_sync_group % local][i]
                )

            held = (ids, (part(0), part(1)))
        yield held[1]


def make_step(
    tf: ModuleType,
    keras: ModuleType,
    model: Any,
    mode: str,
    strategy: Any = None,
    batch_per_replica: int | None = None,
    *,
    loss_scale: bool = False,
    xla: bool = False,
) -> Callable[[Any, Any], Any]:
    """A compiled step returning a float32 scalar that depends on the whole computation.

    Logits are cast to float32 before the loss (under mixed precision the model computes in 16 bit);
    `loss_scale` wraps the optimizer in Keras' dynamic LossScaleOptimizer (mixed float16); `xla` compiles
    the step with XLA (tf.function(jit_compile=True)). With a strategy (call inside its scope; its inputs
    from `per_replica`) the step is a custom training loop step: each replica computes its gradients on
    its own batch of `batch_per_replica`, the loss averaged over the global batch (that times the replicas
    in sync), the gradients are all-reduced, every replica applies the same update — Keras 3 `fit` does
    not work under MultiWorkerMirroredStrategy. Inference sums every replica's result."""
    compile_ = tf.function(jit_compile=True) if xla else tf.function
    if mode == "infer":

        def forward(images: Any, labels: Any) -> Any:
            return tf.reduce_sum(tf.cast(model(images, training=False), tf.float32))

        if strategy is None:
            return compile_(forward)
        replica_forward = compile_(forward)

        @tf.function
        def infer_step(images: Any, labels: Any) -> Any:
            per = strategy.run(replica_forward, args=(images, labels))
            return strategy.reduce(tf.distribute.ReduceOp.SUM, per, axis=None)

        return infer_step

    optimizer = keras.optimizers.SGD(learning_rate=0.01, momentum=0.9)
    if loss_scale:
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    # built before any step is traced: an unbuilt LossScaleOptimizer scales the loss by its initial
    # scale, which the trace would keep as a constant while the update divides by the live one
    optimizer.build(model.trainable_variables)
    if strategy is not None:
        global_batch = (batch_per_replica or 1) * int(strategy.num_replicas_in_sync)
        step = _distributed_train_step(tf, keras, model, optimizer, strategy, global_batch, loss_scale, xla)
    else:
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

        @compile_
        def step(images: Any, labels: Any) -> Any:
            with tf.GradientTape() as tape:
                loss = loss_fn(labels, tf.cast(model(images, training=True), tf.float32))
                scaled = optimizer.scale_loss(loss) if loss_scale else loss
            grads = tape.gradient(scaled, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

    step.optimizer = optimizer  # its loss scale, for a caller that reads it
    return step


def _distributed_train_step(
    tf: ModuleType,
    keras: ModuleType,
    model: Any,
    optimizer: Any,
    strategy: Any,
    global_batch: int,
    loss_scale: bool,
    xla: bool,
) -> Any:
    """The replica's forward and backward pass compiled with XLA when asked; the all-reduce and the update
    stay outside it, in the strategy's own step."""
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    def grads_of(images: Any, labels: Any) -> Any:
        with tf.GradientTape() as tape:
            per_example = loss_fn(labels, tf.cast(model(images, training=True), tf.float32))
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            scaled = optimizer.scale_loss(loss) if loss_scale else loss
        return loss, tape.gradient(scaled, model.trainable_variables)

    forward_backward = tf.function(grads_of, jit_compile=True) if xla else grads_of

    def replica_step(images: Any, labels: Any) -> Any:
        loss, grads = forward_backward(images, labels)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def train_step(images: Any, labels: Any) -> Any:
        per_replica = strategy.run(replica_step, args=(images, labels))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    return train_step


def run(
    step: Callable[[Any, Any], Any],
    batches: Iterator[tuple[Any, Any]],
    batch_size: int,
    warmup: int | Warmup | None,
    steps: int,
    emit: Callable[[StepEvent], None],
    require_gpu: bool = False,
    libraries: Callable[[], dict[str, str]] | None = None,
    warmed: Callable[[], None] | None = None,
    agree: Callable[[bool], bool] | None = None,
) -> SummaryEvent:
    """Run warm-up steps (a count, or until steady: workload/steady.py), then `steps` timed steps, emitting
    each with its result (the loss); the input fetch is inside the step's time. The first step's event says
    the device its result was put on, and what `libraries` says then (the CUDA libraries loaded: cuDNN and
    cuBLAS load at their first use); with `require_gpu`, a first step that did not run on a GPU ends the run
    (ConfigError) before any other step. `warmed` is called once, after the last warm-up step (what the run's
    steady state is measured from: the allocator's peak, say). `agree`: in a distributed job, whether every
    worker's warm-up is done (each step is a collective: the workers end their warm-up at the same step)."""
    policy = warmup if isinstance(warmup, Warmup) else Warmup(warmup)
    timed: list[float] = []
    warm: list[float] = []  # the warm-up steps' images/sec, which the policy judges
    first = 0.0
    warm_total = 0.0
    warming = not policy.done(warm)
    start = time.perf_counter()
    i = 0
    while len(timed) < steps:
        t0 = time.perf_counter()
        try:
            images, labels = next(batches)
            result = step(images, labels)
            value = float(result)  # blocks until the device has produced the value
        except Exception as exc:
            raise StepError(i) from exc
        dt = time.perf_counter() - t0
        device, libs = None, None
        if i == 0:
            first = dt
            device = str(getattr(result, "device", "") or "") or None
            libs = (libraries() or None) if libraries else None
        phase = "warmup" if warming else "timed"
        if warming:
            warm_total += dt
            warm.append(batch_size / dt)
        else:
            timed.append(dt)
        emit(
            StepEvent(
                index=i,
                phase=phase,
                images=batch_size,
                seconds=dt,
                images_per_sec=batch_size / dt,
                t=time.time(),
                device=device,
                libraries=libs,
                result=value,
            )
        )
        if i == 0 and require_gpu and not on_gpu(device):
            raise ConfigError(f"--device gpu: the first step ran on {device or 'an unknown device'}, not a GPU")
        if warming and (policy.done(warm) if agree is None or not policy.steady else agree(policy.done(warm))):
            warming = False
            if warmed is not None:
                warmed()
        i += 1
    elapsed = time.perf_counter() - start
    total = sum(timed)
    return SummaryEvent(
        timed_steps=len(timed),
        images=batch_size * len(timed),
        timed_seconds=total,
        mean_images_per_sec=sum(batch_size / s for s in timed) / len(timed),
        images_per_sec=batch_size * len(timed) / total,
        elapsed_seconds=elapsed,
        first_step_seconds=first,
        warmup_seconds=warm_total,
    )
