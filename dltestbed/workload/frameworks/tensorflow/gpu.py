"""GPU memory as TensorFlow's allocator sees it: how much a run may take, and how much it holds.

TensorFlow maps nearly all of a GPU's memory when it first touches it, unless told otherwise before: a
second process on the same GPU (a co-tenant, a second worker) then fails at its first step, and NVML
shows the same full GPU for every model. So every run either grows its memory as it needs it (the
default) or takes a fixed slice (`--gpu-memory-mib`)."""

from __future__ import annotations

import contextlib
from types import ModuleType


def configure(tf: ModuleType, limit_mib: int | None) -> int:
    """Before TensorFlow touches a GPU: memory growth on each GPU it sees, or one logical device of
    `limit_mib` MiB per GPU. The number of GPUs it sees."""
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        if limit_mib is None:
            tf.config.experimental.set_memory_growth(gpu, True)
        else:
            tf.config.set_logical_device_configuration(gpu, [tf.config.LogicalDeviceConfiguration(limit_mib)])
    return len(gpus)


def split_cpu(tf: ModuleType, devices: int) -> None:
    """Before the runtime starts: the CPU as `devices` logical devices (a replica each under --gpus node)."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * devices)


def in_use(tf: ModuleType, count: int) -> list[int]:
    """Bytes TensorFlow's allocator holds for tensors now, per GPU it sees ([] when it cannot say)."""
    try:
        return [int(tf.config.experimental.get_memory_info(f"GPU:{i}")["current"]) for i in range(count)]
    except (ValueError, RuntimeError):  # a device without allocator statistics
        return []


def reset_peak(tf: ModuleType, count: int) -> None:
    """Start the allocator's peak afresh (after warm-up: cuDNN's autotuning workspaces of the first steps are
    not what the model needs)."""
    for i in range(count):
        # a device without allocator statistics: its peak stays unknown
        with contextlib.suppress(ValueError, RuntimeError):
            tf.config.experimental.reset_memory_stats(f"GPU:{i}")


def peak(tf: ModuleType, count: int) -> int | None:
    """The most bytes TensorFlow's allocator held at once since the last reset_peak (after warm-up), summed over
    its GPUs."""
    try:
        return sum(int(tf.config.experimental.get_memory_info(f"GPU:{i}")["peak"]) for i in range(count)) or None
    except (ValueError, RuntimeError):
        return None
