"""`python -m dltestbed.workload --spec SPEC`: run one benchmark and print JSON-line events on stdout; a spec
whose model is "micro" runs the microbenchmarks instead (probes/). SPEC is JSON (args.py).

stdout carries events and nothing else (see events.py); logs go to stderr. Exit codes: 0 done,
1 the run failed, 2 bad arguments or data, 130 interrupted (SIGINT or SIGTERM).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from dltestbed import dataset
from dltestbed.config import ProbeSpec, WorkloadSpec
from dltestbed.errors import ConfigError, DltestbedError
from dltestbed.workload.args import parse, schema
from dltestbed.workload.emit import Emitter
from dltestbed.workload.events import ErrorEvent
from dltestbed.workload.frameworks import ModelRun, framework, gathered
from dltestbed.workload.loop import StepError
from dltestbed.workload.micro import run_micro
from dltestbed.workload.start import prepare


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def run(spec: WorkloadSpec, emitter: Emitter, watch_stdin: bool = False) -> None:
    """Validate, prepare the data, open NVML, then run the model with the spec's framework (frameworks/).

    Imports inside this function are for start-up only: the framework and what uses it load after the
    environment (CUDA_VISIBLE_DEVICES, TF_CPP_MIN_LOG_LEVEL) is set, and `--help` stays fast."""
    # lazy: TensorFlow, NVML, the CUDA runtime load only in the modes that use them
    from dltestbed.workload import fingerprint

    index, data_facts, cluster = prepare(spec, watch_stdin, min_classes=2)
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
    fp = fingerprint.base(gathered(lambda f: f.distributions)) | data_facts
    model_run = ModelRun(spec, classes, trained, held, cluster, nvml, gpus, fp, _process_start)
    framework(spec.framework).run_model(model_run, emitter)


def _process_start() -> float:
    """When this process started (the epoch, as time.time()): its start-up is counted from there. Its start in
    clock ticks since boot (/proc/self/stat) against the boot-time clock now: psutil's create_time adds the boot
    time in whole seconds, up to a second off, which a short run's start-up cannot afford."""
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22, starttime; fields[0] is field 3
    return time.time() - (time.clock_gettime(time.CLOCK_BOOTTIME) - started)


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
    limit: int | None = None  # the spec's --gpu-memory-mib, for the words of an out-of-memory failure
    try:
        spec, ns = parse(args)
        if spec is None:
            emitter.document(schema())
            return 0
        limit = spec.gpu_memory_mib
        if isinstance(spec, ProbeSpec):
            run_micro(spec, emitter, ns.watch_stdin)
        else:
            run(spec, emitter, ns.watch_stdin)
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


if __name__ == "__main__":
    raise SystemExit(main())
