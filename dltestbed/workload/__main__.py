"""`python -m dltestbed.workload`: run one benchmark and print JSON-line events on stdout.
`python -m dltestbed.workload micro --probes gemm,membw,...`: run microbenchmarks instead (probes.py).

stdout carries events and nothing else (see events.py); logs go to stderr. Exit codes: 0 done,
1 the run failed, 2 bad arguments or data, 130 interrupted (SIGINT or SIGTERM).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import importlib
import itertools
import os
import signal
import sys
import time
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from dltestbed import dataset
from dltestbed.catalog import model_names
from dltestbed.config import (
    PAIR_PROBES,
    PER_GPU,
    PROBES,
    STEADY,
    ProbeSpec,
    WorkloadSpec,
    parse_cpu_list,
    parse_warmup,
    probe_spec,
    workload_spec,
)
from dltestbed.errors import ConfigError, DataError, DltestbedError
from dltestbed.workload import distributed
from dltestbed.workload.emit import Emitter
from dltestbed.workload.events import (
    AccuracyEvent,
    CheckEvent,
    ErrorEvent,
    MeasureEvent,
    ProbesDoneEvent,
    SkipEvent,
    StartEvent,
)
from dltestbed.workload.loop import StepError

if TYPE_CHECKING:
    from dltestbed.workload.checked import Checked
    from dltestbed.workload.probes import Case, Where


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


def parser() -> argparse.ArgumentParser:
    """The workload's arguments (the controller builds them with WorkloadSpec.to_argv)."""
    p = _Parser(prog="python -m dltestbed.workload", description=__doc__)
    p.add_argument("--model", required=True, help=f"one of: {', '.join(model_names())}")
    p.add_argument("--data", default="synthetic", help="synthetic (in memory) or real (--data-dir)")
    p.add_argument("--data-dir", help="ImageNet-style folder: DIR/<class>/*.jpg")
    p.add_argument("--data-digest", help="the dataset's content digest: recorded once its files and bytes match")
    p.add_argument("--data-files", type=int, help="with --data-digest: the files the dataset has")
    p.add_argument("--data-bytes", type=int, help="with --data-digest: the bytes its files hold")
    p.add_argument("--mode", default="train", help="train or infer")
    p.add_argument("--device", default="auto", help="auto, cpu (hides GPUs) or gpu (requires one)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--image-size", type=int, help="default: the model's native size")
    p.add_argument(
        "--warmup",
        type=_warmup,
        default=None,
        help=f"untimed steps first: a count, or {STEADY} (default): until the step time is steady",
    )
    p.add_argument("--steps", type=int, default=100, help="timed steps (default 100)")
    p.add_argument("--classes", type=int, default=1000, help="with real data: the folder's classes")
    p.add_argument("--sample-interval", type=float, default=1.0, help="seconds between resource samples")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--distributed",
        action="store_true",
        help="one worker of a MultiWorkerMirroredStrategy job; the cluster and this worker's "
        "index come from TF_CONFIG; --batch-size is per worker",
    )
    p.add_argument("--cpus", help="run only on these CPUs, e.g. 0-3,8 (before TensorFlow starts its threads)")
    p.add_argument("--gpu", help="see and sample only this GPU, by UUID (GPU-… or MIG-…; one of --gpus per-gpu)")
    p.add_argument(
        "--math",
        help="float32 (TF32 off), tf32, mixed_bfloat16, mixed_float16 (loss-scaled) or mixed "
        "(bfloat16 where the device has it, else float16); default float32",
    )
    p.add_argument("--xla", action="store_true", help="compile the step with XLA")
    p.add_argument(
        "--accuracy",
        action="store_true",
        help="with --data real: train on 4/5 of the images, then report top-1 accuracy on the other fifth",
    )
    p.add_argument(
        "--deterministic",
        action="store_true",
        help="TensorFlow's op determinism: the same stack computes the same loss at every step, bit for bit",
    )
    p.add_argument(
        "--gpus",
        help="one (default: the first GPU TensorFlow sees, or --gpu's) or node (every GPU of the machine in one "
        "data-parallel job, a replica each, NCCL between them)",
    )
    p.add_argument(
        "--cpu-devices",
        type=int,
        help="with --gpus node where there is no GPU: split the CPU into this many logical devices, a replica each",
    )
    p.add_argument("--gpu-memory-mib", type=int, help="a fixed GPU memory limit per GPU (default: grow as needed)")
    p.add_argument(
        "--watch-stdin",
        action="store_true",
        help="stop (as if interrupted) when stdin closes: for runs over SSH, so a lost "
        "controller never leaves a workload behind",
    )
    return p


def _warmup(text: str) -> int | None:
    """--warmup (config.parse_warmup), or argparse's error line."""
    try:
        return parse_warmup(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def micro_parser() -> argparse.ArgumentParser:
    """The arguments of `micro` (the controller builds them with ProbeSpec.to_argv)."""
    p = _Parser(prog="python -m dltestbed.workload micro", description="microbenchmarks: " + ", ".join(PROBES))
    p.add_argument(
        "--probes",
        help="comma-separated, of: " + ", ".join(PROBES) + " (default: all that run on one "
        "target, or with --distributed all that run between workers)",
    )
    p.add_argument("--scale", default="small", help="small (seconds per probe) or full (the models' shapes)")
    for name in ("--data", "--data-dir", "--data-digest", "--device", "--cpus", "--gpu"):
        p.add_argument(name)
    for name in ("--data-files", "--data-bytes", "--warmup", "--steps", "--seed", "--gpu-memory-mib"):
        p.add_argument(name, type=int)
    p.add_argument("--sample-interval", type=float)
    p.add_argument(
        "--screen-seconds",
        type=float,
        help="check (not time) gemm and conv for this long per GPU, fresh inputs each round (--suite screen)",
    )
    p.add_argument("--distributed", action="store_true", help="one worker of a job: net and allreduce (TF_CONFIG)")
    p.add_argument("--watch-stdin", action="store_true")
    return p


STDIN_GRACE_SECONDS = 10.0  # after stdin closed: time to stop cleanly before the process is killed

# The watchdog's program: wait for the end of stdin, SIGTERM the workload, SIGKILL it after the grace.
_WATCHDOG = """import os, signal, sys, time
workload, grace = int(sys.argv[1]), float(sys.argv[2])
while os.read(0, 4096):
    pass
os.kill(workload, signal.SIGTERM)
deadline = time.monotonic() + grace
while time.monotonic() < deadline:
    time.sleep(0.2)
os.kill(workload, signal.SIGKILL)
"""


def _die_with_parent() -> None:
    """Linux: this process gets SIGKILL the moment its parent ends (kept across exec)."""

    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def _watch_stdin() -> None:
    """When stdin closes (the controller is gone), interrupt this process like SIGTERM does, and kill
    it STDIN_GRACE_SECONDS later if it has not ended. The watching is another process, not a thread: a
    main thread blocked in TensorFlow's C++ while holding the GIL (a collective waiting for a peer that
    will never come) lets no Python thread run, and runs no signal handler either. The watchdog is a
    small `python -I -c` of its own (not a copy of this command line, which `ps` would show twice),
    holds only stdin, and dies with the workload."""
    parent = os.getpid()
    if os.fork() != 0:
        return
    try:
        _die_with_parent()
        if os.getppid() != parent:  # the workload ended before the line above
            os._exit(0)
        os.closerange(1, 65536)  # nobody waits on it for an end of file
        os.execv(sys.executable, [sys.executable, "-I", "-c", _WATCHDOG, str(parent), str(STDIN_GRACE_SECONDS)])
    finally:
        os._exit(0)  # exec failed: no watchdog, never a second workload


def parse(argv: list[str]) -> tuple[WorkloadSpec, argparse.Namespace]:
    """The validated spec of a command line, and the options that are not part of it."""
    ns = parser().parse_args(argv)
    values = {k: v for k, v in vars(ns).items() if v is not None and v is not False and k != "watch_stdin"}
    spec = workload_spec(**values)
    if spec.gpus == PER_GPU:  # the controller's: it starts one process per GPU, each with its --gpu
        raise ConfigError("--gpus per-gpu is the controller's (a process per GPU); a workload takes --gpu UUID")
    return spec, ns


def parse_micro(argv: list[str]) -> tuple[ProbeSpec, argparse.Namespace]:
    """The validated probe spec of a `micro` command line (after the word micro)."""
    ns = micro_parser().parse_args(argv)
    values = {k: v for k, v in vars(ns).items() if v is not None and v is not False and k != "watch_stdin"}
    if "probes" in values:
        values["probes"] = tuple(p.strip() for p in values["probes"].split(",") if p.strip())
    elif ns.distributed:
        values["probes"] = PAIR_PROBES
    return probe_spec(**values), ns


def _check_copy(spec: WorkloadSpec | ProbeSpec, index: dataset.DatasetIndex) -> dict[str, Any]:
    """The dataset facts to record; a DataError when this copy is not the dataset the controller digested
    (another file count or size: a partial or stale copy)."""
    files, nbytes = dataset.shape(index)
    if spec.data_digest is not None and (files, nbytes) != (spec.data_files, spec.data_bytes):
        raise DataError(
            f"data dir {spec.data_dir!r} is not dataset {spec.data_digest[:12]}: {files} files, "
            f"{nbytes} bytes here; {spec.data_files} files, {spec.data_bytes} bytes expected"
        )
    return {"dataset_digest": spec.data_digest, "dataset_files": files, "dataset_bytes": nbytes}


def _pin(cpus: str) -> None:
    """Restrict this process (and the threads TensorFlow will start) to the given CPUs."""

    wanted = set(parse_cpu_list(cpus))
    allowed = os.sched_getaffinity(0)
    if not wanted <= allowed:
        missing = ",".join(map(str, sorted(wanted - allowed)))
        raise ConfigError(f"--cpus {cpus}: CPU {missing} is not available here (allowed: {len(allowed)} CPUs)")
    os.sched_setaffinity(0, wanted)


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


Prepared = tuple[dataset.DatasetIndex | None, dict[str, Any], distributed.Cluster | None]


def _prepare(spec: WorkloadSpec | ProbeSpec, ns: argparse.Namespace, min_classes: int) -> Prepared:
    """What a model's run and a micro run do first, before TensorFlow loads: watch stdin, index and check
    the dataset copy (at least `min_classes` classes), pin the CPUs, read the cluster, hide the GPUs for
    --device cpu. The index, the dataset facts to record, and the cluster."""
    if ns.watch_stdin:
        _watch_stdin()
    index = dataset.scan(spec.data_dir) if spec.data == "real" and spec.data_dir else None
    if index is not None and len(index.classes) < min_classes:
        raise ConfigError(f"data dir {spec.data_dir!r} has 1 class; at least 2 are needed")
    data_facts = _check_copy(spec, index) if index is not None else {}
    if spec.cpus:
        _pin(spec.cpus)
    cluster = distributed.cluster_from_env(os.environ.get("TF_CONFIG")) if spec.distributed else None
    if spec.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # the HPEC'19 way of hiding the GPUs
    elif spec.gpu:
        os.environ["CUDA_VISIBLE_DEVICES"] = spec.gpu  # CUDA's device 0, the only one; NVML keeps only it too
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    return index, data_facts, cluster


def _plan_cases(names: Sequence[str], where: Where, cases: list[Case]) -> list[SkipEvent]:
    """Each probe's cases on this target, appended to `cases` (so that cleanup reaches every case
    planned, even when a later probe fails); the skips, each with its reason."""
    # lazy: TensorFlow, NVML, the CUDA runtime load only in the modes that use them
    from dltestbed.workload import probes

    skips: list[SkipEvent] = []
    for name in names:
        try:
            planned = probes.PROBES[name](where)
        except probes.Skip as why:
            skips.append(SkipEvent(probe=name, case="", reason=str(why)))
            continue
        for c in planned:
            if isinstance(c, probes.Skip):
                skips.append(SkipEvent(probe=name, case=c.case, reason=str(c)))
            else:
                cases.append(c)
    return skips


def _time_cases(cases: Sequence[Case], spec: ProbeSpec, where: Where, emitter: Emitter) -> int:
    """Time every case, a measure event per value per call, then check its result where it has a check (a
    check event each); the number of timed measures sent."""
    # lazy: TensorFlow, NVML, the CUDA runtime load only in the modes that use them
    from dltestbed.workload import probes

    measures = 0
    for c in cases:
        for i, phase, values, dt in probes.timed(c, spec.scale, spec.warmup, spec.steps, where.agree):
            for name, unit, value in values:
                event = MeasureEvent(
                    probe=c.probe, case=name, index=i, phase=phase, value=value, unit=unit, seconds=dt, t=time.time()
                )
                emitter.emit(event)
                measures += phase == "timed"
        if c.check is not None:
            for checked in c.check(spec.seed):
                emitter.emit(check_event(c.probe, c.name, checked, spec.seed))
    return measures


def check_event(probe: str, case: str, checked: Checked, seed: int) -> CheckEvent:
    """The event of a probe's checked result."""
    v = checked.verdict
    return CheckEvent(
        probe=probe,
        case=checked.name or case,
        kind=checked.kind,
        elements=v.elements,
        mismatches=v.mismatches,
        worst=v.worst,
        tolerance=v.tolerance,
        seed=seed,
        t=time.time(),
        gpu=checked.gpu,
        where=v.where() if not v.ok else "",
    )


def _in_tf_order(gpus: list[dict[str, Any]], visible: int) -> list[dict[str, Any]]:
    """NVML's facts of each GPU TensorFlow sees, in TensorFlow's (CUDA's) order, matched by PCI bus id
    (gpu.in_cuda_order). Where the CUDA runtime cannot say which is which: NVML's order only when nothing can
    have reordered it (the same count, no CUDA_VISIBLE_DEVICES), else no facts ({}: the GPU's name and limits
    unknown, never another GPU's)."""
    if not visible:
        return []
    # lazy: TensorFlow, NVML, the CUDA runtime load only in the modes that use them
    from dltestbed.workload import cudart
    from dltestbed.workload.gpu import in_cuda_order

    try:
        return in_cuda_order(gpus, cudart.pci_bus_ids())[:visible]
    except cudart.CudaError:
        if len(gpus) == visible and "CUDA_VISIBLE_DEVICES" not in os.environ:
            return list(gpus)
        return [{} for _ in range(visible)]


def run_micro(argv: list[str], emitter: Emitter) -> None:
    """Plan every probe's cases on this target, say so in the start event (with each skip), then time
    each case and emit a measure per call, then probes_done. Scratch files are removed whatever happens."""
    # lazy: TensorFlow, NVML, the CUDA runtime load only in the modes that use them
    from dltestbed.workload import fingerprint, probes

    spec, ns = parse_micro(argv)
    index, data_facts, cluster = _prepare(spec, ns, min_classes=1)  # disk reads any dataset
    # lazy: TensorFlow, NVML, the CUDA runtime load only in the modes that use them
    from dltestbed.workload.gpu import Nvml

    nvml = Nvml.open()
    gpus = nvml.devices() if nvml else []
    fp = fingerprint.base()
    tf: Any = None
    visible: list[Any] = []
    strategy: Any = None
    if set(spec.probes) & probes.NEED_TF:  # membw and disk alone start in a second, even in an emulated VM
        tf = importlib.import_module("tensorflow")  # seconds to import: only the probes that need it load it

        # lazy: TensorFlow, NVML, the CUDA runtime load only in the modes that use them
        from dltestbed.workload import tfgpu

        gpu_count = tfgpu.configure(tf, spec.gpu_memory_mib)  # before anything touches a GPU
        if cluster:  # before any other TensorFlow op; it waits here for every worker
            strategy = distributed.strategy(tf, gpu_count)
            fp.update(distributed.job_facts(strategy, cluster, distributed.collective(gpu_count)))
        visible = tf.config.list_physical_devices("GPU")
        fp.update(fingerprint.tensorflow(tf, gpus))
    if spec.device == "gpu" and not visible:
        raise ConfigError(f"--device gpu: no GPU is visible to TensorFlow on {fp['host']}")
    fp.update(data_facts)
    facts = _in_tf_order(gpus, len(visible))
    where = probes.Where(
        tf,
        tuple(str(f.get("name", "GPU")) for f in facts),
        spec.scale,
        tuple(index.files) if index else (),
        spec.seed,
        strategy,
        cluster.size if cluster else 1,
        tuple(facts),
        cluster.index if cluster else 0,
    )
    cases: list[probes.Case] = []
    try:
        if spec.screen_seconds is not None:
            _screen(spec, spec.screen_seconds, where, fp, nvml, emitter)
            return
        skips = _plan_cases(spec.probes, where, cases)
        resolved = spec.model_dump() | {"cases": [d for c in cases for d in c.describe()]}
        emitter.emit(StartEvent(spec=resolved, fingerprint=fp, t=time.time()))
        for skip in skips:
            emitter.emit(skip)
        # lazy: TensorFlow, NVML, the CUDA runtime load only in the modes that use them
        from dltestbed.workload.sampler import Sampler, watched

        sampler = Sampler(emitter.emit, spec.sample_interval, nvml)
        with watched(nvml, emitter.emit, sampler), sampler.running():
            measures = _time_cases(cases, spec, where, emitter)
        emitter.emit(ProbesDoneEvent(measures=measures, skips=len(skips)))
    finally:
        for c in cases:
            if c.cleanup is not None:
                c.cleanup()
        if nvml:
            nvml.close()


def _screen(spec: ProbeSpec, seconds: float, where: Where, fp: dict[str, Any], nvml: Any, emitter: Emitter) -> None:
    """--suite screen: the start event, then the checks for `seconds` per device (screen.py),
    sampled and health-checked like any run, then probes_done (no timed measure)."""
    # lazy: TensorFlow, NVML, the CUDA runtime load only in the modes that use them
    from dltestbed.workload import screen
    from dltestbed.workload.sampler import Sampler, watched

    resolved = spec.model_dump() | {"devices": [d for d, _ in screen.devices(where)]}
    emitter.emit(StartEvent(spec=resolved, fingerprint=fp, t=time.time()))
    sampler = Sampler(emitter.emit, spec.sample_interval, nvml)
    with watched(nvml, emitter.emit, sampler), sampler.running():
        for ev in screen.run(where, spec.probes, seconds, spec.seed, check_event):
            emitter.emit(ev)
    emitter.emit(ProbesDoneEvent(measures=0, skips=0))


def run(argv: list[str], emitter: Emitter) -> None:
    """Validate, prepare data, build the model, run the loop, emit everything.

    Imports inside this function are for start-up only: TensorFlow and what uses it load after the
    environment (CUDA_VISIBLE_DEVICES, TF_CPP_MIN_LOG_LEVEL) is set, and `--help` stays fast."""
    # lazy: TensorFlow, NVML, the CUDA runtime load only in the modes that use them
    from dltestbed.workload import fingerprint

    spec, ns = parse(argv)
    index, data_facts, cluster = _prepare(spec, ns, min_classes=2)
    classes = len(index.classes) if index else spec.classes
    trained, held = dataset.split(index) if index is not None and spec.accuracy else (index, None)
    if held is not None and not held.files:
        raise ConfigError(
            f"--accuracy holds out every {dataset.HOLDOUT_EVERY}th image of a class: no class has that many"
        )

    # lazy: TensorFlow, NVML, the CUDA runtime load only in the modes that use them
    from dltestbed.workload.gpu import Nvml

    nvml = Nvml.open()
    gpus = nvml.devices() if nvml else []
    fp = fingerprint.base()

    # Keras loads TensorFlow: only the modes that run a model load it
    import keras
    import tensorflow as tf

    # lazy: TensorFlow, NVML, the CUDA runtime load only in the modes that use them
    from dltestbed.workload import data, loop, mathmode, tfgpu

    if spec.cpu_devices is not None:  # before the runtime starts, as GPU memory's settings
        tfgpu.split_cpu(tf, spec.cpu_devices)
    gpu_count = tfgpu.configure(tf, spec.gpu_memory_mib)  # before anything touches a GPU
    strategy, collective = None, ""
    if cluster:  # before any other TensorFlow op
        strategy, collective = distributed.strategy(tf, gpu_count), distributed.collective(gpu_count)
    elif spec.gpus == "node":
        strategy, collective = distributed.node(tf, gpu_count)
    math = mathmode.resolve(spec.math, mathmode.capabilities(tf) if spec.device != "cpu" else [])
    # lazy: TensorFlow, NVML, the CUDA runtime load only in the modes that use them
    from dltestbed.workload.sampler import Sampler, watched

    if spec.device == "gpu" and not gpu_count:
        raise ConfigError(f"--device gpu: no GPU is visible to TensorFlow on {fp['host']}")
    fp.update(fingerprint.tensorflow(tf, gpus), **data_facts)
    if strategy is not None:
        fp.update(distributed.job_facts(strategy, cluster, collective))
    local = int(fp.get("local_replicas", 1))
    resolved = spec.model_dump() | {"image_size": spec.size, "classes": classes, "math": math}
    emitter.emit(StartEvent(spec=resolved, fingerprint=fp, t=time.time()))

    tf.config.list_logical_devices()  # the runtime starts here, so the sampler may ask its allocator
    sampler = Sampler(emitter.emit, spec.sample_interval, nvml, lambda: tfgpu.in_use(tf, gpu_count))
    with contextlib.ExitStack() as running:  # unwinds in reverse: sampler, health after, NVML closed
        if nvml:
            running.callback(nvml.close)
        running.enter_context(watched(nvml, emitter.emit, sampler))
        running.enter_context(sampler.running())
        mathmode.apply(tf, keras, math)
        keras.utils.set_random_seed(spec.seed)  # the same initial weights on every worker (and every target)
        if spec.deterministic:  # after the seed: TensorFlow refuses op determinism without one
            tf.config.experimental.enable_op_determinism()
        model, step = _step(tf, keras, spec, classes, math, strategy)
        first = spec.seed + (cluster.index if cluster else 0) * local  # each replica its own data

        def batches_of(replica: int) -> Any:
            if trained is not None:
                return data.real(tf, trained, spec.batch_size, spec.size, first + replica)
            return data.synthetic(tf, spec.batch_size, spec.size, classes, first + replica)

        batches = batches_of(0) if strategy is None else loop.per_replica(strategy, batches_of, local)
        startup = time.time() - _process_start()
        summary = loop.run(
            step,
            batches,
            spec.batch_size * local,  # the images of one step on this worker: every local replica's batch
            spec.warmup,
            spec.steps,
            emitter.emit,
            require_gpu=spec.device == "gpu" and strategy is None,  # a strategy's result is reduced off the GPUs
            libraries=fingerprint.loaded_cuda if gpu_count else None,
            warmed=(lambda: tfgpu.reset_peak(tf, gpu_count)) if gpu_count else None,
            agree=distributed.every_worker(tf, strategy) if cluster else None,
        )
        summary = dataclasses.replace(
            summary, startup_seconds=startup, gpu_memory_peak_bytes=tfgpu.peak(tf, gpu_count) if gpu_count else None
        )
        if held is not None:
            images, correct, loss = data.evaluate(tf, keras, model, data.held_out(tf, held, spec.batch_size, spec.size))
            emitter.emit(AccuracyEvent(images=images, correct=correct, loss=loss, t=time.time()))
    emitter.emit(summary)


def _step(tf: Any, keras: Any, spec: WorkloadSpec, classes: int, math: str, strategy: Any) -> tuple[Any, Any]:
    """The model built and its step compiled, under the strategy's scope when the run is distributed."""
    # lazy: TensorFlow, NVML, the CUDA runtime load only in the modes that use them
    from dltestbed.workload import loop, mathmode, models

    how = {"loss_scale": mathmode.loss_scaled(math), "xla": spec.xla}
    if strategy is None:
        model = models.build(spec.model, spec.size, classes)
        return model, loop.make_step(tf, keras, model, spec.mode, **how)
    with strategy.scope():
        model = models.build(spec.model, spec.size, classes)
        return model, loop.make_step(tf, keras, model, spec.mode, strategy, spec.batch_size, **how)


def _process_start() -> float:
    """When this process started (the epoch, as time.time()): its start-up is counted from there."""
    # psutil loads only for the measuring modes
    import psutil

    return float(psutil.Process().create_time())


def describe(exc: BaseException, limit_mib: int | None) -> str:
    """An exception as the one line a stored run keeps: the line of its message that says what went wrong;
    out of GPU memory, also who else held the GPU's memory (NVML) and this run's own limit."""
    # lazy: TensorFlow, NVML, the CUDA runtime load only in the modes that use them
    from dltestbed.workload import failure

    text = str(exc)
    line = failure.error_line(text) or type(exc).__name__
    if not (failure.out_of_memory(text) and failure.on_gpu(text)):
        return line
    # lazy: TensorFlow, NVML, the CUDA runtime load only in the modes that use them
    from dltestbed.workload.gpu import Nvml

    held = "NVML cannot say who held it"
    with contextlib.suppress(Exception):  # this is already a failure's report: it must not fail itself
        nvml = Nvml.open()
        if nvml:
            try:
                held = failure.holders(nvml.devices(), nvml.processes(), os.getpid())
            finally:
                nvml.close()
    limit = f" (this run's limit: {limit_mib} MiB, --gpu-memory-mib)" if limit_mib else ""
    return f"out of GPU memory{limit}: {line} — {held}"[: failure.LIMIT * 2]


def main(argv: list[str] | None = None) -> int:
    """Entry point: every failure becomes an `error` event and a non-zero exit."""
    emitter = Emitter.take_stdout()
    signal.signal(signal.SIGTERM, _terminate)
    args = sys.argv[1:] if argv is None else argv
    limit = _limit_of(args)
    try:
        if args[:1] == ["micro"]:
            run_micro(args[1:], emitter)
        else:
            run(args, emitter)
    except KeyboardInterrupt:
        emitter.emit(ErrorEvent(kind="interrupted", message="interrupted by a signal"))
        return 130
    except ConfigError as exc:
        emitter.emit(ErrorEvent(kind="config", message=str(exc)))
        return 2
    except DltestbedError as exc:
        emitter.emit(ErrorEvent(kind=type(exc).__name__, message=str(exc)))
        return 1
    except StepError as exc:
        traceback.print_exc(file=sys.stderr)
        cause = exc.__cause__ or exc
        emitter.emit(ErrorEvent(kind=type(cause).__name__, message=f"step {exc.index}: {describe(cause, limit)}"))
        return 1
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        emitter.emit(ErrorEvent(kind=type(exc).__name__, message=describe(exc, limit)))
        return 1
    return 0


def _limit_of(args: list[str]) -> int | None:
    """The --gpu-memory-mib of a command line, for the words of an out-of-memory failure (None: none)."""
    for flag, value in itertools.pairwise(args):
        if flag == "--gpu-memory-mib" and value.isdigit():
            return int(value)
    return None


if __name__ == "__main__":
    raise SystemExit(main())
