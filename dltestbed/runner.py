"""Run one workload on one target: stream its events into the store, end with a stored status."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from dltestbed.config import Spec, WorkloadSpec, spec_json
from dltestbed.errors import DltestbedError
from dltestbed.results.records import RunRecord, new_id, now_iso
from dltestbed.results.store import Store
from dltestbed.shield import shielded
from dltestbed.targets.base import INTERRUPT, Aborted, CommandResult, Target
from dltestbed.workload.codec import parse_line
from dltestbed.workload.events import (
    AccuracyEvent,
    CheckEvent,
    ErrorEvent,
    Event,
    HealthEvent,
    MeasureEvent,
    ProbesDoneEvent,
    ResourceEvent,
    SkipEvent,
    StartEvent,
    StepEvent,
    SummaryEvent,
    Unparsed,
)
from dltestbed.workload.frameworks.base import COMPILE_CACHE_ENV
from dltestbed.workload.loop import on_gpu


class Observer(Protocol):
    """Progress display hooks (the CLI draws rich progress bars; tests may record calls)."""

    def begin(self, run: RunRecord) -> None: ...
    def step(self, run: RunRecord, ev: StepEvent) -> None: ...
    def end(self, run: RunRecord) -> None: ...


class NullObserver:
    """Shows nothing."""

    def begin(self, run: RunRecord) -> None:
        """Nothing."""

    def step(self, run: RunRecord, ev: StepEvent) -> None:
        """Nothing."""

    def end(self, run: RunRecord) -> None:
        """Nothing."""


class Sink(Protocol):
    """A time-series server results stream to: it renders each result as a point (None: none), which
    the store keeps in its outbox in the same transaction as the result, and sends the outbox itself.
    Never raises."""

    dest: str

    def step(self, run: RunRecord, ev: StepEvent) -> str | None: ...
    def resource(self, run: RunRecord, ev: ResourceEvent) -> str | None: ...
    def measure(self, run: RunRecord, ev: MeasureEvent) -> str | None: ...
    def finished(self, run: RunRecord) -> str | None: ...


def _points(sinks: Sequence[Sink], render: Callable[[Sink], str | None]) -> list[tuple[str, str]]:
    """(destination, point) of a result for each sink that has one."""
    return [(s.dest, line) for s in sinks if (line := render(s)) is not None]


@dataclass(frozen=True)
class RunContext:
    """Where a run sits in a bench."""

    bench_id: str
    scenario: str = "single"
    repetition: int = 1
    contention: str = "none"
    role: str = "foreground"
    job_id: str | None = None
    workers: int = 1
    worker_index: int | None = None
    arm: str = ""  # "A′": the baseline kind's second run in a repetition (--aa)


SECOND_ARM = "second-arm"  # A′'s compile caches, inside bare metal's folder


def for_target(spec: Spec, target: Target) -> Spec:
    """The spec as the workload on `target` runs it: real data read from the target's own copy or mount."""
    if spec.data == "real" and target.data_dir is not None:
        return spec.model_copy(update={"data_dir": target.data_dir})
    return spec


def compile_cache(target: Target, ctx: RunContext) -> str | None:
    """Where the run keeps its compile caches: its kind's folder on its machine, and A/A's second arm a folder of
    its own inside it (the two arms compared start alike)."""
    folder = target.compile_cache
    return f"{folder}/{SECOND_ARM}" if folder and ctx.arm else folder


def workload_argv(target: Target, spec: Spec) -> list[str]:
    """The command line that runs the workload on a target."""
    # its stdin closes when dltestbed is gone (a lost SSH session, a killed controller): it stops then
    return [target.python, "-m", "dltestbed.workload", "--spec", spec_json(spec), "--watch-stdin"]


class _Collector:
    """Applies a run's events to its record and the store as lines arrive."""

    def __init__(self, run: RunRecord, store: Store, observer: Observer, sinks: Sequence[Sink] = ()) -> None:
        self.run = run
        self.store = store
        self.observer = observer
        self.sinks = sinks
        self.summary: SummaryEvent | None = None
        self.probes_done: ProbesDoneEvent | None = None
        self.measures = 0  # timed measures of a micro run
        self.error: ErrorEvent | None = None
        self.unparsed: list[Unparsed] = []
        self.timed: list[StepEvent] = []
        self.seen: set[tuple[object, ...]] = set()  # the steps' and measures' keys: a repeat is not stored again
        self.started: float | None = None
        self.launched = time.monotonic()  # when the workload's command was started (execute sets it)

    def on_line(self, line: str) -> None:
        self.apply(parse_line(line))

    def apply(self, ev: Event) -> None:
        match ev:
            case StepEvent():
                if not self._first(("step", ev.index)):
                    self.unparsed.append(Unparsed(f"step {ev.index}", "a step index seen before: ignored"))
                    return
                self.store.add_step(self.run.id, ev, _points(self.sinks, lambda s: s.step(self.run, ev)))
                self.run.steps_done += 1
                if ev.device is not None or ev.libraries:  # where TensorFlow really ran the step, and the CUDA
                    # libraries it loaded for it: part of the environment
                    said = {"step_device": ev.device} if ev.device is not None else {}
                    if ev.device is not None:  # where the first step's result really was: the device it ran on
                        self.run.used_device = "gpu" if on_gpu(ev.device) else "cpu"
                    self.run.fingerprint = {**self.run.fingerprint, **said, **(ev.libraries or {})}
                    self.store.save_run(self.run)
                if ev.phase == "timed":
                    self.timed.append(ev)
                self.observer.step(self.run, ev)
            case ResourceEvent():
                self.store.add_resource(self.run.id, ev, _points(self.sinks, lambda s: s.resource(self.run, ev)))
            case HealthEvent():
                self.store.add_health(self.run.id, ev)
            case StartEvent():
                self.started = ev.t
                self.run.fingerprint = {**ev.fingerprint, **self.run.fingerprint}
                # what the target used, recorded once on the run: the math (`mixed`: the one it chose; the spec keeps
                # the math asked), the framework
                asked = {"math_asked": self.run.math} if self.run.math else {}
                self.run.spec = {**ev.spec, **asked}
                self.run.math = str(ev.spec.get("math") or self.run.math)
                self.run.framework = str(ev.spec.get("framework") or self.run.framework)
                self.run.used_device = str(ev.spec.get("device_used") or self.run.used_device)
                self.store.save_run(self.run)
            case MeasureEvent():
                if not self._first(("measure", ev.probe, ev.case, ev.index)):
                    self.unparsed.append(Unparsed(f"{ev.probe} {ev.case} {ev.index}", "a measure seen before: ignored"))
                    return
                self.store.add_measure(self.run.id, ev, _points(self.sinks, lambda s: s.measure(self.run, ev)))
                self.run.steps_done += 1
                self.measures += ev.phase == "timed"
            case SkipEvent():
                self.store.add_skip(self.run.id, ev)
            case CheckEvent():
                self.store.add_check(self.run.id, ev)
            case ProbesDoneEvent():
                self.probes_done = ev
            case SummaryEvent():
                self.summary = ev
            case AccuracyEvent():
                self.run.eval_images, self.run.eval_correct = ev.images, ev.correct
                self.run.eval_loss = ev.loss if math.isfinite(ev.loss) else None
                self.store.save_run(self.run)
            case ErrorEvent():
                self.error = ev
            case Unparsed():
                self.unparsed.append(ev)

    def _first(self, key: tuple[object, ...]) -> bool:
        """Whether this step or measure is new to the run (the store is written later, by its writer thread)."""
        if key in self.seen:
            return False
        self.seen.add(key)
        return True

    def partial_summary(self) -> SummaryEvent | None:
        """A summary of the timed steps seen so far (for a run stopped before its end), or None."""
        if not self.timed:
            return None
        images = sum(e.images for e in self.timed)
        seconds = sum(e.seconds for e in self.timed)
        return SummaryEvent(
            timed_steps=len(self.timed),
            images=images,
            timed_seconds=seconds,
            mean_images_per_sec=sum(e.images_per_sec for e in self.timed) / len(self.timed),
            images_per_sec=images / seconds,
            elapsed_seconds=self.timed[-1].t - (self.started or self.timed[0].t),
            first_step_seconds=0.0,
            warmup_seconds=0.0,
        )


def _failure_reason(result: CommandResult | None, col: _Collector) -> str | None:
    """None when the run succeeded, else why it did not, in one line: what ended it from outside (a
    scheduler's time limit) first, then what the workload said."""
    why = _workload_reason(result, col)
    if result is not None and result.ended_by:
        return result.ended_by + (f" (the workload: {why})" if why else "")
    return why


def _workload_reason(result: CommandResult | None, col: _Collector) -> str | None:
    if result is not None and result.ok and (col.summary or col.probes_done) and not col.error:
        if col.probes_done and col.probes_done.measures != col.measures:
            return f"the workload sent {col.measures} timed measures and said {col.probes_done.measures}"
        return None
    if col.error:
        return f"{col.error.kind}: {col.error.message}"
    if result is None:
        return "the workload did not start"
    if result.ok:
        return "the workload exited without a summary"
    last = next((line for line in reversed(result.stderr_tail) if line.strip()), "")
    return f"workload {result.describe()}" + (f": {last.strip()[:300]}" if last else "")


def _new_record(target: Target, spec: Spec, ctx: RunContext) -> RunRecord:
    """The run as it starts: what runs where, in which context of the bench."""
    return RunRecord(
        id=new_id("r"),
        bench_id=ctx.bench_id,
        started_at=now_iso(),
        scenario=ctx.scenario,
        target_kind=target.kind,
        target_name=target.name,
        host=target.host,
        machine=target.machine,
        model=spec.model,
        data=spec.data,
        mode=spec.mode,
        device=spec.device,
        batch_size=spec.batch_size,
        image_size=spec.size,
        warmup=spec.warmup,
        steps=spec.steps,
        repetition=ctx.repetition,
        contention=ctx.contention,
        role=ctx.role,
        job_id=ctx.job_id,
        workers=ctx.workers,
        worker_index=ctx.worker_index,
        fingerprint=dict(target.fingerprint()),
        spec=spec.model_dump(),
        arm=ctx.arm,
        math=spec.math if isinstance(spec, WorkloadSpec) else "",
        framework=spec.framework,
        xla=isinstance(spec, WorkloadSpec) and spec.xla,
    )


def execute(
    target: Target,
    spec: Spec,
    store: Store,
    ctx: RunContext,
    observer: Observer | None = None,
    timeout: float | None = None,
    *,
    env: Mapping[str, str] | None = None,
    sinks: Sequence[Sink] = (),
    on_start: threading.Event | None = None,
) -> RunRecord:
    """Run spec on target and return its stored record (status ok or failed, never raising for a
    failed workload). Ctrl-C, here or passed on by another thread (`abort()`), stores the run as failed,
    keeps its steps, and is raised again; any other abort ends the run as its reason says, without raising.
    on_start is set once the first timed step has arrived (not when the run ends: the return says that)."""
    observer = observer or NullObserver()
    spec = for_target(spec, target)
    run = _new_record(target, spec, ctx)
    log = store.log_dir / f"{run.id}.log"
    run.log_path = str(log)
    store.save_run(run)
    observer.begin(run)
    col = _Collector(run, store, observer, sinks)
    on_line = _line_handler(col, on_start)
    result: CommandResult | None = None
    col.launched = time.monotonic()
    try:
        run_env = _workload_env(target, ctx, run.id, env)
        result = target.run(
            workload_argv(target, spec),
            env=run_env,
            timeout=timeout,
            on_line=on_line,
            stderr_log=log,
        )
        reason = _failure_reason(result, col)
    except (KeyboardInterrupt, Aborted) as exc:
        why = exc.why if isinstance(exc, Aborted) else INTERRUPT
        if why.interrupted:
            with shielded():  # a second Ctrl-C still stores the run's end
                _finish(run, store, col, why.failure, sinks)
            observer.end(run)
            raise
        reason = why.failure
        if reason is None:
            reason = _stopped_reason(col)
    except DltestbedError as exc:
        reason = str(exc)

    _log_unparsed(log, col.unparsed)
    _finish(run, store, col, reason, sinks)
    observer.end(run)
    return run


def _line_handler(col: _Collector, on_start: threading.Event | None) -> Callable[[str], None]:
    """The collector's line handler, that also sets on_start (when given) once a timed step has arrived."""
    if on_start is None:
        return col.on_line

    def on_line(line: str) -> None:
        col.on_line(line)
        if col.timed:
            on_start.set()

    return on_line


def _workload_env(target: Target, ctx: RunContext, run_id: str, env: Mapping[str, str] | None) -> dict[str, str]:
    """The workload's environment: the caller's, the run's ids (a container's labels) and its compile cache."""
    ids = {"DLTESTBED_BENCH_ID": ctx.bench_id, "DLTESTBED_RUN_ID": run_id}  # a container's labels
    folder = compile_cache(target, ctx)
    cache = {COMPILE_CACHE_ENV: folder} if folder else {}
    return {**(env or {}), **ids, **cache}


def _stopped_reason(col: _Collector) -> str | None:
    """A run stopped without a failure: ok on the timed steps it has, else failed as stopped before them."""
    col.summary = col.partial_summary()
    col.error = None
    if col.summary is None:
        return "stopped before its first timed step"
    return None


def _log_unparsed(log: Path, unparsed: Sequence[Unparsed]) -> None:
    """Lines of the workload's stdout that were not events go to its log, each with why."""
    if unparsed:
        with log.open("a", encoding="utf-8") as f:
            for u in unparsed:
                f.write(f"[dltestbed] stdout line not an event ({u.reason}): {u.line}\n")


def _finish(run: RunRecord, store: Store, col: _Collector, reason: str | None, sinks: Sequence[Sink]) -> None:
    run.finished_at = now_iso()
    run.wall_seconds = time.monotonic() - col.launched
    if col.summary:
        s = col.summary
        run.images_per_sec = s.images_per_sec
        run.mean_images_per_sec = s.mean_images_per_sec
        run.timed_seconds = s.timed_seconds
        run.elapsed_seconds = s.elapsed_seconds
        run.first_step_seconds = s.first_step_seconds
        run.startup_seconds = s.startup_seconds
        run.gpu_memory_peak_bytes = s.gpu_memory_peak_bytes
        run.compile_cache = s.compile_cache
    run.status = "failed" if reason else "ok"
    run.reason = reason
    store.save_run(run, _points(sinks, lambda s: s.finished(run)))
    store.flush()  # the run's every result committed before it is said to be over
