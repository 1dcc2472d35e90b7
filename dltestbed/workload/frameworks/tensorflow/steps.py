"""TensorFlow's step: the compiled train or inference step (under a distribution strategy, each replica its own
batches), which the neutral timed loop (workload/loop.py) times."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any


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
