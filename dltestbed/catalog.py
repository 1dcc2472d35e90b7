"""The models the workload knows, with their input sizes. Pure data: no TensorFlow import."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelInfo:
    """A benchmark model: its native input size (as published) and the smallest size it accepts."""

    name: str
    native_size: int
    min_size: int
    description: str


MODELS: dict[str, ModelInfo] = {
    m.name: m
    for m in (
        ModelInfo("inception3", 299, 75, "Keras InceptionV3, weights=None"),
        ModelInfo("resnet50", 224, 32, "Keras ResNet50, weights=None"),
        ModelInfo("alexnet", 224, 32, "AlexNet: 5 conv + 3 dense, 'same' padding so small inputs work"),
    )
}


def model_names() -> list[str]:
    """Known model names, in catalogue order."""
    return list(MODELS)
