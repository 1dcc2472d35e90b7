"""Microbenchmarks, run on the target by `python -m dltestbed.workload micro`: each probe is a list of
cases, each case a callable timed `warmup` + `steps` times and turned into a rate (FLOP/s, B/s).

A case's call does its work `reps` times and blocks until the result is on the host; `reps` is
calibrated once so one call lasts at least CALL_SECONDS (so an emulated VM and a GPU are both timed
over a span the clock resolves). Probes that cannot run here raise Skip with the reason.
"""

from __future__ import annotations

import contextlib
import math as math_lib
import os
import random
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dltestbed.workload import checked, cudart, peaks
from dltestbed.workload.checked import CHECK_N, Checked, set_math

CALL_SECONDS = {"small": 0.05, "full": 0.2}  # the least one timed call lasts
ALLREDUCE_BYTES = {"small": (4 << 10, 256 << 10, 4 << 20), "full": (4 << 10, 1 << 20, 64 << 20, 256 << 20)}
GATHER_BYTES = {"small": 4 << 20, "full": 64 << 20}  # net: each worker's share of an all-gather
MAX_REPS = 1 << 16
GEMM_N = {"small": (256, 512), "full": (2048, 8192)}  # full: n=8192 keeps an H100's tensor cores busy
MEMBW_BYTES = {"small": 64 << 20, "full": 1 << 30}
COPY_BYTES = {"small": 64 << 20, "full": 256 << 20}  # h2d / d2h
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


def _alone(value: float) -> float:
    return value


def calibrate(call: Callable[[int], None], seconds: float, agree: Agree = _alone) -> int:
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
    case: Case, scale: str, warmup: int, steps: int, agree: Agree = _alone
) -> Iterator[tuple[int, str, list[tuple[str, str, float]], float]]:
    """(index, phase, [(case, unit, value)], seconds) for each call: warm-up first."""
    reps = calibrate(case.call, CALL_SECONDS[scale], agree) if case.calibrate else 1
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        case.call(reps)
        dt = time.perf_counter() - t0
        yield i, "warmup" if i < warmup else "timed", case.values(reps, dt), dt


# -- limits


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


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError:
        return None


def cpu_peak(cpus: int) -> tuple[float | None, str]:
    """Nominal float32 FLOP/s of the CPUs this process may use: CPUs x max clock x FLOP/cycle, or None."""
    flags, mhz = parse_cpuinfo(_read("/proc/cpuinfo") or "")
    max_khz = _read("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
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


# -- the probes


@dataclass(frozen=True)
class Where:
    """What the probes need to know of the target."""

    tf: Any
    gpu_names: tuple[str, ...]  # GPUs TensorFlow sees (their NVML names where known)
    scale: str
    data_files: tuple[str, ...]  # the dataset's files as the target sees them; empty: a scratch file
    seed: int
    strategy: Any = None  # a distributed job's MultiWorkerMirroredStrategy (net, allreduce)
    workers: int = 1
    gpu_facts: tuple[dict[str, Any], ...] = ()  # NVML's facts of the GPUs (gpu.Nvml.devices), where known
    worker: int = 0  # this worker's index in a distributed job
    _gather: list[Any] = field(default_factory=list, repr=False)  # the compiled all-gather of `agree`, once

    def agree(self, value: float) -> float:
        """The largest `value` over the job's workers (all-gather); the value itself when alone."""
        if self.strategy is None:
            return value
        tf, strategy = self.tf, self.strategy
        if not self._gather:
            holder = tf.Variable([0.0], dtype=tf.float64, trainable=False)

            @tf.function
            def gather() -> Any:
                return strategy.run(lambda: tf.distribute.get_replica_context().all_gather(holder + 0.0, axis=0))

            self._gather.extend([holder, gather])
        self._gather[0].assign([value])
        out = self._gather[1]()
        return float(tf.reduce_max(strategy.experimental_local_results(out)[0]))

    @property
    def device(self) -> str:
        """Where gemm and conv run: the first GPU, else the CPU."""
        return "/GPU:0" if self.gpu_names else "/CPU:0"

    @property
    def gpu(self) -> int | None:
        """The NVML index of the GPU gemm and conv run on (TensorFlow's /GPU:0), as health checks name it
        (None: the CPU)."""
        return nvml_index(self, 0) if self.gpu_names else None


def gemm(w: Where) -> list[Case | Skip]:
    """Chained n x n matmuls (x <- x @ b, b scaled to keep |x| steady): 2 n^3 FLOP each, per math: float32 with
    TF32 off (the non-tensor-core rate), TF32, bfloat16, float16 — each against its own dense peak."""
    cases: list[Case | Skip] = []
    for math in peaks.MATHS if w.gpu_names else ("float32",):
        for n in GEMM_N[w.scale]:
            cases.append(_gemm_case(w.tf, w, n, math))
    if not w.gpu_names:
        cases.append(Skip("a GPU's tensor-core math (Ampere or later)", "tf32"))
        for dtype in ("bfloat16", "float16"):
            cases.append(Skip("measured on a GPU only (TensorFlow converts half precision on a CPU)", dtype))
    return cases


def _gemm_case(tf: Any, w: Where, n: int, math: str) -> Case:
    dt = getattr(tf, "float32" if math == "tf32" else math)
    with tf.device(w.device):
        x0 = tf.cast(tf.random.normal((n, n), seed=w.seed), dt)
        b = tf.cast(tf.random.normal((n, n), seed=w.seed + 1) / math_lib.sqrt(n), dt)

    @tf.function
    def chain(x: Any, reps: Any) -> Any:
        for _ in tf.range(reps):
            x = tf.linalg.matmul(x, b)
        return tf.reduce_sum(tf.cast(x[0, :8], tf.float32))

    def call(reps: int) -> None:
        set_math(tf, math)
        with tf.device(w.device):
            float(chain(x0, tf.constant(reps)))

    if w.gpu_names:
        limit, src = peaks.gpu_peak(w.gpu_names[0], math)
    else:
        limit, src = cpu_peak(len(os.sched_getaffinity(0)))
    at_size = n == GEMM_N[w.scale][-1]  # one check per math, on the case that is timed at size
    return Case(
        "gemm",
        f"{math} n={n}",
        "FLOP/s",
        2.0 * n**3,
        call,
        headline=(math == "float32" and n == GEMM_N[w.scale][-1]),
        limit=limit,
        limit_source=src,
        math=math,
        check=checked.gemm_check(tf, w.device, w.gpu, CHECK_N[w.scale], math) if at_size else None,
    )


def conv_shapes(scale: str) -> list[tuple[str, int, int, int, int, int, int]]:
    """CONVS at a scale: small takes a quarter of the height and width (at least the kernel's)."""
    if scale != "small":
        return list(CONVS)
    return [(name, max(k, -(-h // 4)), max(k, -(-wd // 4)), cin, cout, k, s) for name, h, wd, cin, cout, k, s in CONVS]


def conv(w: Where) -> list[Case | Skip]:
    """Forward convolutions at the models' heaviest layers' shapes: 2 H' W' k^2 Cin Cout FLOP each (float32,
    TF32 off)."""
    tf = w.tf
    cases: list[Case | Skip] = []
    for i, (name, h, wd, cin, cout, k, stride) in enumerate(conv_shapes(w.scale)):
        with tf.device(w.device):
            x = tf.random.normal((1, h, wd, cin), seed=w.seed)
            f = tf.random.normal((k, k, cin, cout), seed=w.seed + 1) / math_lib.sqrt(k * k * cin)

        @tf.function
        def many(reps: Any, x: Any = x, f: Any = f, stride: int = stride) -> Any:
            acc = tf.constant(0.0)
            for _ in tf.range(reps):
                acc += tf.reduce_sum(tf.nn.conv2d(x + acc * 0.0, f, stride, "SAME")[0, 0, 0])
            return acc

        def call(reps: int, many: Any = many) -> None:
            set_math(tf, "float32")
            with tf.device(w.device):
                float(many(tf.constant(reps)))

        ho, wo = -(-h // stride), -(-wd // stride)
        flop = 2.0 * ho * wo * k * k * cin * cout
        cases.append(
            Case(
                "conv",
                f"{name} at {h}x{wd}",
                "FLOP/s",
                flop,
                call,
                headline=(i == 0),
                math="float32",
                note="float32, TF32 off",
                check=checked.conv_check(tf, w.device, w.gpu, (h, wd, cin, cout, k, stride)),
            )
        )
    return cases


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


def nvml_index(w: Where, i: int) -> int:
    """TensorFlow's /GPU:i as NVML numbers it (its facts' index), or i where its facts are unknown."""
    facts = w.gpu_facts[i] if i < len(w.gpu_facts) else {}
    return int(facts.get("index", i))


def _first_gpu(w: Where) -> dict[str, Any]:
    """The facts of the GPU the copy and launch probes use (GPU 0); Skip without one."""
    if not w.gpu_names:
        raise Skip("no GPU is visible to TensorFlow on this target")
    return w.gpu_facts[0] if w.gpu_facts else {}


def near_node(facts: dict[str, Any]) -> str:
    """Which NUMA node the kernel says is near a GPU, in words (never a guess)."""
    node = facts.get("numa_node")
    return (
        f"the GPU's NUMA node is {node}"
        if node is not None
        else "the kernel does not report the GPU's NUMA node (-1): which socket is near is unknown"
    )


def copy_cases(probe: str, size: int, nodes: dict[int, list[int]]) -> list[tuple[str, bool, list[int] | None]]:
    """(case, pinned, CPUs to place the host buffer on) of a copy probe: pinned (the first: the headline) and
    pageable, and from each NUMA node's memory where there are several. Pure."""
    per_node = [(f" from node {n}", cpus) for n, cpus in nodes.items()] if len(nodes) > 1 else [("", None)]
    return [
        (f"{kind} {_size(size)}{where}", kind == "pinned", cpus)
        for kind in ("pinned", "pageable")
        for where, cpus in per_node
    ]


def _copies(w: Where, probe: str) -> list[Case | Skip]:
    facts = _first_gpu(w)
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


def launch(w: Where) -> list[Case | Skip]:
    """Empty kernels launched one after another (the time per launch, the GPU's and the layer's share of
    frequent short kernels), and launched then waited for (the round trip). Through the CUDA driver, each
    launch a Python call (the binding's own cost is in it: an estimate puts it near a microsecond)."""
    _first_gpu(w)
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


def mount_of(path: str, mounts: str) -> tuple[str, str]:
    """(mount point, filesystem type) holding `path`, from /proc/self/mounts' text: the longest mount point
    that is a prefix of the path (the last mounted there wins). Pure."""
    best = ("", "unknown")
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best[0]):
            best = (point, parts[2])
    return best


def drop_cache(paths: tuple[str, ...]) -> str | None:
    """Ask the kernel to drop the page cache of each file (posix_fadvise DONTNEED); why not, or None."""
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError as exc:
            return f"{p}: {exc.strerror}"
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError as exc:
            return f"posix_fadvise: {exc.strerror}"
        finally:
            os.close(fd)
    return None


def _scratch(size: int, seed: int) -> str:
    """A file of `size` random-looking bytes in the temp folder, on disk (fsynced)."""
    rnd = random.Random(seed)
    chunk = rnd.randbytes(1 << 20)
    fd, path = tempfile.mkstemp(prefix="dltestbed-disk-")
    with os.fdopen(fd, "wb") as f:
        for _ in range(size // len(chunk)):
            f.write(chunk)
        f.flush()
        os.fsync(f.fileno())
    return path


def disk(w: Where) -> list[Case | Skip]:
    """Sequential (1 MiB reads) and random (4 KiB preads) read throughput, page cache dropped before each
    pass: the dataset's files as the target sees them, else a scratch file in the temp folder."""
    scratch = None
    files = w.data_files
    if not files:
        scratch = _scratch(SCRATCH_BYTES[w.scale], w.seed)
        files = (scratch,)
    sizes = [os.path.getsize(p) for p in files]
    total = sum(sizes)
    if total == 0:
        raise Skip("the dataset's files are empty")
    point, fstype = mount_of(os.path.realpath(files[0]), _read("/proc/self/mounts") or "")
    memory = " — in memory, not on a disk" if fstype in ("tmpfs", "ramfs") else ""
    where = (
        "dataset" if w.data_files else f"scratch file in {os.path.dirname(files[0])}"
    ) + f" on {fstype} ({point}){memory}"
    why = drop_cache(files)
    note = (
        f"{where}; page cache dropped per file before each pass (posix_fadvise DONTNEED)"
        if why is None
        else f"{where}; page cache NOT dropped ({why}): cached reads"
    )
    rnd = random.Random(w.seed)
    reads = RANDOM_READS[w.scale]
    picks = [
        (i, rnd.randrange(0, max(1, sizes[i] // BLOCK)) * BLOCK)
        for i in rnd.choices(range(len(files)), weights=[max(s, 1) for s in sizes], k=reads)
    ]

    def seq(reps: int) -> None:
        drop_cache(files)
        for p in files:
            with open(p, "rb", buffering=0) as f:
                while f.read(1 << 20):
                    pass

    def rand(reps: int) -> None:
        drop_cache(files)
        fds = [os.open(p, os.O_RDONLY) for p in files]
        try:
            for i, off in picks:
                os.pread(fds[i], BLOCK, off)
        finally:
            for fd in fds:
                os.close(fd)

    got = sum(min(BLOCK, sizes[i] - off) for i, off in picks)
    cleanup = (lambda: os.unlink(scratch)) if scratch else None
    seq_name = f"sequential 1 MiB reads of {total / 2**20:.1f} MiB"
    return [
        Case("disk", seq_name, "B/s", float(total), seq, headline=True, calibrate=False, note=note, cleanup=cleanup),
        Case("disk", f"random 4 KiB reads x{reads}", "B/s", float(got), rand, calibrate=False, note=note),
    ]


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def _collective(w: Where, make: Callable[[Any], Any], x: Any) -> Callable[[int], None]:
    """A call doing `reps` collectives `make(replica_context)(x)`, blocking on the last result."""
    tf, strategy = w.tf, w.strategy

    @tf.function
    def once() -> Any:
        return strategy.run(lambda: make(tf.distribute.get_replica_context())(x))

    def call(reps: int) -> None:
        out = None
        for _ in range(reps):
            out = once()
        float(tf.reshape(strategy.experimental_local_results(out)[0], [-1])[0])

    return call


def allreduce(w: Where) -> list[Case | Skip]:
    """All-reduce (sum) of float32 tensors over message sizes through MultiWorkerMirroredStrategy, as
    nccl-tests reports it: algorithm bandwidth = bytes ÷ time, bus bandwidth = algbw × 2(n−1)/n."""
    if w.strategy is None:
        raise Skip("runs between the workers of a job: --scenario distributed")
    tf, n = w.tf, int(w.strategy.num_replicas_in_sync)  # a rank per replica, as nccl-tests counts GPUs
    cases: list[Case | Skip] = []
    sizes = ALLREDUCE_BYTES[w.scale]
    for size in sizes:
        x = tf.ones([size // 4], tf.float32)
        call = _collective(w, lambda ctx: lambda t: ctx.all_reduce(tf.distribute.ReduceOp.SUM, t), x)
        cases.append(
            Case(
                "allreduce",
                f"{_size(size)} algbw",
                "B/s",
                float(size),
                call,
                derived=((f"{_size(size)} busbw", size * 2 * (n - 1) / n),),
                headline=size == sizes[-1],
                note=f"{n} replicas on {w.workers} workers; busbw = algbw x 2(n-1)/n (nccl-tests)",
                check=checked.allreduce_check(tf, w.strategy, w.gpu, size),
            )
        )
    return cases


def net(w: Where) -> list[Case | Skip]:
    """Between the workers, through TensorFlow's own gRPC path (its collectives): the latency of a
    4-byte all-reduce, and the bytes each worker receives per second in an all-gather."""
    if w.strategy is None:
        raise Skip("runs between the workers of a job: --scenario distributed")
    tf, n = w.tf, w.workers
    one = tf.ones([1], tf.float32)
    size = GATHER_BYTES[w.scale]
    part = tf.ones([size // 4], tf.float32)
    via = f"{n} workers, TensorFlow gRPC collectives"
    return [
        Case(
            "net",
            "latency: 4 B all-reduce",
            "s",
            1.0,
            _collective(w, lambda ctx: lambda t: ctx.all_reduce(tf.distribute.ReduceOp.SUM, t), one),
            note=via,
        ),
        Case(
            "net",
            f"all-gather {_size(size)} a worker: received",
            "B/s",
            float(size * (n - 1)),
            _collective(w, lambda ctx: lambda t: ctx.all_gather(t, axis=0), part),
            headline=True,
            note=via,
        ),
    ]


# The probes that need TensorFlow: it says which GPUs a target's workload sees, the copies and launches included.
NEED_TF = {"gemm", "conv", "h2d", "d2h", "launch", "net", "allreduce"}
PROBES: dict[str, Callable[[Where], list[Case | Skip]]] = {
    "gemm": gemm,
    "conv": conv,
    "membw": membw,
    "h2d": h2d,
    "d2h": d2h,
    "launch": launch,
    "disk": disk,
    "net": net,
    "allreduce": allreduce,
}
