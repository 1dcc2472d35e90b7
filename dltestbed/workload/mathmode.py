"""The arithmetic of a run, applied before its model is built: TF32 on or off, Keras mixed precision, and
the device facts that decide what `mixed` means. Run on the target; imports nothing above the workload."""

from __future__ import annotations

from types import ModuleType

from dltestbed.errors import ConfigError

# Compute capability from which NVIDIA GPUs have TF32 and bfloat16 tensor cores (Ampere, 8.0).
AMPERE = (8, 0)


def resolve(math: str, capabilities: list[tuple[int, int]]) -> str:
    """The math a run uses on this target, given the compute capabilities of the GPUs TensorFlow sees
    (empty: it runs on the CPU). `mixed` becomes bfloat16 where every GPU has it natively (and on a CPU,
    whose bfloat16 oneDNN runs), else float16. TF32 and bfloat16 on a GPU older than Ampere are refused:
    TensorFlow would silently compute something else (float32, or emulated bfloat16). Pure."""
    old = [c for c in capabilities if c < AMPERE]
    if math == "mixed":
        return "mixed_float16" if old else "mixed_bfloat16"
    if math == "tf32" and not capabilities:
        raise ConfigError("--math tf32 needs a GPU with tensor cores (Ampere or later); this run has none: use float32")
    if math in ("tf32", "mixed_bfloat16") and old:
        cc = ".".join(map(str, old[0]))
        raise ConfigError(
            f"--math {math}: this GPU (compute capability {cc}) has no {math.removeprefix('mixed_')} "
            "tensor cores (Ampere, 8.0, or later): use float32 or mixed_float16"
        )
    return math


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


def loss_scaled(math: str) -> bool:
    """Whether the math needs dynamic loss scaling (float16 gradients underflow without it)."""
    return math == "mixed_float16"
