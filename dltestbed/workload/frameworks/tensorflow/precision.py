"""TensorFlow's arithmetic: the compute capabilities its GPUs have (what `--math mixed` resolves by:
workload/mathmode.py), and TF32 and Keras' dtype policy set for the math resolved, before any model is built."""

from __future__ import annotations

from types import ModuleType


def capabilities(tf: ModuleType) -> list[tuple[int, int]]:
    """The compute capability of each GPU TensorFlow sees (none on a CPU)."""
    out = []
    for gpu in tf.config.list_physical_devices("GPU"):
        cc = tf.config.experimental.get_device_details(gpu).get("compute_capability")
        out.append(tuple(cc) if cc else (0, 0))
    return out


def apply(tf: ModuleType, keras: ModuleType, math: str) -> None:
    """Set TensorFlow and Keras up for a resolved math mode, before any model is built: TF32 only for
    `tf32` (TensorFlow enables it by default on Ampere and later), the Keras dtype policy for mixed."""
    tf.config.experimental.enable_tensor_float_32_execution(math == "tf32")
    keras.mixed_precision.set_global_policy(math if math.startswith("mixed_") else "float32")
