"""Input batches: synthetic (in memory, no I/O) or real (JPEGs read from disk every step)."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Any

from dltestbed.dataset import DatasetIndex


def synthetic(tf: ModuleType, batch: int, size: int, classes: int, seed: int) -> Iterator[tuple[Any, Any]]:
    """The same in-memory batch forever: the benchmark sees no input pipeline at all."""
    gen = tf.random.Generator.from_seed(seed)
    images = gen.uniform((batch, size, size, 3), 0.0, 1.0, dtype=tf.float32)
    labels = gen.uniform((batch,), 0, classes, dtype=tf.int32)
    while True:
        yield images, labels


def _loader(tf: ModuleType, size: int) -> Any:
    """Read, decode, resize a file to (size, size, 3) in [0, 1], with its label."""

    def load(path: Any, label: Any) -> tuple[Any, Any]:
        raw = tf.io.read_file(path)
        img = tf.io.decode_jpeg(raw, channels=3)
        img = tf.image.resize(img, (size, size))
        return img / 255.0, label

    return load


def real(tf: ModuleType, index: DatasetIndex, batch: int, size: int, seed: int) -> Iterator[tuple[Any, Any]]:
    """tf.data over the files: shuffle, read, decode, resize, batch, prefetch. No cache: every
    step reads from disk (the page cache aside), as a real training input pipeline does."""
    load = _loader(tf, size)
    autotune = tf.data.AUTOTUNE
    ds = tf.data.Dataset.from_tensor_slices((index.files, index.labels))
    ds = ds.shuffle(len(index.files), seed=seed, reshuffle_each_iteration=True).repeat()
    ds = ds.map(load, num_parallel_calls=autotune).batch(batch, drop_remainder=True).prefetch(autotune)
    return iter(ds)


def held_out(tf: ModuleType, index: DatasetIndex, batch: int, size: int) -> Any:
    """The held-out images once, in file order, in batches (the last one may be short): for --accuracy."""
    ds = tf.data.Dataset.from_tensor_slices((index.files, index.labels))
    return ds.map(_loader(tf, size)).batch(batch)


def evaluate(tf: ModuleType, keras: ModuleType, model: Any, batches: Any) -> tuple[int, int, float]:
    """(images, right at top-1, mean cross-entropy loss) of the model in inference on the batches."""
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum")
    images = correct = 0
    total = 0.0
    for x, y in batches:
        logits = tf.cast(model(x, training=False), tf.float32)
        labels = tf.cast(y, tf.int64)
        correct += int(tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, axis=1), labels), tf.int32)))
        total += float(loss_fn(labels, logits))
        images += int(tf.shape(x)[0])
    return images, correct, total / images if images else float("nan")
