"""The arithmetic of a run: what `--math` means on the GPUs a run has (each framework applies it before its model
is built: frameworks/*/). Run on the target; imports nothing above the workload."""

from __future__ import annotations

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


def loss_scaled(math: str) -> bool:
    """Whether the math needs dynamic loss scaling (float16 gradients underflow without it)."""
    return math == "mixed_float16"
