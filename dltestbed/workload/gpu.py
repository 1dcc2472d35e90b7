"""GPU facts and samples through NVML (package nvidia-ml-py), when a GPU and driver are present."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from dltestbed.config import GPU_UUID
from dltestbed.workload.xids import XidWatch

# NVML's enumerations, as nvml.h numbers them (pynvml's names in comments)
CLOCK_SM, CLOCK_MEM = 1, 2  # NVML_CLOCK_SM, NVML_CLOCK_MEM
TEMPERATURE_GPU = 0  # NVML_TEMPERATURE_GPU
PCIE_TX, PCIE_RX = 0, 1  # NVML_PCIE_UTIL_TX_BYTES, NVML_PCIE_UTIL_RX_BYTES
ECC_CORRECTED, ECC_UNCORRECTED = 0, 1  # NVML_MEMORY_ERROR_TYPE_*
ECC_VOLATILE = 0  # NVML_VOLATILE_ECC: since the driver loaded
RETIRED_SBE, RETIRED_DBE = 0, 1  # NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, _DOUBLE_BIT_ECC_ERROR
ERROR_FUNCTION_NOT_FOUND = 13  # NVML_ERROR_FUNCTION_NOT_FOUND: pynvml's name for a call this driver's NVML lacks
MEMORY_V2 = 0x02000028  # nvmlMemory_v2: used memory without what the driver reserves (R510 and later)


def numa_node(pci_bus_id: str, sysfs: Path = Path("/sys/bus/pci/devices")) -> int | None:
    """The NUMA node the kernel reports for a PCI device (NVML's bus id, "00000000:3B:00.0"), or None where
    it is not reported: -1 (a VM, or firmware that does not say) is unknown, never node 0."""
    try:
        text = (sysfs / pci_bus_id[-12:].lower() / "numa_node").read_text().strip()
    except OSError:
        return None
    return int(text) if text.lstrip("-").isdigit() and int(text) >= 0 else None


def visible_uuids(cuda_visible: str | None) -> list[str]:
    """The UUIDs CUDA_VISIBLE_DEVICES names where it names GPUs by UUID; [] where it is unset, empty or names
    indices (NVML's order may differ from CUDA's: those are matched by PCI bus id, `in_cuda_order`)."""
    names = [x.strip() for x in (cuda_visible or "").split(",") if x.strip()]
    return names if names and all(GPU_UUID.fullmatch(x) for x in names) else []


def bus_key(bus_id: str) -> str:
    """A PCI bus id as one key: NVML's "00000000:3B:00.0" and CUDA's "0000:3b:00.0" name the same device."""
    domain, _, rest = bus_id.strip().strip("\0").lower().partition(":")
    return f"{int(domain or '0', 16):04x}:{rest}"


def in_cuda_order(devices: list[dict[str, Any]], cuda_bus_ids: list[str]) -> list[dict[str, Any]]:
    """NVML's facts (Nvml.devices) of each CUDA device, in CUDA's order: TensorFlow's /GPU:i is CUDA device i.
    Matched by PCI bus id: NVML's order "may not correlate" with CUDA's (NVML's words), and CUDA's own follows
    CUDA_VISIBLE_DEVICES, which Slurm sets. A CUDA device NVML does not list (denied it) gets {}. Pure."""
    by_bus = {bus_key(str(d["pci_bus_id"])): d for d in devices if d.get("pci_bus_id")}
    return [by_bus.get(bus_key(b), {}) for b in cuda_bus_ids]


def _mode(value: Any) -> str | None:
    """An NVML (current, pending) enable state as words."""
    current = value[0] if isinstance(value, list | tuple) else value
    return None if current is None else ("enabled" if int(current) else "disabled")


class Nvml:
    """A thin reader over pynvml; `Nvml.open()` is None where there is no NVML (no driver, no GPU)."""

    def __init__(self, nvml: Any, only: Collection[str] = ()) -> None:
        """only: the UUIDs of the GPUs this run may use (its CUDA_VISIBLE_DEVICES, one of --gpus per-gpu); the
        others, which its neighbours use, are neither described nor sampled. Empty: every GPU it may open."""
        self._n = nvml
        # (NVML index, handle) of each GPU this process may open. nvmlDeviceGetCount counts them all, also those
        # a device cgroup (Slurm's, a container's) denies it: NO_PERMISSION for those, which are not this run's
        self._handles: list[tuple[int, Any]] = []
        self.denied: dict[int, str] = {}  # NVML index → why it cannot be opened from here
        for i in range(nvml.nvmlDeviceGetCount()):
            try:
                h = nvml.nvmlDeviceGetHandleByIndex(i)
            except nvml.NVMLError as exc:
                self.denied[i] = str(exc) or type(exc).__name__
                continue
            if not only or self._text(self._try(nvml.nvmlDeviceGetUUID, h) or "") in only:
                self._handles.append((i, h))

    @classmethod
    def open(cls) -> Nvml | None:
        """NVML initialised, or None when the library, driver or GPUs are absent. Where CUDA_VISIBLE_DEVICES
        names GPUs by UUID (a run of --gpus per-gpu), only those (`visible_uuids`)."""
        try:
            # NVML exists only where a GPU's driver does
            import pynvml
        except ImportError:
            return None
        try:
            pynvml.nvmlInit()
            reader = cls(pynvml, visible_uuids(os.environ.get("CUDA_VISIBLE_DEVICES")))
        except pynvml.NVMLError:
            return None
        return reader if reader._handles else None

    def close(self) -> None:
        """Release NVML."""
        self._n.nvmlShutdown()

    @staticmethod
    def _text(v: Any) -> str:
        return v.decode() if isinstance(v, bytes) else str(v)

    def _try(self, call: Callable[..., Any], *args: Any, unseen: dict[str, str] | None = None, what: str = "") -> Any:
        """An NVML call's value, or None where this GPU or driver does not support it (NVMLError), which
        `unseen` then keeps as `what` → NVML's words. Anything else (a function this NVML lacks) raises."""
        try:
            return call(*args)
        except self._n.NVMLError as exc:
            if unseen is not None:
                unseen.setdefault(what, str(exc) or type(exc).__name__)
            return None

    def _memory(self, h: Any) -> tuple[int, int] | None:
        """(total, used) bytes: NVML's v2 memory info where the driver has it (v1 counts the memory the driver
        reserves as used: ~0.5 GB on an idle H100), else v1; None where neither answers (a MIG-enabled GPU)."""
        try:
            mem = self._n.nvmlDeviceGetMemoryInfo(h, version=MEMORY_V2)
        except (self._n.NVMLError, TypeError):  # a driver before R510, or a pynvml without the argument
            mem = self._try(self._n.nvmlDeviceGetMemoryInfo, h)
        return None if mem is None else (int(mem.total), int(mem.used))

    def _reasons(self, h: Any, unseen: dict[str, str] | None = None) -> int | None:
        """The clock-event (throttle) reasons as NVML's bit mask. Drivers before R535 lack the call of that name:
        their nvmlDeviceGetCurrentClocksThrottleReasons answers with the same bits. None (and `unseen` says
        why) where neither answers: a slowdown then cannot be ruled out."""
        n = self._n
        try:
            return int(n.nvmlDeviceGetCurrentClocksEventReasons(h))
        except n.NVMLError as exc:
            if getattr(exc, "value", None) != ERROR_FUNCTION_NOT_FOUND:
                if unseen is not None:
                    unseen.setdefault("clock-event reasons", str(exc) or type(exc).__name__)
                return None
        value = self._try(n.nvmlDeviceGetCurrentClocksThrottleReasons, h, unseen=unseen, what="clock-event reasons")
        return None if value is None else int(value)

    def devices(self) -> list[dict[str, Any]]:
        """Static facts per GPU: model, driver, memory, PCI bus id; and what an acceptance test checks: UUID,
        VBIOS, PCIe generation and width (current and max: a link trained down is a classic fault), the
        enforced power limit, ECC and MIG mode, application and max clocks, compute capability and the NUMA
        node the kernel reports (None: not reported). A fact the GPU does not report is None."""
        n, t = self._n, self._try
        driver = self._text(n.nvmlSystemGetDriverVersion())
        cuda = t(n.nvmlSystemGetCudaDriverVersion)
        out = []
        for i, h in self._handles:
            mem = self._memory(h)
            bus = self._text(n.nvmlDeviceGetPciInfo(h).busId)
            power = t(n.nvmlDeviceGetEnforcedPowerLimit, h)
            cc = t(n.nvmlDeviceGetCudaComputeCapability, h)
            out.append(
                {
                    "index": i,
                    "name": self._text(n.nvmlDeviceGetName(h)),
                    "driver": driver,
                    "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
                    "memory_total_bytes": mem[0] if mem else None,
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
        for i, h in self._handles:
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
        """Per GPU: memory used (device and this process), utilisation % (SM and memory), and what explains a
        slow GPU (SuperBench's monitor and DCGM read the same): SM and memory clocks, power draw against the
        enforced limit, temperature, the clock-event (throttle) reasons as NVML's bit mask, the PCIe link's
        current generation and width, PCIe TX/RX throughput. A value this GPU does not report is left out: on a
        MIG-enabled GPU utilisation, and without the privilege to list processes (a container) this process's
        memory."""
        pid = os.getpid() if pid is None else pid
        n, t = self._n, self._try
        out = []
        for i, h in self._handles:
            mem = self._memory(h)
            util = t(n.nvmlDeviceGetUtilizationRates, h)
            procs = t(n.nvmlDeviceGetComputeRunningProcesses, h)
            mine = None
            if procs is not None:
                mine = sum(int(p.usedGpuMemory) for p in procs if p.pid == pid and p.usedGpuMemory is not None)
            power, limit = t(n.nvmlDeviceGetPowerUsage, h), t(n.nvmlDeviceGetEnforcedPowerLimit, h)
            tx, rx = t(n.nvmlDeviceGetPcieThroughput, h, PCIE_TX), t(n.nvmlDeviceGetPcieThroughput, h, PCIE_RX)
            seen = {
                "index": i,
                "memory_used_bytes": mem[1] if mem else None,
                "process_memory_bytes": mine,
                "util_percent": float(util.gpu) if util is not None else None,
                "mem_util_percent": float(util.memory) if util is not None else None,
                "sm_clock_mhz": t(n.nvmlDeviceGetClockInfo, h, CLOCK_SM),
                "mem_clock_mhz": t(n.nvmlDeviceGetClockInfo, h, CLOCK_MEM),
                "power_watts": power / 1000 if power is not None else None,
                "power_limit_watts": limit / 1000 if limit is not None else None,
                "temperature_c": t(n.nvmlDeviceGetTemperature, h, TEMPERATURE_GPU),
                "clock_reasons": self._reasons(h),
                "pcie_gen": t(n.nvmlDeviceGetCurrPcieLinkGeneration, h),
                "pcie_width": t(n.nvmlDeviceGetCurrPcieLinkWidth, h),
                "pcie_tx_bytes_per_s": tx * 1024 if tx is not None else None,  # NVML: KB/s over 20 ms
                "pcie_rx_bytes_per_s": rx * 1024 if rx is not None else None,
            }
            out.append({k: v for k, v in seen.items() if v is not None})
        return out

    def health(self) -> tuple[list[dict[str, Any]], list[str]]:
        """What a health check compares before and after a run, per GPU: volatile corrected and uncorrected
        ECC counts, retired pages (single- and double-bit, pending), remapped rows (correctable,
        uncorrectable, pending, failed), the PCIe link (current and max generation and width), PCIe replays,
        the enforced power limit and the clock-event reasons now. And what NVML cannot say from here
        ("ECC counts: Not Supported"): a GPU without ECC, or a counter a container or VM does not see. Retired
        pages only where remapped rows are not reported: row remapping replaced page retirement from Ampere on,
        where NVML says retired pages are not supported."""
        n = self._n
        unseen: dict[str, str] = {}

        def ask(what: str, call: Callable[..., Any], *args: Any) -> Any:
            return self._try(call, *args, unseen=unseen, what=what)

        out = []
        for i, h in self._handles:
            rows = self._try(n.nvmlDeviceGetRemappedRows, h)
            limit = ask("power limit", n.nvmlDeviceGetEnforcedPowerLimit, h)
            pages = rows is None  # before Ampere: page retirement; from Ampere on: row remapping
            sbe = ask("retired pages", n.nvmlDeviceGetRetiredPages, h, RETIRED_SBE) if pages else None
            dbe = ask("retired pages", n.nvmlDeviceGetRetiredPages, h, RETIRED_DBE) if pages else None
            pending = ask("retired pages", n.nvmlDeviceGetRetiredPagesPendingStatus, h) if pages else None
            seen = {
                "index": i,
                "uuid": self._opt_text(ask("UUID", n.nvmlDeviceGetUUID, h)),
                "ecc_corrected": ask("ECC counts", n.nvmlDeviceGetTotalEccErrors, h, ECC_CORRECTED, ECC_VOLATILE),
                "ecc_uncorrected": ask("ECC counts", n.nvmlDeviceGetTotalEccErrors, h, ECC_UNCORRECTED, ECC_VOLATILE),
                "retired_pages_sbe": len(sbe) if sbe is not None else None,
                "retired_pages_dbe": len(dbe) if dbe is not None else None,
                "retired_pages_pending": pending,
                "remapped_rows_correctable": rows[0] if rows else None,
                "remapped_rows_uncorrectable": rows[1] if rows else None,
                "remapped_rows_pending": rows[2] if rows else None,
                "remapped_rows_failed": rows[3] if rows else None,
                "pcie_gen": ask("PCIe link", n.nvmlDeviceGetCurrPcieLinkGeneration, h),
                "pcie_gen_max": ask("PCIe link", n.nvmlDeviceGetMaxPcieLinkGeneration, h),
                "pcie_width": ask("PCIe link", n.nvmlDeviceGetCurrPcieLinkWidth, h),
                "pcie_width_max": ask("PCIe link", n.nvmlDeviceGetMaxPcieLinkWidth, h),
                "pcie_replays": ask("PCIe replays", n.nvmlDeviceGetPcieReplayCounter, h),
                "power_limit_watts": limit / 1000 if limit is not None else None,
                "clock_reasons": self._reasons(h, unseen),
            }
            out.append({k: v for k, v in seen.items() if v is not None})
        return out, [f"{what}: {why}" for what, why in unseen.items()]

    def watch_xids(self) -> XidWatch:
        """A watch on XID events (NVML's event API) of every GPU, started: `stop()` gives what it saw."""
        return XidWatch(self._n, self._handles)


def _command(pid: int, proc: Path = Path("/proc")) -> str | None:
    """A process's command line, shortened to 80 characters, or None where it cannot be read."""
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    text = " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)
    return (text[:77] + "...") if len(text) > 80 else text or None
