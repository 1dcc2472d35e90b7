"""Every name a user picks from — a scenario, a layout, a co-tenant, a suite, a preset, an order, a launcher, a
container runtime, a VM's virtualisation, a TensorFlow flavour, and a run's framework, data, mode, device, math
and GPUs — each spelled here once, with what it means. The library's registries are keyed by these names (a test checks
that each registry holds exactly its axis's names); the CLI's choices and their help are read from here. Pure
data: the CLI imports it without the library behind it, so `--help` stays fast."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal, TypeAlias, get_args

# the values a run's spec is typed with (config.py validates them)
DataKind = Literal["synthetic", "real"]
Mode = Literal["train", "infer"]
Device = Literal["auto", "cpu", "gpu"]
# The arithmetic a model's run uses (workload/mathmode.py resolves it; each framework applies it): float32
# with TF32 off; TF32 (float32 matmuls and convolutions on Ampere-or-later tensor cores, TensorFlow's own
# default there); Keras mixed precision (bfloat16 or float16 compute, float32 weights; float16 with dynamic
# loss scaling); mixed: bfloat16 where the device computes it natively, else float16, and the run records the
# one it used.
Math = Literal["float32", "tf32", "mixed_bfloat16", "mixed_float16", "mixed"]
# --gpus, the controller's placement of a machine's GPUs: one (a process on the first GPU), node (one process over
# every GPU of the machine, a data-parallel job with a replica each) or per-gpu (a process on each GPU at once,
# each given its GPU, by UUID, and that GPU's NUMA node's CPUs)
Gpus = Literal["one", "node", "per-gpu"]
# the GPUs one workload process uses (its spec's `gpus`): one (the first it sees, or its `gpu`'s) or node (every
# one it sees); per-gpu is the controller's alone, which gives each of its processes one GPU
ProcessGpus = Literal["one", "node"]
ONE, NODE = get_args(ProcessGpus)
(PER_GPU,) = set(get_args(Gpus)) - set(get_args(ProcessGpus))  # the placement no one process takes
ProbeScale = Literal["small", "full"]  # small: seconds per probe on 2 cores; full: the models' shapes
VirtType = Literal["kvm", "qemu"]  # libvirt domain types: KVM, or TCG emulation
Framework = Literal["tensorflow", "pytorch"]  # what a model's run computes with (workload/frameworks/)
ReportFormat = Literal["md", "json", "html"]  # `report`: Markdown, JSON, or a page with its figures

DATA: tuple[str, ...] = get_args(DataKind)
MODES: tuple[str, ...] = get_args(Mode)
DEVICES: tuple[str, ...] = get_args(Device)
MATHS: tuple[str, ...] = get_args(Math)
GPUS: tuple[str, ...] = get_args(Gpus)
PROBE_SCALES: tuple[str, ...] = get_args(ProbeScale)
FRAMEWORKS: tuple[str, ...] = get_args(Framework)
DEFAULT_FRAMEWORK: Framework = "tensorflow"  # a run that names none (and every run stored before the option)
VIRT_TYPES: tuple[str, ...] = get_args(VirtType)

SCENARIOS = {
    "single": "each target runs alone",
    "distributed": "one training job over several workers (MultiWorkerMirroredStrategy), per target kind",
    "shared": "the foreground alone, then again with a co-tenant on the same host",
}
# a layout places an inventory's hosts for the scenario of the same name
LAYOUTS = {
    "single": "one host of bare_metal, with one target of each kind it can hold",
    "distributed": "every host of bare_metal (at least 2), one worker each",
    "shared": "one host that holds several kinds (bare_metal plus container_hosts or libvirt_hosts), all on it",
}
COTENANTS = {
    "alexnet": "AlexNet training, large batch (the study's co-tenant)",
    "cpu": "AlexNet training on the CPU only (GPUs hidden)",
    "io": "AlexNet training on real data read from disk every step (needs --data-dir)",
    "gpu": "AlexNet training on the GPU (fails without one)",
}
SUITES = {
    "study": "the models (the preset's, or --model): what each layer costs a training or inference step",
    "micro": "the microbenchmarks (--probes; small sizes, minutes on 2 cores): which resource a layer costs",
    "full": "both: the models' overheads with the probes beside them, to explain them",
    "screen": "acceptance: gemm and conv products checked (not timed) for --screen-time per GPU with fresh inputs, "
    "against float64 and against themselves, once per bench and target (in repetition 1), and a --deterministic "
    "training per target and repetition (the preset's first model, or --model) whose loss every layer, host, "
    "GPU and repetition must match",
}
# `accept --level`: how much acceptance measures (accept/levels.py holds each one's numbers), as DCGM's levels
LEVELS = {
    "quick": "at most 5 minutes a node: one model run, short probes, a 30 s screen per GPU",
    "standard": "three model runs, the probes at 20 calls a case, a 5-minute screen per GPU",
    "burn-in": "standard, then the screen and a model run in rounds for --hold (default 4 h): a node that slows "
    "down over the hours fails",
}
# accept --unreachable: the verdict of a node that could not be reached, provisioned or measured (the default first)
UNREACHABLE = ("cannot-judge", "fail")
AUTO_PRESET = "auto"  # gpu where this machine's TensorFlow has a GPU, else quick
PRESETS = ("quick", "study", "gpu")  # what each holds: orchestrate/presets.py
ORDERS = ("interleaved", "random")
LAUNCHERS = {
    "direct": "dltestbed starts every run itself: on this machine, over SSH, in containers and VMs",
    "slurm": "srun steps inside one salloc; Slurm picks the nodes",
    "kubernetes": "a batch/v1 Job per run, pinned to its node: bm in the node's root, cbm in the image's pod",
}
RUNTIMES = ("docker", "podman", "podman-rootless", "charliecloud")  # the classes: runtimes/, a module each
FLAVORS = ("cpu", "gpu")  # TensorFlow's build in the workload image: tensorflow-cpu, or tensorflow[and-cuda]

# The registries' names as types the CLI reads its choices from (a Literal: one line for a bad one); mypy sees str.
if TYPE_CHECKING:
    ScenarioName: TypeAlias = str
    LayoutName: TypeAlias = str
    CotenantName: TypeAlias = str
    PresetName: TypeAlias = str
    SuiteName: TypeAlias = str
    OrderName: TypeAlias = str
    LauncherName: TypeAlias = str
    RuntimeName: TypeAlias = str
    FlavorName: TypeAlias = str
else:
    ScenarioName = Literal[tuple(SCENARIOS)]
    LayoutName = Literal[tuple(LAYOUTS)]
    CotenantName = Literal[tuple(COTENANTS)]
    PresetName = Literal[(AUTO_PRESET, *PRESETS)]
    SuiteName = Literal[tuple(SUITES)]
    OrderName = Literal[ORDERS]
    LauncherName = Literal[tuple(LAUNCHERS)]
    RuntimeName = Literal[RUNTIMES]
    FlavorName = Literal[("auto", *FLAVORS)]


def or_list(names: Iterable[str]) -> str:
    """`a, b or c`: a choice's names in a help line."""
    items = list(names)
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


OTHER_FRAMEWORKS = or_list([f for f in FRAMEWORKS if f != DEFAULT_FRAMEWORK])  # those beside the default, in words
