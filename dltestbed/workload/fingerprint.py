"""The environment a run measured: host, kernel, CPU, Python, TensorFlow build, GPUs."""

from __future__ import annotations

import os
import platform
import socket
from typing import Any


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _os_release() -> str:
    try:
        with open("/etc/os-release", encoding="utf-8") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.platform()


def base() -> dict[str, Any]:
    """What is known without TensorFlow."""
    import psutil

    return {
        "host": socket.gethostname(),
        "kernel": platform.release(),
        "os": _os_release(),
        "arch": platform.machine(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_bytes": psutil.virtual_memory().total,
        "python": platform.python_version(),
        "container_image": os.environ.get("DLTESTBED_IMAGE_DIGEST"),
    }


def tensorflow(tf: Any, gpus: list[dict[str, Any]]) -> dict[str, Any]:
    """The TensorFlow build and the GPUs it sees (NVML details merged in by index)."""
    build = dict(tf.sysconfig.get_build_info())
    visible = tf.config.list_physical_devices("GPU")
    import keras

    return {
        "tensorflow": tf.version.VERSION,
        "tensorflow_git": tf.version.GIT_VERSION,
        "tensorflow_cuda_build": bool(build.get("is_cuda_build", False)),
        "tensorflow_cuda": build.get("cuda_version"),
        "tensorflow_cudnn": build.get("cudnn_version"),
        "keras": keras.__version__,
        "onednn": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default"),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "gpus_visible_to_tf": len(visible),
        "gpus": gpus,
    }
