"""What a scenario is: a registered class with a name of choices.SCENARIOS that checks its own options, runs a
plan in one run environment (RunEnv), and says how many runs a (repetition, workload, kind) makes and how,
for the dry run, the progress and the bench's first line. A new scenario is one module with one class, its
name in choices.SCENARIOS (and a layout of that name in choices.LAYOUTS and layout.py), and its import in
scenarios/__init__.py, which registers it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from dltestbed.choices import SCENARIOS
from dltestbed.errors import ConfigError
from dltestbed.orchestrate.pergpu import GpuSlot
from dltestbed.orchestrate.planning import Plan
from dltestbed.requests.bench import Options
from dltestbed.results.records import RunRecord
from dltestbed.results.store import Store
from dltestbed.runner import Observer, Sink
from dltestbed.targets import Site
from dltestbed.targets.base import Target


@dataclass(frozen=True)
class RunEnv:
    """Everything a scenario's runs are made with: the plan, the prepared sites (one per machine) and kinds,
    the store and observer every run reports to, the stream's sinks, and, for single, the targets per machine
    (`machines`, made from the sites when None) with each one's GPU under --gpus per-gpu (`gpus`). A line the
    bench ends with (--repeat auto's stop) goes to `on_note`."""

    plan: Plan
    sites: Sequence[Site]
    kinds: Sequence[str]
    store: Store
    observer: Observer
    options: Options
    sinks: Sequence[Sink] = ()
    machines: Sequence[Sequence[Target]] | None = None
    on_note: Callable[[str], None] = lambda line: None
    gpus: Sequence[GpuSlot | None] | None = None


class Scenario:
    """One scenario: a subclass names itself and is registered with @register."""

    name: ClassVar[str]
    alone_per_target: ClassVar[bool] = False  # each target's runs alone: --aa, --repeat auto and --gpus per-gpu
    takes_workers: ClassVar[bool] = False  # --workers: how many workers a job has
    one_host: ClassVar[bool] = False  # runs on one host (one node a scheduler gives)

    def check(self, options: Options, hosts: Sequence[Any], plan: Plan, kinds: Sequence[str]) -> None:
        """Its own bad combinations, before anything runs: one ConfigError line."""

    def run(self, env: RunEnv) -> list[RunRecord]:
        """Run the plan; every run is stored as it goes."""
        raise NotImplementedError

    def runs_per_item(self, options: Options, hosts: Sequence[object]) -> int:
        """Runs one (repetition, workload, kind) makes (co-tenants not counted)."""
        raise NotImplementedError

    def scope(self, options: Options, hosts: Sequence[object]) -> str:
        """How one (repetition, workload, kind) runs, after its workload in a dry run's line."""
        raise NotImplementedError

    def announce(self, options: Options, hosts: Sequence[object], where: str, total: int) -> str:
        """The tail of the bench's first line: how it runs, on which targets (`where`), `total` runs in all."""
        raise NotImplementedError

    def machines(self, workers: int | None) -> int:
        """Machines to ask a launcher's scheduler for when --nodes is not given."""
        return 1

    def at_once(self, options: Options) -> int:
        """Workloads it runs at once on one machine (a co-tenant beside the foreground: 2)."""
        return 1

    def gpu_pools(self, options: Options) -> int:
        """Processes that hold a GPU memory pool on one GPU at once (each --gpu-memory-mib)."""
        return 1

    def gpu_needs(self, options: Options) -> list[tuple[str, str]]:
        """(option, what to use instead) for each of its own options that needs a GPU on every target."""
        return []


REGISTRY: dict[str, Scenario] = {}
S = TypeVar("S", bound=type[Scenario])


def register(cls: S) -> S:
    """Register a scenario class under its name, which choices.SCENARIOS must hold."""
    if cls.name not in SCENARIOS:
        raise ValueError(f"scenario {cls.name!r} is not in dltestbed.choices.SCENARIOS")
    REGISTRY[cls.name] = cls()
    return cls


def scenario(name: str) -> Scenario:
    """The registered scenario of that name; an unknown one is one ConfigError listing the known."""
    if name not in REGISTRY:
        raise ConfigError(
            f"--scenario: unknown scenario {name!r}; known: {', '.join(n for n in SCENARIOS if n in REGISTRY)}"
        )
    return REGISTRY[name]
