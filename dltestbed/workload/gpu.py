"""GPU facts and samples through NVML (package nvidia-ml-py), when a GPU and driver are present."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

# NVML's clock domains (nvmlClockType_t)
CLOCK_SM, CLOCK_MEM = 1, 2


def numa_node(pci_bus_id: str, sysfs: Path = Path("/sys/bus/pci/devices")) -> int | None:
    """The NUMA node the kernel reports for a PCI device (NVML's bus id, "00000000:3B:00.0"), or None where
    it is not reported: -1 (a VM, or firmware that does not say) is unknown, never node 0."""
    try:
        text = (sysfs / pci_bus_id[-12:].lower() / "numa_node").read_text().strip()
    except OSError:
        return None
    return int(text) if text.lstrip("-").isdigit() and int(text) >= 0 else None


def _mode(value: Any) -> str | None:
    """An NVML (current, pending) enable state as words."""
    current = value[0] if isinstance(value, list | tuple) else value
    return None if current is None else ("enabled" if int(current) else "disabled")


class Nvml:
    """A thin reader over pynvml; `Nvml.open()` is None where there is no NVML (no driver, no GPU)."""

    def __init__(self, nvml: Any) -> None:
        self._n = nvml
        self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]

    @classmethod
    def open(cls) -> Nvml | None:
        """NVML initialised, or None when the library, driver or GPUs are absent."""
        try:
            # NVML exists only where a GPU's driver does
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

    def _try(self, call: Callable[..., Any], *args: Any) -> Any:
        """An NVML call's value, or None where this GPU or driver does not support it (NVMLError). Anything
        else (a function this NVML lacks) raises."""
        try:
            return call(*args)
        except self._n.NVMLError:
            return None

    def devices(self) -> list[dict[str, Any]]:
        """Static facts per GPU: model, driver, memory, PCI bus id; and what an acceptance test checks: UUID,
        VBIOS, PCIe generation and width (current and max: a link trained down is a classic fault), the
        enforced power limit, ECC and MIG mode, application and max clocks, compute capability and the NUMA
        node the kernel reports (None: not reported). A fact the GPU does not report is None."""
        n, t = self._n, self._try
        driver = self._text(n.nvmlSystemGetDriverVersion())
        cuda = t(n.nvmlSystemGetCudaDriverVersion)
        out = []
        for i, h in enumerate(self._handles):
            mem = n.nvmlDeviceGetMemoryInfo(h)
            bus = self._text(n.nvmlDeviceGetPciInfo(h).busId)
            power = t(n.nvmlDeviceGetEnforcedPowerLimit, h)
            cc = t(n.nvmlDeviceGetCudaComputeCapability, h)
            out.append(
                {
                    "index": i,
                    "name": self._text(n.nvmlDeviceGetName(h)),
                    "driver": driver,
                    "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
                    "memory_total_bytes": int(mem.total),
                    "pci_bus_id": bus,
                    "uuid": self._opt_text(t(n.nvmlDeviceGetUUID, h)),
                    "vbios": self._opt_text(t(n.nvmlDeviceGetVbiosVersion, h)),
                    "compute_capability": f"{cc[0]}.{cc[1]}" if cc else None,
                    "pcie_gen": t(n.nvmlDeviceGetCurrPcieLinkGeneration, h),
                    "pcie_gen_max": t(n.nvmlDeviceGetMaxPcieLinkGeneration, h),
                    "pcie_width": t(n.nvmlDeviceGetCurrPcieLinkWidth, h),
                    "pcie_width_max": t(n.nvmlDeviceGetMaxPcieLinkWidth, h),
                    "power_limit_watts": power / 1000 if power is not None else None,
                    "ecc": _mode(t(n.nvmlDeviceGetEccMode, h)),
                    "mig": _mode(t(n.nvmlDeviceGetMigMode, h)),
                    "sm_clock_app_mhz": t(n.nvmlDeviceGetApplicationsClock, h, CLOCK_SM),
                    "mem_clock_app_mhz": t(n.nvmlDeviceGetApplicationsClock, h, CLOCK_MEM),
                    "sm_clock_max_mhz": t(n.nvmlDeviceGetMaxClockInfo, h, CLOCK_SM),
                    "mem_clock_max_mhz": t(n.nvmlDeviceGetMaxClockInfo, h, CLOCK_MEM),
                    "numa_node": numa_node(bus),
                }
            )
        return out

    def _opt_text(self, v: Any) -> str | None:
        return None if v is None else self._text(v)

    def processes(self) -> list[dict[str, Any]]:
        """Every compute process on each GPU: its index, pid, the bytes it holds (None where NVML cannot
        say) and its command line where this process can see it (not across a container's pid namespace)."""
        out = []
        for i, h in enumerate(self._handles):
            for proc in self._try(self._n.nvmlDeviceGetComputeRunningProcesses, h) or []:
                used = proc.usedGpuMemory
                out.append(
                    {
                        "index": i,
                        "pid": int(proc.pid),
                        "used_bytes": int(used) if used is not None else None,
                        "command": _command(int(proc.pid)),
                    }
                )
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
            out.append(
                {
                    "index": i,
                    "memory_used_bytes": int(mem.used),
                    "process_memory_bytes": mine,
                    "util_percent": float(util.gpu),
                }
            )
        return out


def _command(pid: int, proc: Path = Path("/proc")) -> str | None:
    """A process's command line, shortened to 80 characters, or None where it cannot be read."""
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    text = " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)
    return (text[:77] + "...") if len(text) > 80 else text or None
