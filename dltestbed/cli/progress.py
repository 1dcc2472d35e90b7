"""Rich progress for runs: one bar per run (steps, current images/sec), one line when it ends."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from dltestbed.results.records import RunRecord
from dltestbed.workload.events import StepEvent


def label(run: RunRecord) -> str:
    """e.g. `bm:local alexnet train synthetic 64px bs8 rep 1`, with the run's part in its scenario."""
    if run.is_probe:
        probes = ",".join(run.spec.get("probes", ()))
        return f"{run.target_kind}:{run.target_name} micro {probes} {run.data} rep {run.repetition}"
    text = (
        f"{run.target_kind}:{run.target_name} {run.model} {run.mode} {run.data} "
        f"{run.image_size}px bs{run.batch_size} rep {run.repetition}"
    )
    if run.role == "cotenant":
        return f"co-tenant {text}"
    if run.worker_index is not None:
        text += f" worker {run.worker_index + 1}/{run.workers}"
    elif run.scenario == "distributed":
        text += " (1 worker alone)"
    if run.contention != "none":
        text += f" under {run.contention}"
    return text


class RichObserver:
    """Draws the progress of each run on stderr (stdout stays free for --json)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("steps  {task.fields[phase]:>6}  {task.fields[ips]:>8} img/s"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self._tasks: dict[str, TaskID] = {}

    def __enter__(self) -> RichObserver:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress.live.is_started:
            self.progress.stop()

    def say(self, line: str) -> None:
        """A line of what the bench chose or did, above the bars."""
        self.console.print(escape(line), highlight=False, soft_wrap=True)

    def begin(self, run: RunRecord) -> None:
        """A bar for the run, sized warm-up + timed steps (the bars start with the first run)."""
        if not self.progress.live.is_started:
            self.progress.start()
        self._tasks[run.id] = self.progress.add_task(
            escape(label(run)),
            total=run.warmup + run.steps if run.role != "cotenant" and not run.is_probe else None,
            phase="start",
            ips="—",
        )

    def step(self, run: RunRecord, ev: StepEvent) -> None:
        """Advance the run's bar."""
        self.progress.update(
            self._tasks[run.id], completed=ev.index + 1, phase=ev.phase, ips=f"{ev.images_per_sec:.1f}"
        )

    def end(self, run: RunRecord) -> None:
        """Replace the bar by one line: the result or the reason it failed."""
        task = self._tasks.pop(run.id, None)
        if task is not None:
            self.progress.remove_task(task)
        if run.status == "ok" and run.is_probe:
            self.progress.console.print(
                f"[green]ok[/]     {escape(label(run))}: {run.steps_done} measures  [dim]{run.id}[/]",
                highlight=False,
                soft_wrap=True,
            )
        elif run.status == "ok":
            self.progress.console.print(
                f"[green]ok[/]     {escape(label(run))}: {run.images_per_sec:.1f} img/s, "
                f"elapsed {run.elapsed_seconds:.1f} s  [dim]{run.id}[/]",
                highlight=False,
                soft_wrap=True,
            )
        else:
            self.progress.console.print(
                f"[red]failed[/] {escape(label(run))}: {escape(run.reason or '')}  [dim]{run.id}[/]",
                highlight=False,
                soft_wrap=True,
            )
