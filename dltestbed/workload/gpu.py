"""GPU facts and samples through NVML (package nvidia-ml-py), when a GPU and driver are present."""

from __future__ import annotations

import os
from typing import Any


class Nvml:
    """A thin reader over pynvml; `Nvml.open()` is None where there is no NVML (no driver, no GPU)."""

    def __init__(self, nvml: Any) -> None:
        self._n = nvml
        self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]

    @classmethod
    def open(cls) -> Nvml | None:
        """NVML initialised, or None when the library, driver or GPUs are absent."""
        try:
            import pynvml
        except ImportError:
            return None
        try:
            pynvml.nvmlInit()
            reader = cls(pynvml)
        except pynvml.NVMLError:
            return None
        return reader if reader._handles else None

    def close(self) -> None:
        """Release NVML."""
        self._n.nvmlShutdown()

    @staticmethod
    def _text(v: Any) -> str:
        return v.decode() if isinstance(v, bytes) else str(v)

    def devices(self) -> list[dict[str, Any]]:
        """Static facts per GPU: model, driver, memory, PCI bus id, NUMA-relevant ids."""
        driver = self._text(self._n.nvmlSystemGetDriverVersion())
        out = []
        for i, h in enumerate(self._handles):
            mem = self._n.nvmlDeviceGetMemoryInfo(h)
            out.append({
                "index": i,
                "name": self._text(self._n.nvmlDeviceGetName(h)),
                "driver": driver,
                "memory_total_bytes": int(mem.total),
                "pci_bus_id": self._text(self._n.nvmlDeviceGetPciInfo(h).busId),
            })  # fmt: skip
        return out

    def sample(self, pid: int | None = None) -> list[dict[str, Any]]:
        """Per GPU: memory used (device and this process), utilisation %."""
        pid = os.getpid() if pid is None else pid
        out = []
        for i, h in enumerate(self._handles):
            mem = self._n.nvmlDeviceGetMemoryInfo(h)
            util = self._n.nvmlDeviceGetUtilizationRates(h)
            mine = 0
            for proc in self._n.nvmlDeviceGetComputeRunningProcesses(h):
                if proc.pid == pid and proc.usedGpuMemory is not None:
                    mine += int(proc.usedGpuMemory)
            out.append({
                "index": i,
                "memory_used_bytes": int(mem.used),
                "process_memory_bytes": mine,
                "util_percent": float(util.gpu),
            })  # fmt: skip
        return out
