"""What every microbenchmark shares: a case and how it is timed (calibrated to a least call time, the largest
count over a job's workers), where it runs (`Where`: the framework, the GPUs in its order, the job), and the
limits it is compared with (a CPU's peak from its flags, a PCIe link's rate)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from dltestbed.workload.checked import Checked

CALL_SECONDS = {"small": 0.05, "full": 0.2}  # the least one timed call lasts


ALLREDUCE_BYTES = {"small": (4 << 10, 256 << 10, 4 << 20), "full": (4 << 10, 1 << 20, 64 << 20, 256 << 20)}


GATHER_BYTES = {"small": 4 << 20, "full": 64 << 20}  # net: each worker's share of an all-gather


MAX_REPS = 1 << 16


GEMM_N = {"small": (256, 512), "full": (2048, 8192)}  # full: n=8192 keeps an H100's tensor cores busy


MEMBW_BYTES = {"small": 64 << 20, "full": 1 << 30}


COPY_BYTES = {"small": 64 << 20, "full": 256 << 20}  # h2d / d2h


DEVICE_COPY_BYTES = {"small": 64 << 20, "full": 1 << 30}  # d2d: 1 GiB, as the boards' memory_copy_fraction


SCRATCH_BYTES = {"small": 32 << 20, "full": 1 << 30}  # disk without a dataset


RANDOM_READS = {"small": 256, "full": 4096}


BLOCK = 4096


# The heaviest convolution of each model at its native size, NHWC, batch 1: (name, H, W, Cin, Cout, k, stride).
# small: the same layer at a quarter of the height and width.
CONVS = (
    ("alexnet conv2 5x5 96-256", 28, 28, 96, 256, 5, 1),
    ("resnet50 conv2_x 3x3 64-64", 56, 56, 64, 64, 3, 1),
    ("inception3 stem 3x3 32-64", 147, 147, 32, 64, 3, 1),
)


class Skip(Exception):
    """This probe (or its `case`) cannot run on this target; the message says why. A probe raises it
    for the whole probe, or lists it among its cases for one case."""

    def __init__(self, reason: str, case: str = "") -> None:
        super().__init__(reason)
        self.case = case


@dataclass
class Case:
    """One measured thing: `work` units (FLOP, bytes) per rep; `call(reps)` does reps of it and blocks.
    unit "s": a latency, seconds per rep (lower is better); `derived`: more cases from the same calls,
    (name, work per rep) in the same unit (all-reduce bus bandwidth beside algorithm bandwidth)."""

    probe: str
    name: str
    unit: str
    work: float
    call: Callable[[int], None]
    derived: tuple[tuple[str, float], ...] = ()
    headline: bool = False  # the case the report's decomposition shows for its probe
    calibrate: bool = True  # False: one call is one pass over its data (disk)
    limit: float | None = None  # the physical limit in `unit`, where it can be read
    limit_source: str = ""
    note: str = ""
    cleanup: Callable[[], None] | None = field(default=None, repr=False)
    math: str = ""  # the arithmetic of a compute case (float32 means TF32 off), set before each of its calls
    check: Callable[[int], list[Checked]] | None = field(default=None, repr=False)  # its result checked, a seed
    revision: int = 1  # bumped when its code changes in a way that moves its figure: a board's value is of one

    def describe(self) -> list[dict[str, Any]]:
        """What the run's start event records of the case (and of each case derived from its calls)."""
        main = {
            "probe": self.probe,
            "case": self.name,
            "unit": self.unit,
            "headline": self.headline,
            "limit": self.limit,
            "limit_source": self.limit_source,
            "note": self.note,
            "math": self.math,
            "revision": self.revision,
        }
        return [
            main,
            *[main | {"case": name, "headline": False, "limit": None, "limit_source": ""} for name, _ in self.derived],
        ]

    def values(self, reps: int, seconds: float) -> list[tuple[str, str, float]]:
        """(case, unit, value) of one call of `reps` that took `seconds`."""
        if self.unit == "s":
            return [(self.name, "s", seconds / reps)]
        return [
            (self.name, self.unit, self.work * reps / seconds),
            *[(name, self.unit, work * reps / seconds) for name, work in self.derived],
        ]


Agree = Callable[[float], float]  # the largest of a value over a job's workers (the same answer on each)


def alone(value: float) -> float:
    return value


def calibrate(call: Callable[[int], None], seconds: float, agree: Agree = alone) -> int:
    """The reps that make one call last at least `seconds` (doubling from 1; at most MAX_REPS). A first
    untimed call traces and compiles. Workers of a job decide together (the slowest's time), so each
    makes the same calls and no collective waits for a partner that stopped."""
    call(1)
    reps = 1
    while reps < MAX_REPS:
        t0 = time.perf_counter()
        call(reps)
        if agree(time.perf_counter() - t0) >= seconds:
            return reps
        reps *= 2
    return reps


def timed(
    case: Case, scale: str, warmup: int, steps: int, agree: Agree = alone
) -> Iterator[tuple[int, str, list[tuple[str, str, float]], float]]:
    """(index, phase, [(case, unit, value)], seconds) for each call: warm-up first."""
    reps = calibrate(case.call, CALL_SECONDS[scale], agree) if case.calibrate else 1
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        case.call(reps)
        dt = time.perf_counter() - t0
        yield i, "warmup" if i < warmup else "timed", case.values(reps, dt), dt


def cpu_flops_per_cycle(flags: set[str]) -> tuple[int, str]:
    """float32 FLOP per cycle per core from the CPU's flags, assuming two FMA units (an upper bound)."""
    if "avx512f" in flags:
        return 64, "avx512f: 2 FMA units x 16 lanes x 2"
    if "avx2" in flags and "fma" in flags:
        return 32, "avx2+fma: 2 FMA units x 8 lanes x 2"
    if "avx" in flags or "avx2" in flags:
        return 16, "avx: 8-lane add + 8-lane multiply"
    return 8, "sse: 4-lane add + 4-lane multiply"


def parse_cpuinfo(text: str) -> tuple[set[str], float | None]:
    """The first CPU's flags and its clock in MHz from /proc/cpuinfo's text. Pure."""
    flags: set[str] = set()
    mhz = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "flags" and not flags:
            flags = set(value.split())
        elif key == "cpu MHz" and mhz is None:
            with contextlib.suppress(ValueError):
                mhz = float(value)
    return flags, mhz


def read_text(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError:
        return None


def cpu_peak(cpus: int) -> tuple[float | None, str]:
    """Nominal float32 FLOP/s of the CPUs this process may use: CPUs x max clock x FLOP/cycle, or None."""
    flags, mhz = parse_cpuinfo(read_text("/proc/cpuinfo") or "")
    max_khz = read_text("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    clock_src = "cpuinfo_max_freq"
    ghz = int(max_khz) / 1e6 if max_khz and max_khz.strip().isdigit() else None
    if ghz is None and mhz:
        ghz, clock_src = mhz / 1e3, "/proc/cpuinfo cpu MHz"
    if ghz is None or not flags:
        return None, "no clock or flags in /proc/cpuinfo"
    per_cycle, why = cpu_flops_per_cycle(flags)
    return cpus * ghz * 1e9 * per_cycle, f"{cpus} CPUs x {ghz:.2f} GHz ({clock_src}) x {per_cycle} FLOP/cycle ({why})"


def pcie_rate(gen: int | None, width: int | None) -> tuple[float | None, str]:
    """A PCIe link's payload rate per direction in B/s (transfer rate x lanes x line-code efficiency), and in
    words; None where the generation or width is not known. Packet headers take a few % more: a copy
    reaches ~85-90 % of it."""
    gts = {
        1: (2.5, 8 / 10),
        2: (5.0, 8 / 10),
        3: (8.0, 128 / 130),
        4: (16.0, 128 / 130),
        5: (32.0, 128 / 130),
        6: (64.0, 242 / 256),
    }
    if not gen or not width or gen not in gts:
        return None, "PCIe link not reported"
    rate, code = gts[gen]
    return rate * 1e9 * width * code / 8, f"PCIe Gen{gen} x{width}: {rate:g} GT/s x {width} lanes x {code:.3f} / 8"


@dataclass(frozen=True)
class Where:
    """What the probes need to know of the target."""

    module: ModuleType | None  # the framework's (None: not loaded, no probe that needs it runs)
    gpu_names: tuple[str, ...]  # GPUs the framework sees (their NVML names where known)
    scale: str
    data_files: tuple[str, ...]  # the dataset's files as the target sees them; empty: a scratch file
    seed: int
    strategy: Any = None  # a distributed job's: TensorFlow's strategy, PyTorch's torch.distributed (net, allreduce)
    workers: int = 1
    gpu_facts: tuple[dict[str, Any], ...] = ()  # NVML's facts of the GPUs (gpu.Nvml.devices), where known
    worker: int = 0  # this worker's index in a distributed job
    agree: Agree = alone  # the largest of a value over the job's workers (the framework's collective)
    checks: ModuleType | None = None  # the framework's checks (frameworks/*/checks.py), for the screen

    @property
    def framework(self) -> ModuleType:
        """The framework's module, for the probes that need it (NEED_FRAMEWORK: it is loaded for them)."""
        if self.module is None:
            raise RuntimeError("a probe outside NEED_FRAMEWORK asked for the framework's module")
        return self.module

    @property
    def device(self) -> str:
        """Where TensorFlow's gemm and conv run: the first GPU, else the CPU."""
        return "/GPU:0" if self.gpu_names else "/CPU:0"

    @property
    def gpu(self) -> int | None:
        """The NVML index of the GPU gemm and conv run on (the framework's first), as health checks name it
        (None: the CPU)."""
        return nvml_index(self, 0) if self.gpu_names else None


def nvml_index(w: Where, i: int) -> int:
    """TensorFlow's /GPU:i as NVML numbers it (its facts' index), or i where its facts are unknown."""
    facts = w.gpu_facts[i] if i < len(w.gpu_facts) else {}
    return int(facts.get("index", i))


def first_gpu(w: Where) -> dict[str, Any]:
    """The facts of the GPU the copy and launch probes use (GPU 0); Skip without one."""
    if not w.gpu_names:
        raise Skip("no GPU is visible to the framework on this target")
    return w.gpu_facts[0] if w.gpu_facts else {}


def near_node(facts: dict[str, Any]) -> str:
    """Which NUMA node the kernel says is near a GPU, in words (never a guess)."""
    node = facts.get("numa_node")
    return (
        f"the GPU's NUMA node is {node}"
        if node is not None
        else "the kernel does not report the GPU's NUMA node (-1): which socket is near is unknown"
    )


def allreduce_cases(
    scale: str, ranks: int, call: Callable[[int], Callable[[int], None]], check: Callable[[int], Any], how: str
) -> list[Case | Skip]:
    """The all-reduce's cases, one a message size, whatever framework runs it: `call(size)` times `reps` sums of
    `size` bytes of float32, `check(size)` checks one. Reported as nccl-tests does: algorithm bandwidth = bytes ÷
    time, bus bandwidth = algbw × 2(n−1)/n over `ranks`; `how` says who the ranks are."""
    sizes = ALLREDUCE_BYTES[scale]
    return [
        Case(
            "allreduce",
            f"{size_words(size)} algbw",
            "B/s",
            float(size),
            call(size),
            derived=((f"{size_words(size)} busbw", size * 2 * (ranks - 1) / ranks),),
            headline=size == sizes[-1],
            note=f"{how}; busbw = algbw x 2(n-1)/n (nccl-tests)",
            check=check(size),
        )
        for size in sizes
    ]


def size_words(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
