"""Input batches: synthetic (in memory, no I/O) or real (JPEGs read from disk every step)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dltestbed.dataset import DatasetIndex


def synthetic(tf: Any, batch: int, size: int, classes: int, seed: int) -> Iterator[tuple[Any, Any]]:
    """The same in-memory batch forever: the benchmark sees no input pipeline at all."""
    gen = tf.random.Generator.from_seed(seed)
    images = gen.uniform((batch, size, size, 3), 0.0, 1.0, dtype=tf.float32)
    labels = gen.uniform((batch,), 0, classes, dtype=tf.int32)
    while True:
        yield images, labels


def real(tf: Any, index: DatasetIndex, batch: int, size: int, seed: int) -> Iterator[tuple[Any, Any]]:
    """tf.data over the files: shuffle, read, decode, resize, batch, prefetch. No cache: every
    step reads from disk (the page cache aside), as a real training input pipeline does."""

    def load(path: Any, label: Any) -> tuple[Any, Any]:
        raw = tf.io.read_file(path)
        img = tf.io.decode_jpeg(raw, channels=3)
        img = tf.image.resize(img, (size, size))
        return img / 255.0, label

    autotune = tf.data.AUTOTUNE
    ds = tf.data.Dataset.from_tensor_slices((index.files, index.labels))
    ds = ds.shuffle(len(index.files), seed=seed, reshuffle_each_iteration=True).repeat()
    ds = ds.map(load, num_parallel_calls=autotune).batch(batch, drop_remainder=True).prefetch(autotune)
    return iter(ds)
