"""Host↔device copies and kernel launches through the CUDA runtime and driver (NVIDIA's cuda-bindings), as
NVIDIA's bandwidthTest measures them: TensorFlow's Python API has no pinned host buffers, and its own copy
path (2 GB/s on an H100 that moves 55 GB/s) measures TensorFlow, not the bus.

A host buffer is placed on a NUMA node by first touch: the calling thread is pinned to the node's CPUs
while the buffer is allocated (pinned memory is touched when the driver pins it) and while it is copied,
so a node's case shows what a process on that socket gets (the DeepBench/Fathom finding: a container on
the far socket loses host↔device bandwidth)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from dltestbed.config import parse_cpu_list

# An empty kernel in PTX: the driver compiles it for whatever GPU is there (no compiler needed here).
NOOP_PTX = b""".version 6.0
.target sm_50
.address_size 64
.visible .entry noop()
{
    ret;
}
\0"""  # NUL-terminated, as cuModuleLoadData reads PTX


class CudaError(Exception):
    """A CUDA call failed; the message names the call and CUDA's own error."""


def runtime() -> Any:
    """cuda.bindings.runtime, or CudaError saying how to get it."""
    try:
        # cuda-bindings exist only where a GPU's driver does
        from cuda.bindings import runtime as rt
    except ImportError:
        raise CudaError("NVIDIA's cuda-bindings is not installed (the gpu extra: pip install cuda-bindings)") from None
    return rt


def call(rt: Any, name: str, *args: Any) -> Any:
    """`rt.<name>(*args)` of cuda-bindings (returns (error, values...)): the value(s), or CudaError."""
    out = getattr(rt, name)(*args)
    err, rest = out[0], out[1:]
    if int(err) != 0:
        describe = getattr(rt, "cudaGetErrorString", None) or getattr(rt, "cuGetErrorString", None)
        text = describe(err)[1] if describe else b""
        raise CudaError(f"{name}: {getattr(err, 'name', err)} ({_text(text)})")
    return rest[0] if len(rest) == 1 else rest or None


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def pci_bus_ids() -> list[str]:
    """Each CUDA device's PCI bus id ("0000:3B:00.0"), in CUDA's order: the order TensorFlow's /GPU:i follow,
    after CUDA_VISIBLE_DEVICES. CudaError where the runtime cannot say."""
    rt = runtime()
    count = call(rt, "cudaGetDeviceCount")
    return [_text(call(rt, "cudaDeviceGetPCIBusId", 32, i)).rstrip("\0") for i in range(int(count))]


def numa_nodes(sysfs: Path = Path("/sys/devices/system/node")) -> dict[int, list[int]]:
    """NUMA nodes that have CPUs, with their CPUs (empty where the kernel has no NUMA information)."""
    out = {}
    for d in sorted(sysfs.glob("node[0-9]*"), key=lambda p: int(p.name[4:])):
        with contextlib.suppress(OSError, ValueError):
            text = (d / "cpulist").read_text().strip()
            if text:
                out[int(d.name[4:])] = parse_cpu_list(text)
    return out


@contextlib.contextmanager
def on_cpus(cpus: list[int] | None) -> Iterator[None]:
    """The calling thread on these CPUs while inside (None: where it is); its affinity restored after."""
    if cpus is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, set(cpus) & before or set(cpus))
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


class Copies:
    """`size` bytes copied host→device or device→host on GPU `device`, from a pinned or a pageable host buffer
    placed on `cpus`' NUMA node (None: wherever). `call(reps)` makes reps copies and waits for the last."""

    def __init__(self, device: int, size: int, direction: str, pinned: bool, cpus: list[int] | None) -> None:
        self.rt = rt = runtime()
        self.size, self.cpus, self.pinned = size, cpus, pinned
        call(rt, "cudaSetDevice", device)
        self.kind = (
            rt.cudaMemcpyKind.cudaMemcpyHostToDevice if direction == "h2d" else rt.cudaMemcpyKind.cudaMemcpyDeviceToHost
        )
        self._free: list[Callable[[], None]] = []
        try:
            self.dev = call(rt, "cudaMalloc", size)
            self._free.append(lambda: call(rt, "cudaFree", self.dev))
            with on_cpus(cpus):
                if pinned:
                    self.host = call(rt, "cudaMallocHost", size)
                    self._free.append(lambda: call(rt, "cudaFreeHost", self.host))
                    self._keep = None
                else:
                    # numpy loads only for the modes that measure with it
                    import numpy as np

                    self._keep = np.ones(size, dtype=np.uint8)  # touched here: its pages on this node
                    self.host = self._keep.ctypes.data
            self.stream = call(rt, "cudaStreamCreate")
            self._free.append(lambda: call(rt, "cudaStreamDestroy", self.stream))
        except BaseException:
            self.close()
            raise

    def __call__(self, reps: int) -> None:
        """reps copies, then wait for them (pinned: asynchronous on a stream, as bandwidthTest does)."""
        dst, src = (
            (self.dev, self.host)
            if self.kind == self.rt.cudaMemcpyKind.cudaMemcpyHostToDevice
            else (self.host, self.dev)
        )
        with on_cpus(self.cpus):
            for _ in range(reps):
                if self.pinned:
                    call(self.rt, "cudaMemcpyAsync", dst, src, self.size, self.kind, self.stream)
                else:
                    call(self.rt, "cudaMemcpy", dst, src, self.size, self.kind)
            if self.pinned:
                call(self.rt, "cudaStreamSynchronize", self.stream)
            else:  # cudaMemcpy from pageable memory may return before its last DMA ends, on the default stream
                call(self.rt, "cudaDeviceSynchronize")

    def close(self) -> None:
        """Free the buffers and the stream (each once, whatever failed before)."""
        while self._free:
            with contextlib.suppress(CudaError):
                self._free.pop()()
        self._keep = None


class DeviceCopies:
    """`size` bytes copied from one buffer to another on GPU `device`, asynchronously on a stream: `call(reps)`
    makes reps copies and waits for the last."""

    def __init__(self, device: int, size: int) -> None:
        self.rt = rt = runtime()
        self.size = size
        call(rt, "cudaSetDevice", device)
        self._free: list[Callable[[], None]] = []
        try:
            self.src = call(rt, "cudaMalloc", size)
            self._free.append(lambda: call(rt, "cudaFree", self.src))
            self.dst = call(rt, "cudaMalloc", size)
            self._free.append(lambda: call(rt, "cudaFree", self.dst))
            self.stream = call(rt, "cudaStreamCreate")
            self._free.append(lambda: call(rt, "cudaStreamDestroy", self.stream))
        except BaseException:
            self.close()
            raise

    def __call__(self, reps: int) -> None:
        """reps copies, then wait for them."""
        kind = self.rt.cudaMemcpyKind.cudaMemcpyDeviceToDevice
        for _ in range(reps):
            call(self.rt, "cudaMemcpyAsync", self.dst, self.src, self.size, kind, self.stream)
        call(self.rt, "cudaStreamSynchronize", self.stream)

    def close(self) -> None:
        """Free the buffers and the stream (each once, whatever failed before)."""
        while self._free:
            with contextlib.suppress(CudaError):
                self._free.pop()()


class Launches:
    """Empty kernels launched on GPU `device`, one block of one thread each: `call(reps)` launches reps and
    waits for them (launch rate), or with `sync` waits after each (launch + completion round trip)."""

    def __init__(self, device: int, sync: bool) -> None:
        rt = runtime()
        call(rt, "cudaSetDevice", device)
        call(rt, "cudaFree", 0)  # the device's primary context, current on this thread for the driver calls
        # cuda-bindings exist only where a GPU's driver does
        from cuda.bindings import driver as drv

        self.drv, self.sync = drv, sync
        self.module = call(drv, "cuModuleLoadData", NOOP_PTX)
        self.func = call(drv, "cuModuleGetFunction", self.module, b"noop")

    def __call__(self, reps: int) -> None:
        drv = self.drv
        for _ in range(reps):
            call(drv, "cuLaunchKernel", self.func, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0)
            if self.sync:
                call(drv, "cuCtxSynchronize")
        call(drv, "cuCtxSynchronize")

    def close(self) -> None:
        """Unload the module."""
        with contextlib.suppress(CudaError):
            call(self.drv, "cuModuleUnload", self.module)
