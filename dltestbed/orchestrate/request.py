"""What a bench is asked (a frozen request: what `dltestbed bench`'s options say), what it gives back (an
outcome), and who hears of its progress (an observer)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from dltestbed.choices import ONE
from dltestbed.errors import DltestbedError
from dltestbed.orchestrate.scenarios import Options
from dltestbed.runner import NullObserver, Observer

if TYPE_CHECKING:
    from dltestbed.results.influx import Settings as StreamSettings
    from dltestbed.results.records import RunRecord


@dataclass(frozen=True)
class Workloads:
    """What runs: the models or probes, their data, math and sizes (None: the preset's)."""

    models: tuple[str, ...] = ()
    frameworks: tuple[str, ...] = ()  # each model with each, interleaved (none given: config.DEFAULT_FRAMEWORK)
    preset: str = "auto"
    suite: str = "study"
    probes: tuple[str, ...] | None = None
    probe_scale: str | None = None  # None: the preset's
    data: str = "synthetic"
    data_dir: Path | None = None
    data_shared: bool = False
    mode: str = "train"
    device: str = "auto"
    math: str | None = None
    xla: bool | None = None
    gpu_memory_mib: int | None = None
    batch_size: int | None = None
    image_size: int | None = None
    warmup: int | str | None = None  # a count, config.STEADY, or None: the preset's
    steps: int | None = None
    classes: int = 1000
    deterministic: bool = False  # op determinism: every step's loss comparable bit for bit between layers
    gpus: str = ONE  # choices.Gpus, the placement: one GPU, every GPU of the machine in one job, or a process each
    screen_seconds: float = 60.0  # --suite screen: how long the checks run per GPU
    accuracy: bool = False  # real data: train on 4/5 of the images, then top-1 on the held-out fifth


@dataclass(frozen=True)
class Repetitions:
    """How often and in which order: a count or "auto" (to ±precision %), A/A, the order and its seed."""

    repeat: str = "3"
    precision: float = 2.0
    max_repeat: int = 20
    aa: bool = False
    order: str = "interleaved"
    seed: int = 0


@dataclass(frozen=True)
class SlurmOptions:
    """What `bench` was given for Slurm (each documented in `bench --help`)."""

    partition: str | None = None
    nodes: int | None = None
    account: str | None = None
    time: str | None = None
    venv: str | None = None


@dataclass(frozen=True)
class Machines:
    """Where it runs: the target kinds, the hosts (an inventory, or this machine), the launcher, the
    container runtime and limits, and the --vm-* settings over the inventory's."""

    targets: tuple[str, ...] = ("auto",)
    inventory: Path | None = None
    limit: str | None = None
    groups: tuple[str, ...] = ()
    launcher: str = "direct"  # or slurm
    slurm: SlurmOptions = field(default_factory=SlurmOptions)
    runtime: str | None = None
    container_cpuset: str | None = None
    container_memory: str | None = None
    as_user: str | None = None  # bm's and cbm's workloads run as this user (rootless runtimes' CLIs too)
    vm: Mapping[str, Any] = field(default_factory=dict)  # vmready's overrides: vcpus, memory_mib, gpus, ...


@dataclass(frozen=True)
class BenchRequest:
    """A bench, as a program asks for it: `orchestrate.run_bench(BenchRequest(...), observer)`."""

    workloads: Workloads = field(default_factory=Workloads)
    repetitions: Repetitions = field(default_factory=Repetitions)
    scenario: Options = field(default_factory=Options)
    machines: Machines = field(default_factory=Machines)
    results: Path | None = None  # the store (None: the default)
    stream: StreamSettings | None = None  # the time-series server, or none
    dry_run: bool = False  # check everything, list the runs (BenchOutcome.planned), run none


@dataclass(frozen=True)
class BenchOutcome:
    """What a bench did: its id, the kinds it chose, every run's record (failed ones included), the notes
    it ends with, and the store that holds them."""

    bench_id: str
    kinds: tuple[str, ...]
    records: tuple[RunRecord, ...]
    notes: tuple[str, ...]
    store: Path
    planned: tuple[str, ...] = ()  # --dry-run: the runs it would make, a line each, and the total

    @property
    def failed(self) -> list[RunRecord]:
        """The runs that did not end ok."""
        return [r for r in self.records if r.status != "ok"]


class BenchObserver(Observer, Protocol):
    """Progress: the runs' begin, steps and end, and each line of what the bench chose or did."""

    def say(self, line: str) -> None: ...

    def expect(self, runs: int, at_most: bool) -> None:
        """How many runs the bench will make (at most that many with --repeat auto)."""


class Silent(NullObserver):
    """A BenchObserver that shows nothing: a program that reads the outcome (a script in bench/, a test)."""

    def say(self, line: str) -> None:
        """Nothing."""

    def expect(self, runs: int, at_most: bool) -> None:
        """Nothing."""


class BenchInterrupted(DltestbedError):
    """Ctrl-C (or SIGTERM) stopped the bench; what was running is stored failed, nothing is left behind."""

    exit_code = 130
