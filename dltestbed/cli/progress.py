"""Rich progress for runs: the bench's line (run 5/12, time left), one bar per run (steps, current
images/sec), one line when a run ends."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from rich.console import Console, RenderableType
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.text import Text

from dltestbed.choices import DEFAULT_FRAMEWORK
from dltestbed.results.ids import short
from dltestbed.results.records import COTENANT, RunRecord
from dltestbed.workload import steady
from dltestbed.workload.events import StepEvent


def label(run: RunRecord) -> str:
    """e.g. `bm:local alexnet train synthetic 64px bs8 rep 1`, with the run's part in its scenario."""
    if run.is_probe:
        probes = ",".join(run.spec.get("probes", ()))
        return f"{run.target_kind}:{run.target_name} micro {probes} {run.data} rep {run.repetition}"
    framework = f" ({run.framework})" if run.framework != DEFAULT_FRAMEWORK else ""  # the default: unchanged
    text = (
        f"{run.target_kind}:{run.target_name} {run.model}{framework} {run.mode} {run.data} "
        f"{run.image_size}px bs{run.batch_size} rep {run.repetition}"
    )
    if run.role == COTENANT:
        return f"co-tenant {text}"
    if run.worker_index is not None:
        text += f" worker {run.worker_index + 1}/{run.workers}"
    elif run.scenario == "distributed":
        text += " (1 worker alone)"
    if run.contention != "none":
        text += f" under {run.contention}"
    return text


class _Bars(Progress):
    """Progress bars under one line about the whole bench, made afresh at each refresh."""

    header: Callable[[], str] | None = None

    def get_renderables(self) -> Iterable[RenderableType]:
        if self.header is not None:
            yield Text(self.header(), style="bold")
        yield self.make_tasks_table(self.tasks)


class RichObserver:
    """Draws the progress of each run on stderr (stdout stays free for --json)."""

    def __init__(self, console: Console, clock: Callable[[], float] = time.monotonic) -> None:
        self.console = console
        self.clock = clock
        self.progress = _Bars(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("steps  {task.fields[phase]:>6}  {task.fields[ips]:>8} img/s"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self._tasks: dict[str, TaskID] = {}
        self._sized: set[str] = set()  # runs warming up until steady whose bar has its final size
        self.total: int | None = None  # runs the bench will make (at most, with --repeat auto)
        self.at_most = False
        self.done = 0  # runs ended (co-tenants not counted)
        self._started = self.clock()
        self.progress.header = self.overall

    def __enter__(self) -> RichObserver:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress.live.is_started:
            self.progress.stop()

    def say(self, line: str) -> None:
        """A line of what the bench chose or did, above the bars."""
        self.console.print(escape(line), highlight=False, soft_wrap=True)

    def expect(self, runs: int, at_most: bool) -> None:
        """The bench's size: its line counts the runs against it."""
        self.total, self.at_most = runs, at_most
        self._started = self.clock()

    def overall(self) -> str:
        """`run 5/12 · 1 min 20 s elapsed · about 2 min left` (the mean run so far times the runs to go)."""
        elapsed = self.clock() - self._started
        if self.total is None:
            return f"run {self.done + 1} · {duration(elapsed)} elapsed"
        upto = "up to " if self.at_most else ""
        text = f"run {min(self.done + 1, self.total)}/{upto}{self.total} · {duration(elapsed)} elapsed"
        if self.done:
            left = elapsed / self.done * max(0, self.total - self.done)
            text += f" · about {duration(left)} left"
        return text

    def begin(self, run: RunRecord) -> None:
        """A bar for the run, sized warm-up + timed steps (the bars start with the first run)."""
        if not self.progress.live.is_started:
            self.progress.start()
        self._tasks[run.id] = self.progress.add_task(
            escape(label(run)),
            total=_steps(run) if run.role != COTENANT and not run.is_probe else None,
            phase="start",
            ips="—",
        )

    def step(self, run: RunRecord, ev: StepEvent) -> None:
        """Advance the run's bar; a warm-up until steady grows the bar while it lasts, and sizes it at its end."""
        task = self._tasks[run.id]
        if run.warmup is None and run.id not in self._sized:
            if ev.phase == "timed":  # the first timed step: the warm-up took ev.index steps
                self._sized.add(run.id)
                self.progress.update(task, total=ev.index + run.steps)
            else:
                self.progress.update(task, total=max(ev.index + 1 + run.steps, _steps(run)))
        self.progress.update(task, completed=ev.index + 1, phase=ev.phase, ips=f"{ev.images_per_sec:.1f}")

    def end(self, run: RunRecord) -> None:
        """Replace the bar by one line: the result or the reason it failed."""
        task = self._tasks.pop(run.id, None)
        if task is not None:
            self.progress.remove_task(task)
        if run.role != COTENANT:
            self.done += 1
        if run.status == "ok" and run.is_probe:
            self.progress.console.print(
                f"[green]ok[/]     {escape(label(run))}: {run.steps_done} measures  [dim]{short(run.id)}[/]",
                highlight=False,
                soft_wrap=True,
            )
        elif run.status == "ok":
            self.progress.console.print(
                f"[green]ok[/]     {escape(label(run))}: {run.images_per_sec:.1f} img/s, "
                f"elapsed {run.elapsed_seconds:.1f} s  [dim]{short(run.id)}[/]",
                highlight=False,
                soft_wrap=True,
            )
        else:
            self.progress.console.print(
                f"[red]failed[/] {escape(label(run))}: {escape(run.reason or '')}  [dim]{short(run.id)}[/]",
                highlight=False,
                soft_wrap=True,
            )


def duration(seconds: float) -> str:
    """`45 s`, `3 min 20 s`, `1 h 05 min`."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def _steps(run: RunRecord) -> int:
    """A run's steps: warm-up and timed; a warm-up until steady counted as its shortest (a window) until
    it ends."""
    return (run.warmup if run.warmup is not None else steady.WINDOW) + run.steps
