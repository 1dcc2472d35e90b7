"""A fake pynvml that serves the GPUs of a captured `nvidia-smi -q` (no GPU can exist here). It fails closed:
an NVML function it does not implement raises AttributeError, so code that starts calling a new NVML
function fails its tests until the fake serves it from captured data."""

from __future__ import annotations

import re
import types
from pathlib import Path
from typing import Any

H100 = Path(__file__).parent / "data" / "gpu" / "h100"
# Compute capability by the architecture nvidia-smi names (NVML asks the device; nvidia-smi -q does not print it).
ARCH_CC = {
    "Volta": (7, 0),
    "Turing": (7, 5),
    "Ampere": (8, 0),
    "Ada Lovelace": (8, 9),
    "Hopper": (9, 0),
    "Blackwell": (10, 0),
}


def parse_smi_q(text: str) -> dict[str, Any]:
    """`nvidia-smi -q` as nested dicts by indentation: "Key : Value" lines are values, a line without a
    value opens a section; each GPU is under its "GPU <bus id>" header."""
    root: dict[str, Any] = {}
    stack: list[tuple[int, dict[str, Any]]] = [(-1, root)]
    for line in text.splitlines():
        if not line.strip() or line.startswith("="):
            continue
        indent = len(line) - len(line.lstrip())
        key, sep, value = line.strip().partition(" : ")
        while stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        if sep:
            parent[key.strip()] = value.strip()
        else:
            child: dict[str, Any] = {}
            parent[line.strip()] = child
            stack.append((indent, child))
    return root


def _number(text: str) -> int:
    return int(re.match(r"-?\d+", text).group())  # type: ignore[union-attr]


class FakeNvml(types.ModuleType):
    """pynvml for the GPUs of an `nvidia-smi -q` text; `processes` are (index, pid, bytes) compute processes."""

    def __init__(self, smi_q: str, processes: tuple[tuple[int, int, int | None], ...] = (), util: int = 0) -> None:
        super().__init__("pynvml")
        doc = parse_smi_q(smi_q)
        self.driver = doc["Driver Version"]
        self.cuda = doc["CUDA Version"]
        self.gpus = [v for k, v in doc.items() if k.startswith("GPU ") and isinstance(v, dict)]
        self.procs = processes
        self.util = util
        self.NVMLError = type("NVMLError", (Exception,), {})
        self.NVMLError_NotSupported = type("NVMLError_NotSupported", (self.NVMLError,), {})

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"fake NVML does not implement {name}")

    def _gpu(self, h: int) -> dict[str, Any]:
        return self.gpus[h]

    def _value(self, h: int, *path: str) -> str:
        node: Any = self._gpu(h)
        for p in path:
            node = node[p]
        if node in ("N/A", "Requested functionality has been deprecated"):
            raise self.NVMLError_NotSupported(f"{' / '.join(path)}: N/A")
        return str(node)

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        if not 0 <= i < len(self.gpus):
            raise self.NVMLError("invalid index")
        return i

    def nvmlSystemGetDriverVersion(self) -> str:
        return str(self.driver)

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        major, minor = self.cuda.split(".")
        return int(major) * 1000 + int(minor) * 10

    def nvmlDeviceGetName(self, h: int) -> str:
        return self._value(h, "Product Name")

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        fb = self._gpu(h)["FB Memory Usage"]
        return types.SimpleNamespace(total=_number(fb["Total"]) << 20, used=_number(fb["Used"]) << 20)

    def nvmlDeviceGetPciInfo(self, h: int) -> Any:
        return types.SimpleNamespace(busId=self._value(h, "PCI", "Bus Id").encode())

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return self._value(h, "GPU UUID")

    def nvmlDeviceGetVbiosVersion(self, h: int) -> str:
        return self._value(h, "VBIOS Version")

    def nvmlDeviceGetCudaComputeCapability(self, h: int) -> tuple[int, int]:
        return ARCH_CC[self._value(h, "Product Architecture")]

    def _link(self, h: int, what: str, which: str) -> int:
        return _number(self._value(h, "PCI", "GPU Link Info", what, which))

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: int) -> int:
        return self._link(h, "PCIe Generation", "Current")

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: int) -> int:
        return self._link(h, "PCIe Generation", "Max")

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: int) -> int:
        return self._link(h, "Link Width", "Current")

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: int) -> int:
        return self._link(h, "Link Width", "Max")

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return round(float(self._value(h, "GPU Power Readings", "Current Power Limit").split()[0]) * 1000)

    def nvmlDeviceGetEccMode(self, h: int) -> list[int]:
        ecc = self._gpu(h)["ECC Mode"]
        return [int(ecc["Current"] == "Enabled"), int(ecc["Pending"] == "Enabled")]

    def nvmlDeviceGetMigMode(self, h: int) -> list[int]:
        mig = self._gpu(h)["MIG Mode"]
        if mig["Current"] == "N/A":
            raise self.NVMLError_NotSupported("MIG: N/A")
        return [int(mig["Current"] == "Enabled"), int(mig["Pending"] == "Enabled")]

    def nvmlDeviceGetApplicationsClock(self, h: int, clock: int) -> int:
        return _number(self._value(h, "Applications Clocks", {1: "Graphics", 2: "Memory"}[clock]))

    def nvmlDeviceGetMaxClockInfo(self, h: int, clock: int) -> int:
        return _number(self._value(h, "Max Clocks", {1: "SM", 2: "Memory"}[clock]))

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        return types.SimpleNamespace(gpu=self.util)

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:
        return [types.SimpleNamespace(pid=pid, usedGpuMemory=used) for i, pid, used in self.procs if i == h]


def h100(processes: tuple[tuple[int, int, int | None], ...] = (), util: int = 0) -> FakeNvml:
    """The fake serving the H100 captured in tests/data/gpu/h100/nvidia-smi-q.txt."""
    return FakeNvml((H100 / "nvidia-smi-q.txt").read_text(), processes, util)
