"""The options of `dltestbed bench`, one type a name: typer reads them from the command's signature.
Each says in one line what it does; docs/bench.md says the rest."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dltestbed.choices import (
    AUTO_PRESET,
    COTENANTS,
    FRAMEWORKS,
    MATHS,
    MODES,
    ORDERS,
    PRESETS,
    SCENARIOS,
    SUITES,
    DataKind,
    Device,
    Gpus,
    Math,
    Mode,
    ProbeScale,
    VirtType,
    or_list,
)
from dltestbed.cli import deprecated
from dltestbed.cli.options import RESULTS_SHORT, Cotenant, Launcher, Order, Output, Preset, Runtime, Scenario, Suite

WHAT = "What to run"
WHERE = "Where"
REPS = "Repetitions"
SCENARIO = "Scenario"
GPU = "GPU"
VM = "VM (vm, cvm)"
CONTAINER = "Container (cbm)"
SLURM = "Slurm (--launcher slurm)"
OUTPUT = "Output"


def _opt(*names: str, help: str, panel: str, **kw: object) -> typer.models.OptionInfo:
    """An option of `bench`: its names, one line of help, its panel."""
    return typer.Option(*names, help=help, rich_help_panel=panel, show_default=False, **kw)  # type: ignore[arg-type]


ModelOption = Annotated[
    list[str] | None,
    _opt("--model", "-m", metavar="NAME", help="alexnet, resnet50, inception3 (repeat it).", panel=WHAT),
]
PresetOption = Annotated[
    Preset,
    _opt("--preset", metavar="NAME", help=f"{or_list((AUTO_PRESET, *PRESETS))} ({AUTO_PRESET}).", panel=WHAT),
]
SuiteOption = Annotated[Suite, _opt("--suite", metavar="NAME", help=f"{or_list(SUITES)}.", panel=WHAT)]
DataOption = Annotated[DataKind, _opt("--data", metavar="KIND", help="synthetic, or real: --data-dir.", panel=WHAT)]
DataDirOption = Annotated[
    Path | None, _opt("--data-dir", metavar="DIR", help="DIR/<class>/*.jpg (`data make`).", panel=WHAT)
]
FrameworkOption = Annotated[
    str | None, _opt("--framework", metavar="NAME", help=f"{or_list(FRAMEWORKS)} (or both: a,b).", panel=WHAT)
]
ModeOption = Annotated[Mode, _opt("--mode", metavar="MODE", help=f"{or_list(MODES)}.", panel=WHAT)]
BatchSizeOption = Annotated[int | None, _opt("--batch-size", help="Images per step.", panel=WHAT)]
ImageSizeOption = Annotated[int | None, _opt("--image-size", metavar="PX", help="Input size in px.", panel=WHAT)]
WarmupOption = Annotated[
    str | None,
    _opt("--warmup", metavar="N|auto", help="Untimed steps first (auto: until the step time is steady).", panel=WHAT),
]
StepsOption = Annotated[int | None, _opt("--steps", help="Timed steps.", panel=WHAT)]
ClassesOption = Annotated[int, _opt("--classes", help="Output classes (1000; real: the data's).", panel=WHAT)]
ProbesOption = Annotated[
    str | None, _opt("--probes", metavar="LIST", help="micro/full: e.g. gemm,conv,membw,disk.", panel=WHAT)
]
ProbeScaleOption = Annotated[
    ProbeScale | None,
    _opt("--probe-scale", metavar="SIZE", help="micro/full: small or full (the preset's: gpu full).", panel=WHAT),
]
ScreenTimeOption = Annotated[
    float, _opt("--screen-time", metavar="SEC", help="screen: seconds per GPU, once (60).", panel=WHAT)
]
DeterministicOption = Annotated[
    bool, _opt("--deterministic", help="Op determinism; losses compared per step.", panel=WHAT)
]
GpusOption = Annotated[
    Gpus,
    _opt(
        "--gpus",
        metavar="HOW",
        help="one (the first GPU), node (all, one data-parallel job) or per-gpu (a process each, at once).",
        panel=WHAT,
    ),
]
AccuracyOption = Annotated[bool, _opt("--accuracy", help="Real data: top-1 on a held-out 5th.", panel=WHAT)]

TargetsOption = Annotated[str, _opt("--targets", metavar="LIST", help="auto, or of bm,cbm,vm,cvm.", panel=WHERE)]
DeviceOption = Annotated[Device, _opt("--device", metavar="KIND", help="auto, cpu (no GPU) or gpu.", panel=WHERE)]
InventoryOption = Annotated[
    Path | None, _opt("--inventory", metavar="FILE", help="Ansible inventory to run on.", panel=WHERE)
]
LimitOption = Annotated[str | None, _opt("--limit", metavar="PATTERN", help="Only these hosts.", panel=WHERE)]
DataSharedOption = Annotated[bool, _opt("--data-shared", help="--data-dir is one NFS folder.", panel=WHERE)]
ParallelOption = Annotated[bool, _opt("--parallel/--no-parallel", help="Hosts at once, or one by one.", panel=WHERE)]
SequentialOption = Annotated[bool, deprecated.option("--sequential", "--no-parallel")]
RunTimeoutOption = Annotated[
    float | None, _opt("--run-timeout", metavar="SEC", help="Stop a run after this long.", panel=WHERE)
]
TimeoutOption = Annotated[float | None, deprecated.option("--timeout", "--run-timeout")]

RepeatOption = Annotated[str, _opt("--repeat", metavar="N|auto", help="Repetitions of every run (3).", panel=REPS)]
PrecisionOption = Annotated[float, _opt("--precision", metavar="PCT", help="auto: the ± % to reach (2).", panel=REPS)]
MaxRepeatOption = Annotated[int, _opt("--max-repeat", help="auto: most repetitions (20).", panel=REPS)]
AaOption = Annotated[bool, _opt("--aa", help="Bare metal twice: the noise floor.", panel=REPS)]
OrderOption = Annotated[Order, _opt("--order", metavar="HOW", help=f"{or_list(ORDERS)}.", panel=REPS)]
SeedOption = Annotated[int, _opt("--seed", help="Seed of --order random.", panel=REPS)]

ScenarioOption = Annotated[Scenario, _opt("--scenario", metavar="NAME", help=f"{or_list(SCENARIOS)}.", panel=SCENARIO)]
WorkersOption = Annotated[int | None, _opt("--workers", help="distributed: workers per job.", panel=SCENARIO)]
BaselineOption = Annotated[
    bool, _opt("--baseline/--no-baseline", help="distributed: 1 worker alone too.", panel=SCENARIO)
]
CotenantOption = Annotated[
    Cotenant, _opt("--cotenant", metavar="KIND", help=f"shared: {or_list(COTENANTS)}.", panel=SCENARIO)
]
CotenantBatchOption = Annotated[
    int | None, _opt("--cotenant-batch", help="shared: the co-tenant's batch.", panel=SCENARIO)
]
IsolateOption = Annotated[bool, _opt("--isolate", help="shared: half the CPUs each.", panel=SCENARIO)]

MathOption = Annotated[Math | None, _opt("--math", metavar="MATH", help=f"{or_list(MATHS)}.", panel=GPU)]
XlaOption = Annotated[bool | None, _opt("--xla/--no-xla", help="Compile the step with XLA.", panel=GPU)]
GpuMemoryMibOption = Annotated[
    int | None, _opt("--gpu-memory-mib", metavar="MIB", help="Fixed GPU memory per process.", panel=GPU)
]

VmVcpusOption = Annotated[int | None, _opt("--vm-vcpus", help="vCPUs (default 2).", panel=VM)]
VmMemoryOption = Annotated[
    str | None, _opt("--vm-memory", metavar="SIZE", help="Memory, e.g. 3g or 3072m (default 3g).", panel=VM)
]
VmGpusOption = Annotated[
    str | None, _opt("--vm-gpus", metavar="WHICH", help="all, a count, or PCI addresses.", panel=VM)
]
VmCpusOption = Annotated[str | None, _opt("--vm-cpus", metavar="CPUS", help="Host CPUs to pin, e.g. 0-3.", panel=VM)]
VmNumaNodeOption = Annotated[int | None, _opt("--vm-numa-node", help="Memory from this NUMA node.", panel=VM)]
VmVirtTypeOption = Annotated[
    VirtType | None, _opt("--vm-virt-type", metavar="KIND", help="kvm or qemu (TCG); detected.", panel=VM)
]
VmImageOption = Annotated[
    str | None, _opt("--vm-image", metavar="FILE", help="Boot your own cloud image (qcow2, raw).", panel=VM)
]
VmDiskOption = Annotated[int | None, _opt("--vm-disk", metavar="GIB", help="Disk size, at least.", panel=VM)]

RuntimeOption = Annotated[
    Runtime | None,
    _opt(
        "--runtime",
        metavar="NAME",
        help="docker (if it answers), podman, podman-rootless or charliecloud.",
        panel=CONTAINER,
    ),
]
AsUserOption = Annotated[
    str | None,
    _opt(
        "--as-user",
        metavar="NAME",
        help="Run bm and cbm workloads as this user.",
        panel=CONTAINER,
    ),
]
ContainerCpusetOption = Annotated[
    str | None, _opt("--container-cpuset", metavar="CPUS", help="Only these CPUs, e.g. 0-3.", panel=CONTAINER)
]
ContainerMemoryOption = Annotated[
    str | None, _opt("--container-memory", metavar="SIZE", help="Memory limit, e.g. 4g.", panel=CONTAINER)
]

LauncherOption = Annotated[
    Launcher, _opt("--launcher", metavar="HOW", help="direct, or slurm: srun in one salloc.", panel=SLURM)
]
PartitionOption = Annotated[str | None, _opt("--partition", metavar="NAME", help="Partition.", panel=SLURM)]
NodesOption = Annotated[int | None, _opt("--nodes", help="Nodes to allocate.", panel=SLURM)]
AccountOption = Annotated[str | None, _opt("--account", metavar="NAME", help="Account to charge.", panel=SLURM)]
SlurmTimeOption = Annotated[
    str | None, _opt("--slurm-time", metavar="TIME", help="Allocation limit, e.g. 1:30:00.", panel=SLURM)
]
TimeLimitOption = Annotated[str | None, deprecated.option("--time", "--slurm-time")]
VenvOption = Annotated[str | None, _opt("--venv", metavar="DIR", help="dltestbed's venv on the nodes.", panel=SLURM)]

ResultsOption = Annotated[Path | None, _opt("--results", metavar="FILE", help=RESULTS_SHORT, panel=OUTPUT)]
ReportOption = Annotated[
    Path | None, _opt("--report", metavar="FILE", help="Then write the report (.html .json .md).", panel=OUTPUT)
]
FormatOption = Annotated[
    Output, _opt("--format", metavar="FMT", help="table, or json: the runs on stdout.", panel=OUTPUT)
]
AsJsonOption = Annotated[bool, deprecated.option("--json", "--format json")]
DryRunOption = Annotated[bool, _opt("--dry-run", help="List the runs it would make, and stop.", panel=OUTPUT)]
