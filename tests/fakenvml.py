"""A fake pynvml that serves the GPUs of a captured `nvidia-smi -q` (no GPU can exist here). It fails closed:
an NVML function it does not implement raises AttributeError, so code that starts calling a new NVML
function fails its tests until the fake serves it from captured data."""

from __future__ import annotations

import re
import time
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
    found = re.match(r"-?\d+", text)
    if found is None:
        raise ValueError(f"not a number: {text!r}")
    return int(found.group())


def set_value(smi_q: str, path: str, value: str, gpu: int = 0) -> str:
    """The `nvidia-smi -q` text with one value changed: `path` names it by its sections, "ECC Errors/Volatile/
    DRAM Uncorrectable", under the `gpu`-th GPU. How the unhealthy cases are built from a healthy capture."""
    lines = smi_q.splitlines(keepends=True)
    want = path.split("/")
    gpus = [i for i, line in enumerate(lines) if line.startswith("GPU ")]
    stack: list[tuple[int, str]] = []
    for i in range(gpus[gpu] + 1, gpus[gpu + 1] if gpu + 1 < len(gpus) else len(lines)):
        line = lines[i]
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        key, sep, _ = line.strip().partition(" : ")
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if sep and [k for _, k in stack] + [key.strip()] == want:
            head = line[: line.index(" : ") + 3]
            lines[i] = f"{head}{value}\n"
            return "".join(lines)
        if not sep:
            stack.append((indent, line.strip()))
    raise KeyError(f"no {path!r} in the nvidia-smi -q text")


# nvidia-smi's names of the clock-event reasons and NVML's bits for them (nvmlClocksEventReason*)
REASON_BITS = {
    "Idle": 0x1,
    "Applications Clocks Setting": 0x2,
    "SW Power Cap": 0x4,
    "HW Slowdown": 0x8,
    "Sync Boost": 0x10,
    "SW Thermal Slowdown": 0x20,
    "HW Thermal Slowdown": 0x40,
    "HW Power Brake Slowdown": 0x80,
    "Display Clock Setting": 0x100,
}
NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NO_PERMISSION, NVML_ERROR_TIMEOUT, NVML_ERROR_FUNCTION_NOT_FOUND = 3, 4, 10, 13
MEMORY_V2 = 0x02000028  # nvmlMemory_v2


class _Error(Exception):
    """pynvml's NVMLError: its `value` is NVML's return code."""

    def __init__(self, value: int, text: str = "") -> None:
        super().__init__(text or f"NVML error {value}")
        self.value = value


class FakeNvml(types.ModuleType):
    """pynvml for the GPUs of an `nvidia-smi -q` text; `processes` are (index, pid, bytes) compute processes;
    `util` the GPU utilisation % (None: the text's); `xids` the (index, XID) events its event set delivers,
    one per wait, once; `events=False`: registering for events is not supported (a container, a VM).
    As NVML answers in places no GPU here can show: `denied`, the indices a device cgroup keeps this process
    from (NO_PERMISSION on opening them: Slurm's or a container's); `mig`, MIG enabled on every GPU
    (utilisation not supported, listing processes not allowed); `driver_branch`, an older driver: before 535 no
    nvmlDeviceGetCurrentClocksEventReasons (its ...ThrottleReasons answers the same bits), before 510 no v2
    memory info, before 400 no throttle reasons at all."""

    NVML_ERROR_TIMEOUT = NVML_ERROR_TIMEOUT

    def __init__(
        self,
        smi_q: str,
        processes: tuple[tuple[int, int, int | None], ...] = (),
        util: int | None = None,
        xids: tuple[tuple[int, int], ...] = (),
        events: bool = True,
        denied: tuple[int, ...] = (),
        mig: bool = False,
        driver_branch: int = 580,
    ) -> None:
        super().__init__("pynvml")
        doc = parse_smi_q(smi_q)
        self.driver = doc["Driver Version"]
        self.cuda = doc["CUDA Version"]
        self.gpus = [v for k, v in doc.items() if k.startswith("GPU ") and isinstance(v, dict)]
        self.procs = processes
        self.util = util
        self.xids = list(xids)
        self.events = events
        self.denied = denied
        self.mig = mig
        self.driver_branch = driver_branch
        self.event_sets: list[list[int]] = []  # the handles registered on each set made (freed: emptied)
        self.NVMLError = _Error
        self.NVMLError_NotSupported = type("NVMLError_NotSupported", (_Error,), {})

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"fake NVML does not implement {name}")

    def _gpu(self, h: int) -> dict[str, Any]:
        return self.gpus[h]

    def _value(self, h: int, *path: str) -> str:
        node: Any = self._gpu(h)
        for p in path:
            node = node[p]
        if node in ("N/A", "Requested functionality has been deprecated"):
            raise self.NVMLError_NotSupported(NVML_ERROR_NOT_SUPPORTED, "Not Supported")
        return str(node)

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        if not 0 <= i < len(self.gpus):
            raise self.NVMLError("invalid index")
        if i in self.denied:
            raise self.NVMLError(NVML_ERROR_NO_PERMISSION, "Insufficient Permissions")
        return i

    def _since(self, branch: int) -> None:
        """A call this driver's NVML lacks: pynvml raises FunctionNotFound when it looks the symbol up."""
        if self.driver_branch < branch:
            raise self.NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND, "Function Not Found")

    def nvmlSystemGetDriverVersion(self) -> str:
        return str(self.driver)

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        major, minor = self.cuda.split(".")
        return int(major) * 1000 + int(minor) * 10

    def nvmlDeviceGetName(self, h: int) -> str:
        return self._value(h, "Product Name")

    def nvmlDeviceGetMemoryInfo(self, h: int, version: int | None = None) -> Any:
        """v1 counts what the driver reserves as used; v2 (`version=nvmlMemory_v2`, R510 on) says it apart."""
        fb = self._gpu(h)["FB Memory Usage"]
        total, used, reserved = (_number(fb[k]) << 20 for k in ("Total", "Used", "Reserved"))
        if version is None:
            return types.SimpleNamespace(total=total, used=used + reserved)
        self._since(510)
        assert version == MEMORY_V2, version
        return types.SimpleNamespace(total=total, used=used, reserved=reserved)

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
            raise self.NVMLError_NotSupported(NVML_ERROR_NOT_SUPPORTED, "Not Supported")
        return [int(mig["Current"] == "Enabled"), int(mig["Pending"] == "Enabled")]

    def nvmlDeviceGetApplicationsClock(self, h: int, clock: int) -> int:
        return _number(self._value(h, "Applications Clocks", {1: "Graphics", 2: "Memory"}[clock]))

    def nvmlDeviceGetMaxClockInfo(self, h: int, clock: int) -> int:
        return _number(self._value(h, "Max Clocks", {1: "SM", 2: "Memory"}[clock]))

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        if self.mig:
            raise self.NVMLError_NotSupported(NVML_ERROR_NOT_SUPPORTED, "Not Supported")
        gpu = self.util if self.util is not None else _number(self._value(h, "Utilization", "GPU"))
        return types.SimpleNamespace(gpu=gpu, memory=_number(self._value(h, "Utilization", "Memory")))

    def nvmlDeviceGetClockInfo(self, h: int, clock: int) -> int:
        return _number(self._value(h, "Clocks", {1: "SM", 2: "Memory"}[clock]))

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return round(float(self._value(h, "GPU Power Readings", "Instantaneous Power Draw").split()[0]) * 1000)

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        if sensor != 0:
            raise self.NVMLError(2, "Invalid Argument")
        return _number(self._value(h, "Temperature", "GPU Current Temp"))

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        self._since(535)
        reasons = self._gpu(h)["Clocks Event Reasons"]
        return sum(bit for name, bit in REASON_BITS.items() if reasons.get(name) == "Active")

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: int) -> int:
        """The same bits under their older name (deprecated from R535, still served)."""
        self._since(400)
        reasons = self._gpu(h)["Clocks Event Reasons"]
        return sum(bit for name, bit in REASON_BITS.items() if reasons.get(name) == "Active")

    def nvmlDeviceGetPcieThroughput(self, h: int, counter: int) -> int:
        return _number(self._value(h, "PCI", {0: "Tx Throughput", 1: "Rx Throughput"}[counter]))

    def nvmlDeviceGetPcieReplayCounter(self, h: int) -> int:
        return _number(self._value(h, "PCI", "Replays Since Reset"))

    def nvmlDeviceGetTotalEccErrors(self, h: int, error_type: int, counter_type: int) -> int:
        if self._gpu(h)["ECC Mode"]["Current"] != "Enabled":
            raise self.NVMLError_NotSupported(NVML_ERROR_NOT_SUPPORTED, "Not Supported")
        errors = self._gpu(h)["ECC Errors"][{0: "Volatile", 1: "Aggregate"}[counter_type]]
        if error_type == 0:
            names = ("SRAM Correctable", "DRAM Correctable")
        else:
            names = ("SRAM Uncorrectable Parity", "SRAM Uncorrectable SEC-DED", "DRAM Uncorrectable")
        return sum(_number(errors[n]) for n in names)

    def nvmlDeviceGetRetiredPages(self, h: int, cause: int) -> list[int]:
        count = _number(self._value(h, "Retired Pages", {0: "Single Bit ECC", 1: "Double Bit ECC"}[cause]))
        return [0x1000 * (i + 1) for i in range(count)]

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h: int) -> int:
        return int(self._value(h, "Retired Pages", "Pending Page Blacklist") == "Yes")

    def nvmlDeviceGetRemappedRows(self, h: int) -> tuple[int, int, int, int]:
        rows = self._gpu(h)["Remapped Rows"]
        self._value(h, "Remapped Rows", "Correctable Error")  # N/A before Ampere: not supported
        return (
            _number(rows["Correctable Error"]),
            _number(rows["Uncorrectable Error"]),
            int(rows["Pending"] == "Yes"),
            int(rows["Remapping Failure Occurred"] == "Yes"),
        )

    def nvmlEventSetCreate(self) -> int:
        self.event_sets.append([])
        return len(self.event_sets) - 1

    def nvmlDeviceRegisterEvents(self, h: int, event_types: int, event_set: int) -> None:
        if not self.events:
            raise self.NVMLError_NotSupported(NVML_ERROR_NOT_SUPPORTED, "Not Supported")
        self.event_sets[event_set].append(h)

    def nvmlEventSetWait_v2(self, event_set: int, timeout_ms: int) -> Any:
        if self.xids:
            index, xid = self.xids.pop(0)
            return types.SimpleNamespace(device=index, eventType=0x8, eventData=xid)
        time.sleep(timeout_ms / 1000)
        raise self.NVMLError(NVML_ERROR_TIMEOUT, "Timeout")

    def nvmlEventSetFree(self, event_set: int) -> None:
        self.event_sets[event_set] = []

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:
        if self.mig:
            raise self.NVMLError(NVML_ERROR_NO_PERMISSION, "Insufficient Permissions")
        return [types.SimpleNamespace(pid=pid, usedGpuMemory=used) for i, pid, used in self.procs if i == h]


def several(smi_q: str, count: int) -> str:
    """The captured node's one GPU as `count` GPUs, each on its own PCI bus (bus 0x06 + i) with its own UUID:
    a node of several of the same board."""
    head, sep, block = smi_q.partition("\nGPU ")
    bus = block.split("\n", 1)[0].strip()
    uuid = re.search(r"GPU UUID\s+: (\S+)", block)
    assert uuid is not None
    gpus = []
    for i in range(count):
        other = f"{bus[:-4]}{6 + i:02X}.0"
        gpus.append(
            (sep + block).replace(bus, other).replace(uuid.group(1), f"{uuid.group(1)[:-2]}{i:02d}").rstrip("\n")
        )
    head = re.sub(r"(Attached GPUs\s+: )\d+", rf"\g<1>{count}", head)
    return head + "".join(gpus) + "\n"


def h100_text() -> str:
    """The `nvidia-smi -q` of the idle H100 captured on a real machine."""
    return (H100 / "nvidia-smi-q.txt").read_text()


def busy(smi_q: str, sm_mhz: int = 1980, watts: float = 690.0, temp: int = 71, util: int = 100) -> str:
    """The captured text as the same GPU reads under load: its clocks, power, temperature and utilisation set,
    the Idle reason cleared."""
    for path, value in (
        ("Clocks/SM", f"{sm_mhz} MHz"),
        ("Clocks/Graphics", f"{sm_mhz} MHz"),
        ("GPU Power Readings/Instantaneous Power Draw", f"{watts:.2f} W"),
        ("Temperature/GPU Current Temp", f"{temp} C"),
        ("Utilization/GPU", f"{util} %"),
        ("Clocks Event Reasons/Idle", "Not Active"),
    ):
        smi_q = set_value(smi_q, path, value)
    return smi_q


def h100(processes: tuple[tuple[int, int, int | None], ...] = (), util: int | None = 0, **kw: Any) -> FakeNvml:
    """The fake serving the H100 captured in tests/data/gpu/h100/nvidia-smi-q.txt."""
    return FakeNvml(h100_text(), processes, util, **kw)
