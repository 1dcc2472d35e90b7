"""The benchmark models, built with Keras (TensorFlow backend), random weights, logits out."""

from __future__ import annotations

from types import ModuleType
from typing import Any


def alexnet(keras: ModuleType, size: int, classes: int) -> Any:
    """AlexNet as in Krizhevsky et al. 2012: 5 conv + 3 dense, ReLU, max-pool, dropout.

    Adapted for small inputs: 'same' padding throughout, so the stem (11x11, stride 4) and the
    three 3x3/2 pools leave a valid feature map down to 32 px; no LRN (not in Keras, and the
    paper's successors dropped it).
    """
    layers = keras.layers
    return keras.Sequential(
        [
            keras.Input((size, size, 3)),
            layers.Conv2D(96, 11, strides=4, padding="same", activation="relu"),
            layers.MaxPooling2D(3, strides=2, padding="same"),
            layers.Conv2D(256, 5, padding="same", activation="relu"),
            layers.MaxPooling2D(3, strides=2, padding="same"),
            layers.Conv2D(384, 3, padding="same", activation="relu"),
            layers.Conv2D(384, 3, padding="same", activation="relu"),
            layers.Conv2D(256, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(3, strides=2, padding="same"),
            layers.Flatten(),
            layers.Dense(4096, activation="relu"),
            layers.Dropout(0.5),
            layers.Dense(4096, activation="relu"),
            layers.Dropout(0.5),
            layers.Dense(classes),
        ],
        name="alexnet",
    )


def build(name: str, size: int, classes: int) -> Any:
    """A Keras model by catalogue name, input (size, size, 3), `classes` logits."""
    # Keras loads TensorFlow: only the modes that run a model load it
    import keras

    shape = (size, size, 3)
    if name == "inception3":
        return keras.applications.InceptionV3(
            weights=None, input_shape=shape, classes=classes, classifier_activation=None
        )
    if name == "resnet50":
        return keras.applications.ResNet50(weights=None, input_shape=shape, classes=classes, classifier_activation=None)
    if name == "alexnet":
        return alexnet(keras, size, classes)
    raise ValueError(f"unknown model {name!r}")
