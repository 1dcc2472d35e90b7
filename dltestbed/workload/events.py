"""The workload's stdout protocol: one JSON object per line, versioned.

Every line is `{"v": SCHEMA_VERSION, "event": <kind>, ...}` with kind one of start, step,
resource, health (on a GPU: before and after the run), summary, accuracy (--accuracy), error; a `micro` run
(microbenchmarks) sends measure, check, skip and probes_done instead of step and summary. The events are here;
their lines are codec.py's: `encode` is used by the workload; `parse_line` (pure) by the controller.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class StartEvent:
    """The run begins: its resolved settings and the environment fingerprint."""

    spec: dict[str, Any]
    fingerprint: dict[str, Any]
    t: float
    event: str = field(default="start", init=False)


@dataclass(frozen=True)
class StepEvent:
    """One step, timed after its result was ready. phase is `warmup` or `timed`."""

    index: int
    phase: str
    images: int
    seconds: float
    images_per_sec: float
    t: float
    device: str | None = None  # the first step only: the device TensorFlow put its result on (e.g. .../device:GPU:0)
    libraries: dict[str, str] | None = None  # the first step only: CUDA libraries loaded by then, with versions
    # the step's result, as computed: the training loss, or in inference the sum of the logits (report/agreement
    # compares it step by step between layers); NaN or ±inf when the computation gave that
    result: float | None = None
    event: str = field(default="step", init=False)


@dataclass(frozen=True)
class ResourceEvent:
    """A resource sample: the workload process's RSS and CPU %, and each visible GPU."""

    t: float
    rss_bytes: int
    cpu_percent: float
    gpus: list[dict[str, Any]] = field(default_factory=list)  # NVML's view of each GPU (the whole device)
    gpu_bytes: list[int] | None = None  # bytes the framework's allocator holds, per GPU it sees (None: no GPU)
    event: str = field(default="resource", init=False)


@dataclass(frozen=True)
class HealthEvent:
    """Each GPU's health counters (gpu.Nvml.health) before or after the run; after it, also the XID errors
    seen while it ran. `unseen`: what NVML could not say from where the workload runs, with why."""

    phase: str  # before | after
    t: float
    gpus: list[dict[str, Any]]
    xids: list[dict[str, Any]] = field(default_factory=list)  # {index, xid, t}, in order
    unseen: list[str] = field(default_factory=list)
    event: str = field(default="health", init=False)


@dataclass(frozen=True)
class SummaryEvent:
    """The run's result over its timed steps (warm-up excluded, except in elapsed_seconds)."""

    timed_steps: int
    images: int
    timed_seconds: float
    mean_images_per_sec: float  # mean of the per-step images/sec
    images_per_sec: float  # total timed images / total timed seconds
    elapsed_seconds: float  # wall time of warm-up and timed steps
    first_step_seconds: float
    warmup_seconds: float
    startup_seconds: float | None = None  # from the workload process's start to its first step (imports, build)
    gpu_memory_peak_bytes: int | None = None  # the most TensorFlow's GPU allocator held at once (None: no GPU)
    compile_cache: str | None = None  # a compiled step's graphs: hit, miss or partial in the compile cache (None: none)
    event: str = field(default="summary", init=False)


@dataclass(frozen=True)
class AccuracyEvent:
    """--accuracy: after training, the model on the held-out images (not timed): how many it classified
    right (top-1) and its mean loss on them."""

    images: int
    correct: int
    loss: float
    t: float
    event: str = field(default="accuracy", init=False)


@dataclass(frozen=True)
class MeasureEvent:
    """One repetition of a microbenchmark case (a `micro` run): `value` in `unit` over `seconds`.
    Units are SI rates, higher is better: FLOP/s, B/s. phase is `warmup` or `timed`."""

    probe: str
    case: str
    index: int
    phase: str
    value: float
    unit: str
    seconds: float
    t: float
    event: str = field(default="measure", init=False)


@dataclass(frozen=True)
class CheckEvent:
    """A probe's result checked (a `micro` run): `kind` reference (against the same work in float64, within
    `tolerance`, the bound every correct implementation meets: workload/numerics.py) or repeat (the same
    inputs again: bit for bit, tolerance 0); `worst` is the largest error relative to |A|·|B| (inf: a NaN or
    inf where a number was expected). `gpu`: the GPU's index, None on the CPU; `seed`: its inputs'."""

    probe: str
    case: str
    kind: str
    elements: int
    mismatches: int
    worst: float
    tolerance: float
    seed: int
    t: float
    gpu: int | None = None
    where: str = ""  # the worst element in words (a screen: the first mismatch's, with its round's seed)
    rounds: int = 1  # a screen: the rounds of fresh inputs summed up here (elements, mismatches: over all)
    event: str = field(default="check", init=False)

    @property
    def ok(self) -> bool:
        """Every element within the tolerance."""
        return self.mismatches == 0


@dataclass(frozen=True)
class SkipEvent:
    """A probe (or one case of it, `case` not empty) that cannot run on this target, and why: stored as
    skipped with the reason, never as a number."""

    probe: str
    case: str
    reason: str
    event: str = field(default="skip", init=False)


@dataclass(frozen=True)
class ProbesDoneEvent:
    """A `micro` run made every case it could: how many timed measures and skips it emitted."""

    measures: int
    skips: int
    event: str = field(default="probes_done", init=False)


@dataclass(frozen=True)
class ErrorEvent:
    """The workload failed; it exits non-zero after this line."""

    kind: str
    message: str
    event: str = field(default="error", init=False)


@dataclass(frozen=True)
class Unparsed:
    """A stdout line that is not a valid event (kept for the run's log, never fatal)."""

    line: str
    reason: str
    event: str = field(default="unparsed", init=False)


Event = (
    StartEvent
    | StepEvent
    | ResourceEvent
    | HealthEvent
    | SummaryEvent
    | AccuracyEvent
    | MeasureEvent
    | CheckEvent
    | SkipEvent
    | ProbesDoneEvent
    | ErrorEvent
    | Unparsed
)
