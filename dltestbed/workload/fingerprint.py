"""The environment a run measured: host, kernel, CPU, Python, TensorFlow build, GPUs."""

from __future__ import annotations

import ctypes
import importlib.metadata as md
import os
import platform
import pwd
import socket
from collections.abc import Sequence
from typing import Any

from dltestbed.workload import hostfacts


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


def _user() -> str | None:
    """This process's user name as the system it runs on knows it (a container's passwd), or None."""
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return None


def base(frameworks: Sequence[str]) -> dict[str, Any]:
    """What is known without a framework loaded; `frameworks`: the distributions of every framework, whose
    installed versions it records beside dltestbed's and NumPy's (acceptance compares them across a fleet)."""
    # psutil loads only for the measuring modes
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
        "uid": os.getuid(),  # who the workload ran as, seen from inside (the target's run_as_user: from outside)
        "user": _user(),
        "container_image": os.environ.get("DLTESTBED_IMAGE_DIGEST"),
        "packages": packages(("dltestbed", *frameworks, "numpy")),
        **hostfacts.read(),  # CPUs online and usable, SMT, NUMA nodes, hugepages, governor: acceptance's drift
    }


def packages(distributions: Sequence[str]) -> dict[str, str]:
    """The installed version of each of these distributions this Python has, as its package metadata says (pip's
    view; nothing imported)."""
    out = {}
    for dist in distributions:
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            continue
    return out


# The CUDA libraries TensorFlow loads, by file-name stem, and how each says its version (libraries.py reads
# them from the running process: the build's versions in tf.sysconfig can differ from the ones loaded).
CUDA_LIBRARIES = {"libcudart.so": "cuda_runtime", "libcudnn.so": "cudnn", "libcublas.so": "cublas"}


def loaded_paths(maps: str) -> dict[str, str]:
    """The file of each CUDA library of CUDA_LIBRARIES mapped into a process, from /proc/PID/maps' text
    (libcublasLt and cuDNN's sub-libraries are not the ones asked). Pure."""
    out: dict[str, str] = {}
    for line in maps.splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) < 6:
            continue
        path = parts[5]
        name = os.path.basename(path)
        for stem, key in CUDA_LIBRARIES.items():
            if name == stem or name.startswith(stem + "."):
                out.setdefault(key, path)
    return out


def version_text(key: str, number: int) -> str:
    """A CUDA library's version number as its vendor writes it: the runtime 12090 → 12.9; cuDNN 9 92800 →
    9.28.0 (major·10000 + minor·100 + patch), cuDNN 8 8907 → 8.9.7 (major·1000 + minor·100 + patch). Pure."""
    if key == "cuda_runtime":
        return f"{number // 1000}.{number % 1000 // 10}"
    if key == "cudnn":
        major = number // 10000 if number >= 90000 else number // 1000
        rest = number - major * (10000 if number >= 90000 else 1000)
        return f"{major}.{rest // 100}.{rest % 100}"
    return str(number)


def loaded_cuda(maps_file: str = "/proc/self/maps") -> dict[str, str]:
    """The versions of the CUDA runtime, cuDNN and cuBLAS this process has loaded, asked of each loaded
    file itself (none loaded: {}). Call after the first GPU step: cuDNN and cuBLAS load when first used."""

    try:
        with open(maps_file, encoding="utf-8", errors="replace") as f:
            found = loaded_paths(f.read())
    except OSError:
        return {}
    out = {}
    for key, path in found.items():
        try:
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
            out[key] = _ask_version(lib, key)
        except (OSError, AttributeError):
            out[key] = os.path.basename(path)  # loaded, but it would not say: its file name at least
    return out


def _ask_version(lib: Any, key: str) -> str:

    if key == "cudnn":
        lib.cudnnGetVersion.restype = ctypes.c_size_t
        return version_text(key, int(lib.cudnnGetVersion()))
    value = ctypes.c_int()
    if key == "cuda_runtime":
        lib.cudaRuntimeGetVersion(ctypes.byref(value))
        return version_text(key, value.value)
    parts = []
    for prop in (0, 1, 2):  # cublasGetProperty: MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
        lib.cublasGetProperty(prop, ctypes.byref(value))
        parts.append(str(value.value))
    return ".".join(parts)
