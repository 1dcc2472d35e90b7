"""The timed loop: warm-up steps, then timed steps, each timed only once its result is ready."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from dltestbed.errors import ConfigError
from dltestbed.workload.events import StepEvent, SummaryEvent
from dltestbed.workload.steady import Warmup


def on_gpu(device: str | None) -> bool:
    """Whether a framework's device name is a GPU's: TensorFlow's "/job:localhost/replica:0/task:0/device:GPU:0",
    PyTorch's "cuda:0"."""
    return device is not None and (":GPU:" in device.upper() or device.startswith("cuda"))


class StepError(Exception):
    """A step failed; `index` says which (the cause is chained)."""

    def __init__(self, index: int) -> None:
        super().__init__(f"step {index} failed")
        self.index = index


def run(
    step: Callable[[Any, Any], Any],
    batches: Iterator[tuple[Any, Any]],
    batch_size: int,
    warmup: int | Warmup | None,
    steps: int,
    emit: Callable[[StepEvent], None],
    require_gpu: bool = False,
    libraries: Callable[[], dict[str, str]] | None = None,
    warmed: Callable[[], None] | None = None,
    agree: Callable[[bool], bool] | None = None,
) -> SummaryEvent:
    """Run warm-up steps (a count, or until steady: workload/steady.py), then `steps` timed steps, emitting
    each with its result (the loss); the input fetch is inside the step's time. The first step's event says
    the device its result was put on, and what `libraries` says then (the CUDA libraries loaded: cuDNN and
    cuBLAS load at their first use); with `require_gpu`, a first step that did not run on a GPU ends the run
    (ConfigError) before any other step. `warmed` is called once, after the last warm-up step (what the run's
    steady state is measured from: the allocator's peak, say). `agree`: in a distributed job, whether every
    worker's warm-up is done (each step is a collective: the workers end their warm-up at the same step)."""
    policy = warmup if isinstance(warmup, Warmup) else Warmup(warmup)
    timed: list[float] = []
    warm: list[float] = []  # the warm-up steps' images/sec, which the policy judges
    first = 0.0
    warm_total = 0.0
    warming = not policy.done(warm)
    start = time.perf_counter()
    i = 0
    while len(timed) < steps:
        result, value, dt = _timed_step(step, batches, i)
        device, libs = None, None
        if i == 0:
            first = dt
            device, libs = _first_step_facts(result, libraries)
        phase = "warmup" if warming else "timed"
        if warming:
            warm_total += dt
            warm.append(batch_size / dt)
        else:
            timed.append(dt)
        emit(_step_event(i, phase, batch_size, dt, device, libs, value))
        if i == 0 and require_gpu and not on_gpu(device):
            raise ConfigError(f"--device gpu: the first step ran on {device or 'an unknown device'}, not a GPU")
        if warming and (policy.done(warm) if agree is None or not policy.steady else agree(policy.done(warm))):
            warming = False
            if warmed is not None:
                warmed()
        i += 1
    elapsed = time.perf_counter() - start
    return _summary(timed, batch_size, elapsed, first, warm_total)


def _timed_step(
    step: Callable[[Any, Any], Any], batches: Iterator[tuple[Any, Any]], i: int
) -> tuple[Any, float, float]:
    """Fetch a batch and run step `i` on it: its result, the result's value, and the seconds until it was ready."""
    t0 = time.perf_counter()
    try:
        images, labels = next(batches)
        result = step(images, labels)
        value = float(result)  # blocks until the device has produced the value
    except Exception as exc:
        raise StepError(i) from exc
    return result, value, time.perf_counter() - t0


def _first_step_facts(
    result: Any, libraries: Callable[[], dict[str, str]] | None
) -> tuple[str | None, dict[str, str] | None]:
    """The device the first step's result was put on, and the CUDA libraries loaded then (None: unknown)."""
    device = str(getattr(result, "device", "") or "") or None
    libs = (libraries() or None) if libraries else None
    return device, libs


def _step_event(
    i: int,
    phase: str,
    batch_size: int,
    dt: float,
    device: str | None,
    libs: dict[str, str] | None,
    value: float,
) -> StepEvent:
    """The event of one step, warm-up or timed."""
    return StepEvent(
        index=i,
        phase=phase,
        images=batch_size,
        seconds=dt,
        images_per_sec=batch_size / dt,
        t=time.time(),
        device=device,
        libraries=libs,
        result=value,
    )


def _summary(timed: list[float], batch_size: int, elapsed: float, first: float, warm_total: float) -> SummaryEvent:
    """The run's summary, from its timed steps' seconds."""
    total = sum(timed)
    return SummaryEvent(
        timed_steps=len(timed),
        images=batch_size * len(timed),
        timed_seconds=total,
        mean_images_per_sec=sum(batch_size / s for s in timed) / len(timed),
        images_per_sec=batch_size * len(timed) / total,
        elapsed_seconds=elapsed,
        first_step_seconds=first,
        warmup_seconds=warm_total,
    )
