"""What a group of runs is, typed: the layer it measured and the workload it ran. Pure.

A group holds runs that measured the same thing on the same kind of target. Runs that differ in batch
size, image size, device, math (XLA included) or framework are never averaged together. A layer (kind, a user's
VM image, the A′ arm) is compared against bare metal of the same workload: what must match is `workload`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from dltestbed.config import DEFAULT_FRAMEWORK
from dltestbed.kinds import BASELINE
from dltestbed.results.records import RunRecord


@dataclass(frozen=True, kw_only=True)
class LayerKey:
    """The layer a group measured: its kind, a container's runtime (each its own layer: Docker's, rootless
    Podman's and Charliecloud's containers are never averaged together), a user's VM image (a layer of its own
    beside dltestbed's guest image) and its arm ("A′": the baseline kind's second run per repetition under --aa)."""

    target_kind: str
    runtime: str = ""
    vm_image: str = ""
    arm: str = ""

    @classmethod
    def of_run(cls, r: RunRecord) -> LayerKey:
        """The layer a run measured."""
        return LayerKey(target_kind=r.target_kind, runtime=r.runtime, vm_image=r.vm_image, arm=r.arm)

    @property
    def layer(self) -> str:
        """The layer as tables and figures name it: "cbm (charliecloud)", "vm (my-image)", "bm A′"."""
        within = self.runtime or self.vm_image
        return self.target_kind + (f" ({within})" if within else "") + (f" {self.arm}" if self.arm else "")

    @property
    def against_baseline(self) -> bool:
        """Whether the group is measured against bare metal: another kind, or bare metal's own A′ arm."""
        return self.target_kind != BASELINE or bool(self.arm)

    @property
    def workload(self) -> tuple[Any, ...]:
        """Every field but the layer's: what a layer's group and its baseline's must share."""
        return tuple(getattr(self, f.name) for f in fields(self) if f.name not in LAYER_FIELDS)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


LAYER_FIELDS = tuple(f.name for f in fields(LayerKey))


@dataclass(frozen=True, kw_only=True)
class GroupKey(LayerKey):
    """A report row's group of model runs; `host` (the physical machine) only when rows are per host."""

    scenario: str
    workers: int
    framework: str  # never averaged across frameworks: a framework comparison is layer against layer
    model: str
    data: str
    mode: str
    device: str
    math: str
    xla: bool
    batch_size: int
    image_size: int
    warmup: int | None  # None: until steady
    steps: int
    contention: str
    host: str | None = None

    @classmethod
    def of(cls, run: RunRecord, by_host: bool = False) -> GroupKey:
        """The group a run belongs to (by_host: on its physical machine, and its GPU with --gpus per-gpu)."""
        values = {f: getattr(run, f) for f in GROUP_FIELDS}
        return cls(**values, host=run.unit if by_host else None)

    def without_host(self) -> GroupKey:
        """The same group over every host (what the fleet compares hosts within)."""
        return replace(self, host=None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; "host" only when rows are per host."""
        d = asdict(self)
        if self.host is None:
            del d["host"]
        return d


GROUP_FIELDS = tuple(f.name for f in fields(GroupKey) if f.name != "host")


@dataclass(frozen=True, kw_only=True)
class CaseKey(LayerKey):
    """A probe case on one layer: where it ran (scenario, workers, device), its size and what it measured."""

    scenario: str
    workers: int
    framework: str  # gemm, conv, net and all-reduce are each framework's own: never averaged together
    device: str
    scale: str
    probe: str
    case: str
    unit: str

    @property
    def shown(self) -> str:
        """The case as tables name it: the framework named beside it when it is not the default."""
        return with_framework(self.case, self.framework)


def with_framework(case: str, framework: str) -> str:
    """A probe's case, with "(pytorch)" after it when another framework than the default measured it. Pure."""
    return case if framework == DEFAULT_FRAMEWORK else f"{case} ({framework})"


@dataclass(frozen=True, kw_only=True)
class JobKey:
    """Runs measured together (a distributed job's workers, a shared pair): their kind and workload."""

    target_kind: str
    model: str
    data: str
    mode: str
    device: str
    math: str
    xla: bool
    batch_size: int
    image_size: int

    @classmethod
    def of(cls, run: RunRecord) -> JobKey:
        """The kind and workload of a run of a job."""
        return cls(**{f.name: getattr(run, f.name) for f in fields(cls)})

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)
