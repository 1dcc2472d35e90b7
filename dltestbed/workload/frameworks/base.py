"""What a framework is to dltestbed: the one class per framework (`Framework`) that the workload runs a model
with, that the controller asks for a distributed job's worker environment, and that the report asks for the
facts of a run's build. Registered by name (choices.FRAMEWORKS); `framework(name)` gives one."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

from dltestbed.choices import FRAMEWORKS, or_list
from dltestbed.errors import ConfigError

# the folder a compiled run keeps its framework's compile caches in, shared by a bench's runs on one machine and
# kind (made and removed by the controller: orchestrate/compilecache.py); unset: the framework's own default
COMPILE_CACHE_ENV = "DLTESTBED_COMPILE_CACHE"

if TYPE_CHECKING:
    from dltestbed.config import WorkloadSpec
    from dltestbed.dataset import DatasetIndex
    from dltestbed.workload.distributed import Cluster
    from dltestbed.workload.emit import Emitter
    from dltestbed.workload.gpu import Nvml


@dataclass(frozen=True)
class ProbeSetup:
    """What a framework is loaded with for a micro run: each process's GPU memory (None: grows), the job's
    cluster (None: no job), NVML's GPUs, the fingerprint it adds its facts to, and whether one process takes
    every GPU of the machine (`node`; `cpu_devices` logical CPU devices where there is no GPU)."""

    memory_mib: int | None
    cluster: Cluster | None
    gpus: list[dict[str, Any]]
    fingerprint: dict[str, Any]
    node: bool = False
    cpu_devices: int | None = None


@dataclass(frozen=True)
class ModelRun:
    """What the workload has ready, whatever the framework, when a model's run starts: its spec, the classes,
    the images it trains on and holds out (None: synthetic data), the job it is a worker of, NVML and its
    GPUs, the fingerprint so far, and when its process started (its start-up is counted from there)."""

    spec: WorkloadSpec
    classes: int
    trained: DatasetIndex | None
    held: DatasetIndex | None
    cluster: Cluster | None
    nvml: Nvml | None
    gpus: list[dict[str, Any]]
    fingerprint: dict[str, Any]
    process_start: Callable[[], float] = time.time


@dataclass(frozen=True)
class ProbeFramework:
    """What the framework-specific probes (gemm, conv, the copies' devices, all-reduce) run with: the framework's
    module (None: not loaded, no probe needs it), the GPUs it sees, a distributed job's strategy (or process
    group), how the job's workers agree on a value (the largest), and the framework's own probes by name (gemm,
    conv, net, allreduce: config.FRAMEWORK_PROBES) and checks (its checks.py)."""

    module: ModuleType | None = None
    gpus: int = 0
    strategy: Any = None
    agree: Callable[[float], float] | None = None
    probes: Mapping[str, Callable[[Any], list[Any]]] = field(default_factory=dict)
    checks: ModuleType | None = None  # its products' checks (its checks.py), for the screen


class Framework(ABC):
    """A deep-learning framework: how a model's run uses it (`run_model`), how a distributed job's workers
    find each other (`worker_env`, `cluster`), and what a run's fingerprint says of its build."""

    name: ClassVar[str]  # its key in choices.FRAMEWORKS
    label: ClassVar[str]  # its name in words ("TensorFlow")
    version_key: ClassVar[str]  # the fingerprint's fact that holds its version
    node_jobs: ClassVar[bool]  # whether it runs --gpus node (one process over every GPU of the machine)
    packages: ClassVar[Mapping[str, str]]  # the requirement a wheelhouse installs, per flavour (cpu, gpu)
    distributions: ClassVar[tuple[str, ...]]  # the installed distributions whose version the wheelhouse pins
    extra: ClassVar[str]  # pyproject.toml's extra that names its version where the controller has none
    package_fact: ClassVar[str]  # the fact its installed version is compared under across a fleet (accept's drift)
    stack_facts: ClassVar[tuple[str, ...]]  # its fingerprint's facts that decide which kernels run and how they sum
    build_facts: ClassVar[tuple[str, ...]]  # its fingerprint's facts of its build, which the report's environment shows
    imports: ClassVar[tuple[str, ...]]  # what an install imports to check it works
    requires: ClassVar[tuple[str, ...]] = ()  # what else its workload imports (pinned to the controller's)
    # each model's revision, bumped when its code changes in a way that moves its img/s (a board's value is of one;
    # a model not named is at revision 1); a run's start event records it
    model_revisions: ClassVar[Mapping[str, int]] = {}
    # whether a compiled run (--xla) keeps caches in $DLTESTBED_COMPILE_CACHE that a later run of the bench reuses
    compile_cache: ClassVar[bool] = False

    def model_revision(self, model: str) -> int:
        """The revision of this framework's model of that name."""
        return self.model_revisions.get(model, 1)

    @abstractmethod
    def worker_env(self, workers: Sequence[str], index: int) -> dict[str, str]:
        """The controller's side of a distributed job: the environment worker `index` of `workers` (host:port
        each) is started with, from which it finds the others."""

    @abstractmethod
    def cluster(self, environ: Mapping[str, str]) -> Cluster:
        """The worker's side: its job, read from the environment `worker_env` made (a ConfigError says what
        is wrong with it)."""

    @abstractmethod
    def run_model(self, run: ModelRun, emitter: Emitter) -> None:
        """Build the model, run its warm-up and timed steps, and emit the start event, every step, the resource
        samples and the summary (and the accuracy with --accuracy)."""

    @abstractmethod
    def for_probes(self, setup: ProbeSetup) -> ProbeFramework:
        """Load the framework for a micro run: GPU memory set before anything touches a GPU, a distributed job's
        strategy made before any other op (it waits for every worker), or with `node` one over every GPU of this
        machine (`cpu_devices`: the CPU's logical devices where there is none); the fingerprint given its
        facts."""

    @abstractmethod
    def build(self, fingerprint: Mapping[str, Any]) -> str:
        """The build a run used, in words, from its fingerprint: "TensorFlow 2.20.0 (CPU build)"."""

    @classmethod
    @abstractmethod
    def installed(cls) -> tuple[str, bool] | None:
        """This machine's build of the framework, from its package's metadata (no import: seconds saved): its
        distribution in words, and whether it is a build that uses NVIDIA GPUs; None: not installed."""

    @classmethod
    def pinned(cls, flavor: str, version: str) -> str:
        """The requirement of a flavour's build at a version, as pip takes it: `tensorflow-cpu==2.20.0`."""
        return f"{cls.packages[flavor]}=={version}"

    def ran(self, fingerprint: Mapping[str, Any]) -> bool:
        """Whether a run's workload reported this framework (a run that failed before it loaded did not)."""
        return fingerprint.get(self.version_key) is not None


REGISTRY: dict[str, type[Framework]] = {}


def register(cls: type[Framework]) -> type[Framework]:
    """Register a framework's class under its name, one of choices.FRAMEWORKS."""
    if cls.name not in FRAMEWORKS:
        raise ValueError(f"framework {cls.name!r} is not in choices.FRAMEWORKS")
    REGISTRY[cls.name] = cls
    for name in sorted(REGISTRY, key=FRAMEWORKS.index):  # in choices' order, whatever the imports' order
        REGISTRY[name] = REGISTRY.pop(name)
    return cls


def gathered(facts: Callable[[type[Framework]], Iterable[str]]) -> tuple[str, ...]:
    """What every framework declares of one kind (`facts` of its class), in choices.FRAMEWORKS' order: the tables
    the report and acceptance read, made from the registry rather than written again."""
    return tuple(f for cls in REGISTRY.values() for f in facts(cls))


def framework(name: str) -> Framework:
    """The framework of that name, or a ConfigError that lists the known ones."""
    cls = REGISTRY.get(name)
    if cls is None:
        raise ConfigError(f"unknown framework {name!r}; known: {or_list(REGISTRY)}")
    return cls()
