"""The options of `dltestbed bench`, one type a name: typer reads them from the command's signature."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dltestbed.cli.options import (
    RESULTS_HELP,
    CotenantOpt,
    DataOpt,
    DeviceOpt,
    LauncherOpt,
    MathOpt,
    ModeOpt,
    OrderOpt,
    PresetOpt,
    ScenarioOpt,
)

ModelOption = Annotated[
    list[str] | None,
    typer.Option("--model", "-m", help="Model: alexnet, resnet50 or inception3. Repeatable. Default: the preset's."),
]

PresetOption = Annotated[
    PresetOpt,
    typer.Option(
        help="Defaults for what is not given: quick (alexnet and resnet50, small sizes, 2+20 steps), study "
        "(the published protocol: native sizes, batch 32, float32, 10+100 steps) or gpu (native sizes, batch 256 "
        "(alexnet 512), mixed precision with XLA, 50+200 steps). auto: gpu where this machine's TensorFlow has a "
        "GPU (said on the first line), else quick."
    ),
]

DataOption = Annotated[
    DataOpt,
    typer.Option(help="synthetic (in memory, no I/O) or real (JPEGs from --data-dir)."),
]

DataDirOption = Annotated[
    Path | None,
    typer.Option(
        help="ImageNet-style folder DIR/<class>/*.jpg (see `dltestbed data make`). Digested once (files, "
        "bytes, content; cached while no file changes); bm reads it, cbm gets it mounted read-only, VMs and "
        "inventory hosts get a copy named by the digest, made once and kept (cvm mounts the VM's). Every run "
        "records the digest; the report never compares runs on different data."
    ),
]

DataSharedOption = Annotated[
    bool,
    typer.Option(
        "--data-shared",
        help="With --inventory: --data-dir is the same folder on every host (NFS): read "
        "there, checked to hold the same files and bytes, not copied (VMs still get a copy).",
    ),
]

SuiteOption = Annotated[
    str,
    typer.Option(
        help="study: the models (the preset's, or --model). micro: the "
        "microbenchmarks (--probes), one run per target and repetition (with --scenario "
        "distributed: one job, net and allreduce between its workers), to explain a layer's "
        "cost (compute, memory, disk, host↔device, network). full: both; the report puts the "
        "probes' changes beside the models' overheads. screen: acceptance for silent errors: gemm and "
        "conv checked against float64 and themselves for --screen-time per GPU, and one --deterministic "
        "training per target, compared step by step."
    ),
]

ScreenTimeOption = Annotated[
    float,
    typer.Option(
        "--screen-time",
        min=0.001,
        help="With --suite screen: seconds of checks per GPU (or on the CPU), fresh inputs each round.",
    ),
]

ProbesOption = Annotated[
    str | None,
    typer.Option(
        help="With --suite micro or full: comma-separated. On each target "
        "(--scenario single): gemm (matmul FLOP/s), conv (the models' heaviest "
        "convolutions), membw (memory copy), h2d and d2h (GPU copies; skipped without a "
        "GPU), disk (reads of --data-dir, or a scratch file). Between the workers of a "
        "job (--scenario distributed): net (latency, bandwidth through TensorFlow's "
        "gRPC collectives), allreduce (algorithm and bus bandwidth over message sizes). "
        "Default: all of the scenario's."
    ),
]

ProbeScaleOption = Annotated[
    str,
    typer.Option(
        help="With --suite micro or full: small (seconds a probe) or full (the models' native shapes, larger copies)."
    ),
]

ModeOption = Annotated[
    ModeOpt,
    typer.Option(help="train or infer."),
]

DeviceOption = Annotated[
    DeviceOpt,
    typer.Option(help="auto, cpu (hides the GPUs) or gpu (fails without one)."),
]

MathOption = Annotated[
    MathOpt | None,
    typer.Option(
        help="The models' arithmetic: float32 (TF32 off), tf32 (float32 "
        "matmuls and convolutions on Ampere-or-later tensor cores: TensorFlow's own "
        "default there), mixed_bfloat16, mixed_float16 (loss-scaled), or mixed "
        "(bfloat16 where the device has it, else float16). Recorded with every run; "
        "the report never compares runs of different math. Default: the preset's "
        "(float32; gpu: mixed).",
        rich_help_panel="GPU",
    ),
]

XlaOption = Annotated[
    bool | None,
    typer.Option(
        "--xla/--no-xla",
        help="Compile the models' step with XLA. Default: the preset's (gpu: on).",
        rich_help_panel="GPU",
    ),
]

DeterministicOption = Annotated[
    bool,
    typer.Option(
        "--deterministic",
        help="TensorFlow's op determinism (the seed, weights and batches are the same on every target "
        "anyway): the report compares every step's loss with bare metal's, bit for bit where the stack is "
        "the same, and names the first step where a run diverged.",
    ),
]

AccuracyOption = Annotated[
    bool,
    typer.Option(
        "--accuracy",
        help="With --data real, train: hold out every 5th image of each class, train on the rest, then "
        "classify the held-out ones (not timed). Each repetition trains from its own seed, the same on "
        "every target; the report gives each layer's top-1 accuracy with its spread and its difference "
        "from bare metal with a 95 % interval. Learnable data: `dltestbed data make`.",
    ),
]

GpuMemoryMibOption = Annotated[
    int | None,
    typer.Option(
        help="A fixed GPU memory limit per process in MiB (a slice "
        "of the GPU). Default: each run's memory grows as it needs (never the "
        "whole GPU at start, so a co-tenant or a second worker fits).",
        rich_help_panel="GPU",
    ),
]

BatchSizeOption = Annotated[
    int | None,
    typer.Option(help="Images per step. Default: the preset's."),
]

ImageSizeOption = Annotated[
    int | None,
    typer.Option(help="Input size in px, for every model. Default: the preset's."),
]

WarmupOption = Annotated[
    int | None,
    typer.Option(help="Untimed steps before the timed ones. Default: the preset's."),
]

StepsOption = Annotated[
    int | None,
    typer.Option(help="Timed steps. Default: the preset's."),
]

ClassesOption = Annotated[
    int,
    typer.Option(help="Classes of the model's output (real data: the folder's)."),
]

RepeatOption = Annotated[
    str,
    typer.Option(
        help="Repetitions of every run (rep 1 of every model and kind, then rep 2 ...; "
        "3 is the fewest that gives an overhead a useful interval), "
        "or auto: add repetitions until every overhead's 95 % interval is within "
        "±--precision % (at most --max-repeat)."
    ),
]

PrecisionOption = Annotated[
    float,
    typer.Option(help="With --repeat auto: the overheads' 95 % half-width to reach, in %."),
]

MaxRepeatOption = Annotated[
    int,
    typer.Option(help="With --repeat auto: stop here even if the precision is not reached."),
]

AaOption = Annotated[
    bool,
    typer.Option(
        "--aa",
        help="Run bare metal twice per repetition, as A and A′: the report's "
        "A/A interval (it must contain 0) is the noise floor, with the run-to-run variation "
        "and the smallest effect these repetitions detect.",
    ),
]

OrderOption = Annotated[
    OrderOpt,
    typer.Option(
        help="Within a repetition: interleaved (every model on every kind in turn) or random (shuffled, --seed)."
    ),
]

SeedOption = Annotated[
    int,
    typer.Option(help="Seed for --order random (each repetition shuffled from it)."),
]

ScenarioOption = Annotated[
    ScenarioOpt,
    typer.Option(
        help="single: each target alone. distributed: one training job over several workers per kind "
        "(MultiWorkerMirroredStrategy; total throughput = sum of the workers'). shared: the foreground alone, "
        "then with a co-tenant on the same host."
    ),
]

WorkersOption = Annotated[
    int | None,
    typer.Option(help="distributed: workers per job (default: one per inventory host; on this machine: 2)."),
]

BaselineOption = Annotated[
    bool,
    typer.Option(
        "--baseline/--no-baseline", help="distributed: also run one worker alone per job (scaling efficiency)."
    ),
]

CotenantOption = Annotated[
    CotenantOpt,
    typer.Option(
        help="shared: the co-tenant — alexnet (training, large batch), cpu (GPUs hidden), io (real data from "
        "--data-dir) or gpu."
    ),
]

CotenantBatchOption = Annotated[
    int | None,
    typer.Option(help="shared: the co-tenant's batch (default: 512 on a host with a GPU, as in the study; else 64)."),
]

IsolateOption = Annotated[
    bool,
    typer.Option(help="shared: pin the foreground and the co-tenant to disjoint halves of the host's CPUs."),
]

TimeoutOption = Annotated[
    float | None,
    typer.Option(help="Seconds after which a run is stopped and stored as failed."),
]

TargetsOption = Annotated[
    str,
    typer.Option(
        "--targets",
        help="Target kinds, comma-separated: auto (default: on this machine, bm and cbm when "
        "Docker or Podman holds this build's image, else bm twice as A/A; with --inventory or another scenario, "
        "bm), bm (bare metal), cbm (a container on it), vm (a "
        "libvirt VM on the host — this machine, or with --inventory each host also in libvirt_hosts — started "
        "when needed and kept for the next bench; `dltestbed teardown` removes it), cvm (a container in that VM).",
    ),
]

VmVcpusOption = Annotated[
    int | None,
    typer.Option(help="vm/cvm: the VM's vCPUs (default 2, or the host's dltestbed_vm_vcpus).", rich_help_panel="VM"),
]

VmMemoryOption = Annotated[
    int | None,
    typer.Option(
        help="vm/cvm: the VM's memory in MiB (default 3072, or dltestbed_vm_memory_mib).", rich_help_panel="VM"
    ),
]

VmGpusOption = Annotated[
    str | None,
    typer.Option(
        help="vm/cvm: GPUs to pass through: all, a count, or PCI addresses (checked before anything is "
        "created: IOMMU, vfio-pci, NUMA).",
        rich_help_panel="VM",
    ),
]

VmCpusOption = Annotated[
    str | None,
    typer.Option(
        help="vm/cvm: host CPUs to pin the vCPUs to, e.g. 0-3 (one each when the counts match).", rich_help_panel="VM"
    ),
]

VmNumaNodeOption = Annotated[
    int | None,
    typer.Option(
        help="vm/cvm: take the VM's memory from this host NUMA node only (put the GPU's node here).",
        rich_help_panel="VM",
    ),
]

VmVirtTypeOption = Annotated[
    str | None,
    typer.Option(help="vm/cvm: kvm or qemu (default: detected; qemu = TCG emulation).", rich_help_panel="VM"),
]

VmImageOption = Annotated[
    str | None,
    typer.Option(
        help="vm: boot your own qcow2 or raw cloud image instead of dltestbed's guest image (cloud-init "
        "gets the VM's key, host key and address; the workload is installed in it when missing; no cvm).",
        rich_help_panel="VM",
    ),
]

VmDiskOption = Annotated[
    int | None,
    typer.Option(
        help="vm/cvm: the VM's disk in GiB, at least (default: the image's size; 20 for your own image).",
        rich_help_panel="VM",
    ),
]

RuntimeOption = Annotated[
    str | None,
    typer.Option(
        help="Container runtime for cbm: docker or podman (default: docker if its daemon answers, else podman).",
        rich_help_panel="Container",
    ),
]

ContainerCpusetOption = Annotated[
    str | None,
    typer.Option(
        help="cbm: run the container on these CPUs only, e.g. 0 or 0-3 (over the inventory's "
        "dltestbed_container_cpuset); the report lists it beside the overhead.",
        rich_help_panel="Container",
    ),
]

ContainerMemoryOption = Annotated[
    str | None,
    typer.Option(
        help="cbm: the container's memory limit, e.g. 4g (over dltestbed_container_memory).",
        rich_help_panel="Container",
    ),
]

InventoryOption = Annotated[
    Path | None,
    typer.Option(help="Ansible inventory: run on its bare_metal hosts over SSH (after `dltestbed provision`)."),
]

LimitOption = Annotated[
    str | None,
    typer.Option(help="With --inventory: only these hosts or groups (Ansible pattern)."),
]

LauncherOption = Annotated[
    LauncherOpt,
    typer.Option(
        help="direct: this machine, or the inventory's hosts over SSH. slurm: this machine is a "
        "Slurm submit host; the bench holds one allocation of whole nodes (salloc --exclusive, given back when it "
        "ends, Ctrl-C or kill included) and runs each workload as an srun step on a node, stored under the node's "
        "name (bm; the workload installed on the nodes, see --venv).",
        rich_help_panel="Slurm",
    ),
]

PartitionOption = Annotated[
    str | None,
    typer.Option(
        help="slurm: the partition (default: the --inventory's "
        "dltestbed_slurm_partition, else Slurm's, or $SALLOC_PARTITION).",
        rich_help_panel="Slurm",
    ),
]

NodesOption = Annotated[
    int | None,
    typer.Option(
        help="slurm: nodes to allocate (default: --workers or 2 with --scenario "
        "distributed, else 1); the runs of --scenario single go to every node at once.",
        rich_help_panel="Slurm",
    ),
]

AccountOption = Annotated[
    str | None,
    typer.Option(
        help="slurm: the account to charge (default: the --inventory's dltestbed_slurm_account).",
        rich_help_panel="Slurm",
    ),
]

TimeLimitOption = Annotated[
    str | None,
    typer.Option(
        "--time",
        help="slurm: the allocation's time limit, in Slurm's "
        "format (30, 1:30:00; default: the --inventory's dltestbed_slurm_time); a "
        "run the limit ends is stored failed, with its steps and Slurm's reason.",
        rich_help_panel="Slurm",
    ),
]

VenvOption = Annotated[
    str | None,
    typer.Option(
        help="slurm: dltestbed's venv on the nodes, e.g. on a shared filesystem "
        "(default: the --inventory host's dltestbed_venv of that name, else "
        "/opt/dltestbed/venv, where `provision` installs it).",
        rich_help_panel="Slurm",
    ),
]

ParallelOption = Annotated[
    bool,
    typer.Option("--parallel/--sequential", help="With several hosts: run them at once (default) or one by one."),
]

ResultsOption = Annotated[
    Path | None,
    typer.Option(help=RESULTS_HELP),
]

ReportOption = Annotated[
    Path | None,
    typer.Option(
        "--report",
        help="When the bench ends (failed runs included), write "
        "its report here and say where: .html (one page with the figures), .json, "
        "or Markdown (its figures in NAME_files/ beside it).",
    ),
]

AsJsonOption = Annotated[
    bool,
    typer.Option("--json", help="Print the runs' summaries as JSON on stdout."),
]
