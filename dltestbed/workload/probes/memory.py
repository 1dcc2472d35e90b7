"""The memory probes: host memory bandwidth, host-to-device and device-to-host copies (pinned and pageable,
from the GPU's own NUMA node and the other), the GPU's own memory bandwidth (a device-to-device copy), and a
kernel launch's latency."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from dltestbed.workload import cudart
from dltestbed.workload.probes.base import (
    COPY_BYTES,
    DEVICE_COPY_BYTES,
    MEMBW_BYTES,
    Case,
    Skip,
    Where,
    first_gpu,
    near_node,
    pcie_rate,
    size_words,
)


def membw(w: Where) -> list[Case | Skip]:
    """numpy.copyto of a large float64 array, bytes read + bytes written per copy: by one thread, and split
    over a thread per CPU this process may use (numpy copies without the GIL): what one core gets, and
    what the memory system gives."""
    # numpy loads only for the modes that measure with it
    import numpy as np

    size = MEMBW_BYTES[w.scale]
    src = np.ones(size // 8)
    dst = np.empty_like(src)
    cpus = len(os.sched_getaffinity(0))

    def one(reps: int) -> None:
        for _ in range(reps):
            np.copyto(dst, src)

    pool = ThreadPoolExecutor(cpus, thread_name_prefix="dltestbed-membw")
    bounds = [(i * len(src) // cpus, (i + 1) * len(src) // cpus) for i in range(cpus)]

    def part(lo: int, hi: int, reps: int) -> None:
        for _ in range(reps):
            np.copyto(dst[lo:hi], src[lo:hi])

    def many(reps: int) -> None:
        for f in [pool.submit(part, lo, hi, reps) for lo, hi in bounds]:
            f.result()

    return [
        Case("membw", f"copy {size >> 20} MiB, 1 thread", "B/s", 2.0 * size, one),
        Case(
            "membw",
            f"copy {size >> 20} MiB, all CPUs",
            "B/s",
            2.0 * size,
            many,
            headline=True,
            note=f"{cpus} thread(s): one per CPU this process may use",
            cleanup=pool.shutdown,
        ),
    ]


def copy_cases(probe: str, size: int, nodes: dict[int, list[int]]) -> list[tuple[str, bool, list[int] | None]]:
    """(case, pinned, CPUs to place the host buffer on) of a copy probe: pinned (the first: the headline) and
    pageable, and from each NUMA node's memory where there are several. Pure."""
    per_node = [(f" from node {n}", cpus) for n, cpus in nodes.items()] if len(nodes) > 1 else [("", None)]
    return [
        (f"{kind} {size_words(size)}{where}", kind == "pinned", cpus)
        for kind in ("pinned", "pageable")
        for where, cpus in per_node
    ]


def _copies(w: Where, probe: str) -> list[Case | Skip]:
    facts = first_gpu(w)
    size = COPY_BYTES[w.scale]
    limit, src = pcie_rate(facts.get("pcie_gen_max"), facts.get("pcie_width_max"))
    now = (
        f"; the link runs at Gen{facts.get('pcie_gen')} x{facts.get('pcie_width')} now"
        if facts.get("pcie_gen") is not None
        else ""
    )
    cases: list[Case | Skip] = []
    for i, (name, pinned, cpus) in enumerate(copy_cases(probe, size, cudart.numa_nodes())):
        try:
            copies = cudart.Copies(0, size, probe, pinned, cpus)
        except cudart.CudaError as exc:
            cases.append(Skip(str(exc), name))
            continue
        cases.append(
            Case(
                probe,
                name,
                "B/s",
                float(size),
                copies,
                headline=i == 0,
                limit=limit,
                limit_source=src + now,
                note=f"CUDA runtime, as bandwidthTest; {near_node(facts)}",
                cleanup=copies.close,
            )
        )
    return cases


def h2d(w: Where) -> list[Case | Skip]:
    """Host-to-device copies through the CUDA runtime, from pinned and pageable host memory (GPU only)."""
    return _copies(w, "h2d")


def d2h(w: Where) -> list[Case | Skip]:
    """Device-to-host copies through the CUDA runtime, into pinned and pageable host memory (GPU only)."""
    return _copies(w, "d2h")


def d2d(w: Where) -> list[Case | Skip]:
    """A device-to-device copy through the CUDA runtime: the GPU's memory bandwidth, bytes read plus bytes
    written, as DCGM's memory bandwidth check and the boards' expected values count it (GPU only)."""
    first_gpu(w)
    size = DEVICE_COPY_BYTES[w.scale]
    name = f"device copy {size_words(size)}"
    try:
        copies = cudart.DeviceCopies(0, size)
    except cudart.CudaError as exc:
        return [Skip(str(exc), name)]
    note = "CUDA runtime, cudaMemcpyAsync device to device on a stream; bytes read + written"
    return [Case("d2d", name, "B/s", 2.0 * size, copies, headline=True, note=note, cleanup=copies.close)]


def launch(w: Where) -> list[Case | Skip]:
    """Empty kernels launched one after another (the time per launch, the GPU's and the layer's share of
    frequent short kernels), and launched then waited for (the round trip). Through the CUDA driver, each
    launch a Python call (the binding's own cost is in it: an estimate puts it near a microsecond)."""
    first_gpu(w)
    out: list[Case | Skip] = []
    for name, sync in (("empty kernel, launches in a row", False), ("empty kernel, launch and wait", True)):
        try:
            runs = cudart.Launches(0, sync)
        except cudart.CudaError as exc:
            out.append(Skip(str(exc), name))
            continue
        out.append(
            Case(
                "launch",
                name,
                "s",
                1.0,
                runs,
                headline=not sync,
                cleanup=runs.close,
                note="1 block of 1 thread; CUDA driver API through cuda-bindings",
            )
        )
    return out
