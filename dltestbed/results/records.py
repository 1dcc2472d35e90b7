"""What is stored about a run: what ran where, how it ended, and its result."""

from __future__ import annotations

import secrets
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any


def new_id(prefix: str) -> str:
    """A sortable, readable, unique id: prefix-YYYYmmdd-HHMMSS-xxxxxx (UTC)."""
    return f"{prefix}-{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def now_iso() -> str:
    """The current UTC time, ISO 8601 with seconds."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def gpu_label(index: int) -> str:
    """A GPU's name beside its machine in a run's unit (`node1/gpu3`): NVML's (nvidia-smi's) index."""
    return f"gpu{index}"


COTENANT = "cotenant"  # a run's role: the load a shared run ran under
REFERENCE = "reference"  # a run's role: a loop written outside the workload, beside the bench's own runs


@dataclass
class RunRecord:
    """One workload run on one target. status: running, ok or failed (with reason)."""

    id: str
    bench_id: str
    started_at: str
    scenario: str
    target_kind: str
    target_name: str
    host: str
    model: str
    data: str
    mode: str
    device: str
    batch_size: int
    image_size: int
    warmup: int | None  # None: until steady
    steps: int
    repetition: int
    status: str = "running"
    reason: str | None = None
    finished_at: str | None = None
    contention: str = "none"  # what else ran on the host meanwhile (shared scenario), e.g. alexnet-b64
    role: str = "foreground"  # foreground: measured; COTENANT: the load a shared run ran under; REFERENCE: a loop
    # written outside dltestbed's workload, run in the same bench (bench/harness_fidelity.py)
    job_id: str | None = None  # runs measured together: the workers of a distributed job, or a shared pair
    workers: int = 1  # workers in the run's distributed job (1: not distributed)
    worker_index: int | None = None
    images_per_sec: float | None = None  # total timed images / total timed seconds
    mean_images_per_sec: float | None = None  # mean of per-step images/sec
    timed_seconds: float | None = None
    elapsed_seconds: float | None = None
    first_step_seconds: float | None = None
    steps_done: int = 0  # steps stored (a micro run: measures stored)
    log_path: str | None = None
    fingerprint: dict[str, Any] = field(default_factory=dict)
    spec: dict[str, Any] = field(default_factory=dict)
    machine: str | None = None  # the physical machine under every layer (a VM's host); stores before schema 3: host
    arm: str = ""  # "A′": the second run of the baseline kind in a repetition (--aa), its noise floor
    math: str = ""  # the arithmetic the run used (config.Math: `mixed` resolved on the target); "" for a micro run
    xla: bool = False  # the step compiled with XLA
    gpu_memory_peak_bytes: int | None = None  # the most TensorFlow's GPU allocator held at once
    startup_seconds: float | None = None  # the workload process's start to its first step (imports, model build)
    wall_seconds: float | None = None  # launch to finish, as the controller saw it: the layer's own start-up
    # (a container created, a process over SSH), the workload's start-up, its steps and its exit
    eval_images: int | None = None  # --accuracy: the held-out images the trained model classified ...
    eval_correct: int | None = None  # ... how many it classified right (top-1) ...
    eval_loss: float | None = None  # ... and its mean loss on them
    framework: str = "tensorflow"  # what the run computed with (choices.FRAMEWORKS), as its workload said
    used_device: str = ""  # where its steps ran (cpu or gpu), as its workload said; "" before its start event
    compile_cache: str | None = None  # a compiled step's graphs from the bench's compile cache: hit, miss, partial

    @property
    def top1(self) -> float | None:
        """--accuracy: the share of held-out images classified right, or None."""
        return self.eval_correct / self.eval_images if self.eval_images and self.eval_correct is not None else None

    def __post_init__(self) -> None:
        if not self.machine:
            self.machine = self.host

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)

    @property
    def unit(self) -> str:
        """What a run measured, as the report compares them: its physical machine, and with --gpus per-gpu its
        GPU beside it (`node1/gpu3`: NVML's index as the controller read it before the run, whatever the run
        itself saw, so that a failed run is named as its GPU's others are)."""
        machine = str(self.machine or self.host)
        index, uuid = self.spec.get("gpu_index"), self.spec.get("gpu")
        return machine if not uuid else f"{machine}/{gpu_label(index)}" if index is not None else f"{machine}/{uuid}"

    @property
    def measured(self) -> bool:
        """A run of dltestbed's own workload that its bench measured: not a co-tenant's load, not a reference loop."""
        return self.role not in (COTENANT, REFERENCE)

    @property
    def is_probe(self) -> bool:
        """A microbenchmark run (`micro`): measures and skips instead of steps; no images/sec."""
        return self.mode == "probe"

    @property
    def runtime(self) -> str:
        """The container runtime a cbm or cvm run's container ran under; "" for every other kind."""
        return str(self.fingerprint.get("container_runtime") or "")

    @property
    def vm_image(self) -> str:
        """The user's own image a vm run booted (its file name); "" for dltestbed's guest image and
        every other kind. Runs on different images are different layers: never averaged together."""
        return str(self.fingerprint.get("vm_image_name") or "")
