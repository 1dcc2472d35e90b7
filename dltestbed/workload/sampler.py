"""Background resource sampling at a fixed interval: process RSS and CPU %, GPU memory, use, clocks, power,
temperature and throttle reasons (NVML's view of each device, and what TensorFlow's own allocator holds);
and each GPU's health counters before and after the run, with the XIDs seen while it lasts."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

import psutil

from dltestbed.workload.events import HealthEvent, ResourceEvent
from dltestbed.workload.gpu import Nvml


class Sampler:
    """Emits a ResourceEvent every `interval` seconds from a daemon thread until stopped."""

    def __init__(
        self,
        emit: Callable[[ResourceEvent], None],
        interval: float,
        nvml: Nvml | None,
        held_bytes: Callable[[], list[int]] | None = None,  # the framework allocator's, per GPU
    ) -> None:
        self._emit = emit
        self._interval = interval
        self._nvml = nvml
        self._held_bytes = held_bytes
        self._proc = psutil.Process()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="dltestbed-sampler", daemon=True)
        self.unseen: list[str] = []  # why GPU samples stopped, when they did: the run's health check says so

    def sample(self) -> ResourceEvent:
        """One sample now. CPU % is since the previous sample, in % of one core (can exceed 100). A GPU read that
        fails (the driver, a GPU lost mid-run) ends the GPU samples, never the run nor the CPU samples: the
        first such error is kept in `unseen`."""
        with self._proc.oneshot():
            rss = self._proc.memory_info().rss
            cpu = self._proc.cpu_percent(interval=None)
        gpus = self._gpus()
        held = None
        if self._held_bytes is not None:
            try:
                held = self._held_bytes()
            except Exception as exc:  # the framework's allocator stats: as for NVML, the run goes on
                self._held_bytes = None
                self.unseen.append(f"GPU samples: the framework's memory stats stopped ({type(exc).__name__}: {exc})")
        return ResourceEvent(
            t=time.time(), rss_bytes=int(rss), cpu_percent=float(cpu), gpus=gpus, gpu_bytes=held or None
        )

    def _gpus(self) -> list[dict[str, object]]:
        if self._nvml is None:
            return []
        try:
            return self._nvml.sample()
        except Exception as exc:  # anything: on the sampler's thread it would end sampling unseen
            self._nvml = None
            self.unseen.append(f"GPU samples: stopped ({type(exc).__name__}: {exc})")
            return []

    def start(self) -> None:
        """Prime the CPU counter, emit a first sample now (so even a run shorter than the interval has its
        start and its end: the memory figure needs two), and start sampling."""
        self._proc.cpu_percent(interval=None)
        self._emit(self.sample())
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling and emit one last sample."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self._emit(self.sample())

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Sampling while the block runs: a sample at its start, each interval, and at its end."""
        self.start()
        try:
            yield
        finally:
            self.stop()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self._emit(self.sample())


@contextlib.contextmanager
def watched(nvml: Nvml | None, emit: Callable[[HealthEvent], None], sampler: Sampler | None = None) -> Iterator[None]:
    """The health counters of every GPU before the block, its XIDs watched while it runs, and the counters
    after it, whatever ends it (a failed run's GPU is the one most worth checking); the after check also says
    why the `sampler`'s GPU samples stopped, if they did. No GPU: nothing."""
    if nvml is None:
        yield
        return
    gpus, unseen = nvml.health()
    emit(HealthEvent(phase="before", t=time.time(), gpus=gpus, unseen=unseen))
    watch = nvml.watch_xids()
    try:
        yield
    finally:
        xids = watch.stop()
        gpus, unseen = nvml.health()
        unseen += [watch.why_not] if watch.why_not else []
        unseen += sampler.unseen if sampler is not None else []
        emit(HealthEvent(phase="after", t=time.time(), gpus=gpus, xids=xids, unseen=unseen))
