"""What a model's run and a micro run do first, before any framework loads: watch stdin (a lost controller
never leaves a workload behind), check the dataset copy, pin the CPUs, read the job's cluster, hide or pick
the GPUs."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from typing import Any

from dltestbed import dataset
from dltestbed.config import ProbeSpec, WorkloadSpec, parse_cpu_list
from dltestbed.errors import ConfigError, DataError
from dltestbed.workload import distributed
from dltestbed.workload.frameworks import framework

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


Prepared = tuple[dataset.DatasetIndex | None, dict[str, Any], distributed.Cluster | None]


def prepare(spec: WorkloadSpec | ProbeSpec, watch_stdin: bool, min_classes: int) -> Prepared:
    """What a model's run and a micro run do first, before TensorFlow loads: watch stdin, index and check
    the dataset copy (at least `min_classes` classes), pin the CPUs, read the cluster, hide the GPUs for
    --device cpu. The index, the dataset facts to record, and the cluster."""
    if watch_stdin:
        _watch_stdin()
    index = dataset.scan(spec.data_dir) if spec.data == "real" and spec.data_dir else None
    if index is not None and len(index.classes) < min_classes:
        raise ConfigError(f"data dir {spec.data_dir!r} has 1 class; at least 2 are needed")
    data_facts = _check_copy(spec, index) if index is not None else {}
    if spec.cpus:
        _pin(spec.cpus)
    cluster = framework(spec.framework).cluster(os.environ) if spec.distributed else None
    if spec.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # the HPEC'19 way of hiding the GPUs
    elif spec.gpu:
        os.environ["CUDA_VISIBLE_DEVICES"] = spec.gpu  # CUDA's device 0, the only one; NVML keeps only it too
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    return index, data_facts, cluster
