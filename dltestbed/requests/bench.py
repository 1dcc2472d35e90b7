"""What a bench is asked (BenchRequest), in groups: each one panel of `dltestbed bench --help`, its options declared
here once (dltestbed/panels.py): the command line's names and help, the library's field and default. A field
without `opt` is a program's alone (acceptance sets it). Pure data: the CLI imports it for `--help`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ClassVar

from dltestbed.choices import (
    AUTO_PRESET,
    COTENANTS,
    FRAMEWORKS,
    MATHS,
    MODES,
    ONE,
    ORDERS,
    PRESETS,
    SCENARIOS,
    SUITES,
    CotenantName,
    DataKind,
    Device,
    Gpus,
    Math,
    Mode,
    OrderName,
    PresetName,
    ProbeScale,
    RuntimeName,
    ScenarioName,
    SuiteName,
    VirtType,
    or_list,
)
from dltestbed.panels import comma_list, comma_tuple, opt, repeated
from dltestbed.requests.launch import KubernetesOptions, Launch, SlurmOptions
from dltestbed.sizes import mib_or_bare

if TYPE_CHECKING:
    from dltestbed.results.influx import Settings as StreamSettings


@dataclass(frozen=True)
class Workloads:
    """What runs: the models or probes, their data and sizes (None: the preset's)."""

    PANEL: ClassVar[str] = "What to run"

    models: Annotated[
        tuple[str, ...],
        opt(
            "--model",
            "-m",
            metavar="NAME",
            help="alexnet, resnet50, inception3; repeat -m.",
            cli=list[str] | None,
            parse=repeated,
            given=None,
        ),
    ] = ()
    preset: Annotated[
        PresetName, opt("--preset", metavar="NAME", help=f"{or_list((AUTO_PRESET, *PRESETS))} ({AUTO_PRESET}).")
    ] = AUTO_PRESET
    suite: Annotated[SuiteName, opt("--suite", metavar="NAME", help=f"{or_list(SUITES)}.")] = "study"
    data: Annotated[DataKind, opt("--data", metavar="KIND", help="synthetic, or real: --data-dir.")] = "synthetic"
    data_dir: Annotated[Path | None, opt("--data-dir", metavar="DIR", help="DIR/<class>/*.jpg (`data make`).")] = None
    # each model with each, interleaved (none given: config.DEFAULT_FRAMEWORK)
    frameworks: Annotated[
        tuple[str, ...],
        opt(
            "--framework",
            metavar="NAME",
            help=f"{or_list(FRAMEWORKS)} (or both: a,b).",
            cli=str | None,
            parse=comma_tuple,
            given=None,
        ),
    ] = ()
    mode: Annotated[Mode, opt("--mode", metavar="MODE", help=f"{or_list(MODES)}.")] = "train"
    batch_size: Annotated[int | None, opt("--batch-size", help="Images per step.")] = None
    image_size: Annotated[int | None, opt("--image-size", metavar="PX", help="Input size in px.")] = None
    # a count, config.STEADY, or None: the preset's
    warmup: Annotated[
        int | str | None,
        opt(
            "--warmup",
            metavar="N|auto",
            help="Untimed steps first (auto: until steady).",
            cli=str | None,
        ),
    ] = None
    steps: Annotated[int | None, opt("--steps", help="Timed steps.")] = None
    classes: Annotated[int, opt("--classes", help="Output classes (1000; real: the data's).")] = 1000
    probes: Annotated[
        tuple[str, ...] | None,
        opt(
            "--probes", metavar="LIST", help="micro/full: e.g. gemm,conv,membw,disk.", cli=str | None, parse=comma_list
        ),
    ] = None
    probe_scale: Annotated[
        ProbeScale | None,
        opt("--probe-scale", metavar="SIZE", help="micro/full: small or full (gpu: full)."),
    ] = None
    # --suite screen: how long the checks run per GPU
    screen_seconds: Annotated[
        float, opt("--screen-time", metavar="SEC", help="screen: seconds per GPU, once (60).")
    ] = 60.0
    # op determinism: every step's loss comparable bit for bit between layers
    deterministic: Annotated[bool, opt("--deterministic", help="Op determinism; losses compared per step.")] = False
    # the placement: one GPU, every GPU of the machine in one job, or a process each
    gpus: Annotated[
        Gpus,
        opt(
            "--gpus",
            metavar="HOW",
            help="one, node (data-parallel) or per-gpu.",
        ),
    ] = ONE
    # real data: train on 4/5 of the images, then top-1 on the held-out fifth
    accuracy: Annotated[bool, opt("--accuracy", help="Real data: top-1 on a held-out 5th.")] = False
    # seconds between a run's resource samples (None: the spec's, a second)
    sample_interval: Annotated[
        float | None, opt("--sample-interval", metavar="SEC", help="Seconds between resource samples (1).")
    ] = None


@dataclass(frozen=True)
class Where:
    """Where and how the runs go: the target kinds, the device, the hosts (an inventory, or this machine), the
    data's place, and the hosts at once or one by one."""

    PANEL: ClassVar[str] = "Where"

    targets: Annotated[
        tuple[str, ...],
        opt("--targets", metavar="LIST", help="auto, or of bm,cbm,vm,cvm.", cli=str, parse=comma_tuple, given="auto"),
    ] = ("auto",)
    device: Annotated[Device, opt("--device", metavar="KIND", help="auto, cpu (no GPU) or gpu.")] = "auto"
    inventory: Annotated[Path | None, opt("--inventory", metavar="FILE", help="Ansible inventory to run on.")] = None
    limit: Annotated[str | None, opt("--limit", metavar="PATTERN", help="Only these hosts.")] = None
    groups: Annotated[
        tuple[str, ...],
        opt(
            "--group",
            metavar="ROLE=GROUP",
            help="e.g. bare_metal=gpu_nodes.",
            cli=list[str] | None,
            parse=repeated,
            given=None,
        ),
    ] = ()
    data_shared: Annotated[bool, opt("--data-shared", help="--data-dir is one NFS folder.")] = False
    parallel: Annotated[bool, opt("--parallel/--no-parallel", help="Hosts at once, or one by one.")] = True
    run_timeout: Annotated[float | None, opt("--run-timeout", metavar="SEC", help="Stop a run after this long.")] = None
    hosts_at_once: int | None = None  # with `parallel`: at most this many hosts measured at once (None: all)


@dataclass(frozen=True)
class Repetitions:
    """How often and in which order: a count or "auto" (to ±precision %), A/A, the order and its seed."""

    PANEL: ClassVar[str] = "Repetitions"

    repeat: Annotated[str, opt("--repeat", metavar="N|auto", help="Repetitions of every run (3).")] = "3"
    precision: Annotated[float, opt("--precision", metavar="PCT", help="auto: the ± % to reach (2).")] = 2.0
    max_repeat: Annotated[int, opt("--max-repeat", help="auto: most repetitions (20).")] = 20
    aa: Annotated[bool, opt("--aa", help="Bare metal twice: the noise floor.")] = False
    order: Annotated[OrderName, opt("--order", metavar="HOW", help=f"{or_list(ORDERS)}.")] = "interleaved"
    seed: Annotated[int, opt("--seed", help="Seed of --order random.")] = 0


@dataclass(frozen=True)
class Options:
    """What a scenario needs beyond the plan."""

    PANEL: ClassVar[str] = "Scenario"

    scenario: Annotated[ScenarioName, opt("--scenario", metavar="NAME", help=f"{or_list(SCENARIOS)}.")] = "single"
    # distributed: workers per job (default: one per host; this machine: 2)
    workers: Annotated[int | None, opt("--workers", help="distributed: workers per job.")] = None
    # distributed: one worker alone per job, for scaling efficiency
    baseline: Annotated[bool, opt("--baseline/--no-baseline", help="distributed: 1 worker alone too.")] = True
    cotenant: Annotated[CotenantName, opt("--cotenant", metavar="KIND", help=f"shared: {or_list(COTENANTS)}.")] = (
        "alexnet"
    )
    # default: 512 with a GPU, else 64
    cotenant_batch: Annotated[int | None, opt("--cotenant-batch", help="shared: the co-tenant's batch.")] = None
    # shared: foreground and co-tenant pinned to disjoint CPUs
    isolate: Annotated[bool, opt("--isolate", help="shared: half the CPUs each.")] = False
    # distributed: these jobs, each over its hosts (inventory names), those that share no host at once (within
    # Where.hosts_at_once), instead of one job over every host; acceptance's pairs of nodes
    jobs: tuple[tuple[str, ...], ...] = ()
    # --gpus per-gpu: a host's GPUs one after another (what they share, a PCIe switch's uplink or the host's
    # memory, measured by one at a time), not at once; hosts still as Where.parallel says
    gpus_in_turn: bool = False
    # where the runs go and how (hosts at once, a run's limit): the request's, as run_bench gives it to the scenario
    where: Where = field(default_factory=Where)


@dataclass(frozen=True)
class Compute:
    """The arithmetic and the GPU's memory: the model's math, XLA, a fixed memory pool (None: the preset's)."""

    PANEL: ClassVar[str] = "GPU"

    math: Annotated[Math | None, opt("--math", metavar="MATH", help=f"{or_list(MATHS)}.")] = None
    xla: Annotated[bool | None, opt("--xla/--no-xla", help="Compile the step with XLA.")] = None
    gpu_memory_mib: Annotated[
        int | None, opt("--gpu-memory-mib", metavar="MIB", help="Fixed GPU memory per process.")
    ] = None


@dataclass(frozen=True)
class VmSettings:
    """The --vm-* settings, over the inventory's dltestbed_vm_* variables (None: the inventory's, or the default);
    the names are vmready's."""

    PANEL: ClassVar[str] = "VM (vm, cvm)"

    vcpus: Annotated[int | None, opt("--vm-vcpus", help="vCPUs (default 2).")] = None
    memory_mib: Annotated[
        int | None,
        opt(
            "--vm-memory",
            metavar="SIZE",
            help="Memory, e.g. 3g or 3072m (default 3g).",
            cli=str | None,
            parse=mib_or_bare,
        ),
    ] = None
    gpus: Annotated[str | None, opt("--vm-gpus", metavar="WHICH", help="all, a count, or PCI addresses.")] = None
    cpus: Annotated[str | None, opt("--vm-cpus", metavar="CPUS", help="Host CPUs to pin, e.g. 0-3.")] = None
    numa_node: Annotated[int | None, opt("--vm-numa-node", help="Memory from this NUMA node.")] = None
    virt_type: Annotated[
        VirtType | None, opt("--vm-virt-type", metavar="KIND", help="kvm or qemu (TCG); detected.")
    ] = None
    image: Annotated[str | None, opt("--vm-image", metavar="FILE", help="Boot your own cloud image (qcow2, raw).")] = (
        None
    )
    disk_gib: Annotated[int | None, opt("--vm-disk", metavar="GIB", help="Disk size, at least.")] = None


@dataclass(frozen=True)
class Container:
    """cbm's container: the runtime (None: the host's, or the one detected), its limits, and the user every bm and
    cbm workload runs as (rootless runtimes' CLIs too)."""

    PANEL: ClassVar[str] = "Container (cbm)"

    runtime: Annotated[
        RuntimeName | None,
        opt("--runtime", metavar="NAME", help="docker (if it answers), podman, podman-rootless or charliecloud."),
    ] = None
    cpuset: Annotated[str | None, opt("--container-cpuset", metavar="CPUS", help="Only these CPUs, e.g. 0-3.")] = None
    memory: Annotated[str | None, opt("--container-memory", metavar="SIZE", help="Memory limit, e.g. 4g.")] = None
    as_user: Annotated[str | None, opt("--as-user", metavar="NAME", help="Run bm and cbm workloads as this user.")] = (
        None
    )


@dataclass(frozen=True)
class BenchRequest:
    """A bench, as a program asks for it: `orchestrate.run_bench(BenchRequest(...), observer)`. Its groups are
    `dltestbed bench`'s panels (dltestbed/requests/bench.py)."""

    workloads: Workloads = field(default_factory=Workloads)
    where: Where = field(default_factory=Where)
    repetitions: Repetitions = field(default_factory=Repetitions)
    scenario: Options = field(default_factory=Options)
    compute: Compute = field(default_factory=Compute)
    vm: VmSettings = field(default_factory=VmSettings)
    container: Container = field(default_factory=Container)
    launch: Launch = field(default_factory=Launch)
    slurm: SlurmOptions = field(default_factory=SlurmOptions)
    kubernetes: KubernetesOptions = field(default_factory=KubernetesOptions)
    results: Path | None = None  # the store (None: the default)
    stream: StreamSettings | None = None  # the time-series server, or none
    dry_run: bool = False  # check everything, list the runs (BenchOutcome.planned), run none
