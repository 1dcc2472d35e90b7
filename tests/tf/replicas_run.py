"""Run as `python -m tests.tf.replicas_run N`: the CPU split into N logical devices, a MirroredStrategy over
them, and what the replica arithmetic must give (a JSON line): one training step on N replicas of batch b
against one device on the N batches concatenated, each replica's own batch, the step's image count and
the all-reduce check's verdict. In a process of its own: logical devices are set before TensorFlow starts."""

from __future__ import annotations

import json
import sys


def main(n: int, batch: int = 3) -> dict[str, object]:
    import keras
    import numpy as np
    import tensorflow as tf

    from dltestbed.workload import loop
    from dltestbed.workload.frameworks.tensorflow import checks, data, distributed, steps

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * n)
    strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(n)])

    def build() -> object:
        keras.utils.set_random_seed(7)
        return keras.Sequential(
            [keras.Input((8, 8, 3)), keras.layers.Conv2D(4, 3), keras.layers.Flatten(), keras.layers.Dense(5)]
        )

    with strategy.scope():
        model = build()
        step = steps.make_step(tf, keras, model, "train", strategy, batch)
    ref = build()
    ref.set_weights(model.get_weights())
    ref_step = steps.make_step(tf, keras, ref, "train")

    local = distributed.local_replicas(strategy, 1)
    batches = steps.per_replica(strategy, lambda r: data.synthetic(tf, batch, 8, 5, seed=r), local)
    images, labels = next(batches)
    parts = [p.numpy() for p in strategy.experimental_local_results(images)]
    together = (
        tf.concat(strategy.experimental_local_results(images), 0),
        tf.concat(strategy.experimental_local_results(labels), 0),
    )
    losses = [float(step(images, labels)), float(ref_step(*together))]
    after = max(float(np.max(np.abs(a - b))) for a, b in zip(model.get_weights(), ref.get_weights(), strict=True))
    moved = max(float(np.max(np.abs(a - b))) for a, b in zip(model.get_weights(), build().get_weights(), strict=True))
    again = next(batches)
    (verdict,) = checks.allreduce_check(tf, strategy, None, 4096)(3)
    summary = loop.run(step, iter(lambda: next(batches), None), batch * n, 0, 2, lambda e: None)
    return {
        "replicas": int(strategy.num_replicas_in_sync),
        "distinct_batches": len({p.tobytes() for p in parts}),
        "losses": losses,
        "weights_diff": after,
        "weights_moved": moved,
        "placed_once": again[0] is images,
        "allreduce_bad": verdict.verdict.mismatches,
        "allreduce_count": verdict.verdict.elements,
        "images_per_step": summary.images / summary.timed_steps,
    }


def loss_scale() -> dict[str, object]:
    """On 2 replicas with XLA, a dynamically loss-scaled step against a plain one from the same weights,
    with the loss scale changed between the steps (as a float16 overflow halves it): scaling by a power of
    two is exact in float32, so the weights must stay equal when the step reads the live scale. (The
    replicas' forward and backward pass is a tf.function of its own: traced once, before the optimizer
    would have built itself, it kept the initial scale as a constant.)"""
    import keras
    import numpy as np
    import tensorflow as tf

    from dltestbed.workload.frameworks.tensorflow import data, steps

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])

    def build() -> object:
        keras.utils.set_random_seed(7)
        return keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten(), keras.layers.Dense(5)])

    with strategy.scope():
        scaled, plain = build(), build()
        step = steps.make_step(tf, keras, scaled, "train", strategy, 4, loss_scale=True, xla=True)
        ref = steps.make_step(tf, keras, plain, "train", strategy, 4, xla=True)
    batches = steps.per_replica(strategy, lambda r: data.synthetic(tf, 4, 8, 5, seed=r), 2)
    diffs = []
    for _ in range(3):
        images, labels = next(batches)
        step(images, labels), ref(images, labels)
        pairs = zip(scaled.get_weights(), plain.get_weights(), strict=True)
        diffs.append(max(float(np.max(np.abs(a - b))) for a, b in pairs))
        step.optimizer.dynamic_scale.assign(step.optimizer.dynamic_scale / 64.0)
    return {"diffs": diffs, "scale": float(step.optimizer.dynamic_scale.numpy())}


if __name__ == "__main__":
    print(json.dumps(loss_scale() if sys.argv[1] == "loss-scale" else main(int(sys.argv[1]))))
