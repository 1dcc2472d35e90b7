"""Typed, validated settings. Errors name the field and what is allowed, in one line."""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dltestbed.catalog import MODELS, model_names
from dltestbed.choices import (
    DEFAULT_FRAMEWORK,
    MATHS,
    NODE,
    ONE,
    DataKind,
    Device,
    Framework,
    Math,
    Mode,
    ProbeScale,
    ProcessGpus,
)
from dltestbed.errors import ConfigError, plain

# a GPU's UUID as NVIDIA's driver writes it (nvidia-smi, NVML, CUDA_VISIBLE_DEVICES): GPU-… or, a MIG slice, MIG-…
GPU_UUID = re.compile(r"(GPU|MIG)-[0-9a-fA-F][0-9a-fA-F/-]*")


class RunSpec(BaseModel):
    """What every run shares, a model's or the microbenchmarks': its data, device, samples, seed, CPUs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    framework: Framework = Field(DEFAULT_FRAMEWORK, description="what the run computes with (workload/frameworks/)")
    data: DataKind = Field("synthetic", description="synthetic (in memory) or real (data_dir)")
    data_dir: str | None = Field(None, description="real data: an ImageNet-style folder, DIR/<class>/*.jpg")
    data_digest: str | None = Field(
        None, description="real data: the dataset's content digest (dataset.identify), with its files and bytes"
    )
    data_files: int | None = Field(None, ge=1, description="with data_digest: the files the dataset has")
    data_bytes: int | None = Field(None, ge=0, description="with data_digest: the bytes its files hold")
    device: Device = Field("auto", description="auto, cpu (hides the GPUs) or gpu (requires one)")
    sample_interval: float = Field(1.0, gt=0, description="seconds between resource samples")
    seed: int = Field(0, description="the seed of the initial weights, the synthetic batches and the data order")
    distributed: bool = Field(
        False, description="one worker of a distributed job: its cluster from the framework's environment"
    )
    cpus: str | None = Field(None, description='run only on these CPUs, a cpuset list like "0-3,8"')
    # TensorFlow would otherwise map the whole GPU at start, and a second process on the GPU fails
    gpu_memory_mib: int | None = Field(
        None, ge=64, description="a fixed GPU memory limit per GPU, MiB (default: grow as the run needs)"
    )
    # set on each run of --gpus per-gpu, whose CUDA and NVML indices then cannot name another GPU
    gpu: str | None = Field(
        None, description="the one GPU the run sees (CUDA_VISIBLE_DEVICES) and samples, by UUID: GPU-… or MIG-…"
    )
    gpu_index: int | None = Field(None, ge=0, description="that GPU's NVML index as the controller read it")
    gpus: ProcessGpus = Field(
        ONE, description="one (the first GPU, or gpu's) or node (every GPU of the machine in one job, a replica each)"
    )
    # a multi-GPU node's replica arithmetic, on a CPU (the workload's own option, for tests)
    cpu_devices: int | None = Field(
        None, ge=2, le=64, description="with gpus node and no GPU: the CPU split into this many replicas"
    )

    @field_validator("gpu")
    @classmethod
    def _gpu_uuid(cls, v: str | None) -> str | None:
        if v is not None and not GPU_UUID.fullmatch(v):
            raise ValueError(f"--gpu {v!r}: a GPU's UUID as nvidia-smi -L prints it (GPU-… or MIG-…)")
        return v

    @field_validator("cpus")
    @classmethod
    def _cpu_list(cls, v: str | None) -> str | None:
        if v is not None:
            parse_cpu_list(v)
        return v

    def _check_gpus(self) -> None:
        """--gpus against the rest: one machine's GPUs, not a distributed job's; --cpu-devices only with node."""
        if self.gpus != ONE and self.distributed:
            raise ValueError(f"--gpus {self.gpus} is for one machine's GPUs; a distributed job's workers use theirs")
        if self.cpu_devices is not None and self.gpus != NODE:
            raise ValueError(f"--cpu-devices splits the CPU into replicas for --gpus {NODE}")
        if self.gpu is not None and (self.gpus != ONE or self.device == "cpu"):
            raise ValueError(f"--gpu names the one GPU of a run: not with --gpus {NODE}, nor --device cpu")

    def _check_data(self) -> None:
        if self.data == "real" and not self.data_dir:
            raise ValueError("--data real needs --data-dir DIR (make one with `dltestbed data make`)")
        if self.data == "synthetic" and self.data_dir:
            raise ValueError("--data-dir is only used with --data real")
        if self.data_digest is not None and (self.data != "real" or self.data_files is None or self.data_bytes is None):
            raise ValueError("--data-digest goes with --data real, --data-files and --data-bytes")


STEADY = "auto"  # --warmup auto: warm up until steady (workload/steady.py)


def parse_warmup(value: int | str) -> int | None:
    """--warmup, the controller's and the workload's: a count of steps, or STEADY (None: until steady); else
    ValueError saying what it takes."""
    if value == STEADY:
        return None
    if not str(value).isdigit():
        raise ValueError(f"a number of steps or '{STEADY}' (got {value!r})")
    return int(value)


# TensorFlow 2.21 on an H100 (2026-11-26): "GPU MaxPool gradient ops do not yet have a deterministic XLA
# implementation" at a deterministic XLA training's first step, for every model here (each has a max pool)
XLA_NOT_DETERMINISTIC = (
    "--deterministic trains without XLA: TensorFlow has no deterministic XLA gradient of a GPU's max pool; "
    "leave --xla out"
)


class WorkloadSpec(RunSpec):
    """One workload run: what the controller asks a target to run, and what the workload parses."""

    model: str = Field(description=f"one of: {', '.join(model_names())}")
    mode: Mode = Field("train", description="train or infer")
    batch_size: int = Field(32, ge=1, le=65536, description="images a step (a worker's, when distributed)")
    image_size: int | None = Field(None, description="input pixels a side (default: the model's native size)")
    warmup: int | None = Field(
        None, ge=0, description="untimed steps first (default: until steady, workload/steady.py)"
    )
    steps: int = Field(100, gt=0, description="timed steps")
    classes: int = Field(1000, ge=2, description="the model's classes (real data: the folder's)")
    math: Math = Field("float32", description=f"the arithmetic: {', '.join(MATHS)}")
    xla: bool = Field(False, description="compile the step (XLA; torch.compile with PyTorch)")
    # the seed, initial weights and batches are the same on every target anyway (report/agreement.py checks it)
    deterministic: bool = Field(
        False, description="the framework's op determinism: the same stack computes the same loss, bit for bit"
    )
    # does a layer change what the model learns?
    accuracy: bool = Field(
        False, description="real data: train on 4/5 of the images, then report top-1 accuracy on the other fifth"
    )

    @field_validator("model")
    @classmethod
    def _known_model(cls, v: str) -> str:
        if v not in MODELS:
            raise ValueError(f"unknown model {v!r}; known: {', '.join(model_names())}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> WorkloadSpec:
        info = MODELS[self.model]
        if self.image_size is not None and self.image_size < info.min_size:
            raise ValueError(f"image size {self.image_size} is below {self.model}'s minimum of {info.min_size} px")
        self._check_data()
        if self.distributed and self.mode != "train":
            raise ValueError("distributed runs train (inference has no step shared between workers)")
        if self.accuracy and (self.data != "real" or self.mode != "train" or self.distributed):
            raise ValueError("--accuracy trains on real data and tests on held-out images: --data real, --mode train")
        if self.math == "tf32" and self.device == "cpu":
            raise ValueError("--math tf32 is a GPU's (Ampere or later) tensor-core math; on --device cpu use float32")
        self._check_gpus()
        if self.deterministic and self.xla and self.mode == "train":
            raise ValueError(XLA_NOT_DETERMINISTIC)
        return self

    @property
    def size(self) -> int:
        """The input size actually used: the given one or the model's native size."""
        return self.image_size if self.image_size is not None else MODELS[self.model].native_size


# The microbenchmarks a `micro` run can make, in the order it makes them (workload/probes/ measures them;
# docs/reference.md, "Microbenchmarks", says what each measures and how).
PROBES = ("gemm", "conv", "membw", "h2d", "d2h", "d2d", "launch", "disk", "net", "allreduce")
PAIR_PROBES = ("net", "allreduce")  # between the workers of a distributed job; the others run on one target
ALONE_PROBES = tuple(p for p in PROBES if p not in PAIR_PROBES)
SCREEN_PROBES = ("gemm", "conv")  # what --suite screen checks, with fresh inputs, for a set time per GPU
FRAMEWORK_PROBES = ("gemm", "conv", "net", "allreduce")  # each framework's own; the others need none of its code
NODE_PROBES = ("allreduce",)  # also between one machine's GPUs (--gpus node: every GPU in one process)


class ProbeSpec(RunSpec):
    """One `micro` run: the probes to make on a target, each case `warmup` + `steps` times. It fills the
    fields a run record shares with a model's run (model "micro", mode "probe", batch and size 0)."""

    probes: tuple[str, ...] = Field(ALONE_PROBES, description=f"of: {', '.join(PROBES)}")
    scale: ProbeScale = Field("small", description="small (seconds a probe) or full (the models' shapes)")
    warmup: int = Field(1, ge=0, description="untimed calls of each case first")
    steps: int = Field(5, gt=0, description="timed calls of each case")
    model: Literal["micro"] = Field("micro", description="micro: this spec is the microbenchmarks'")
    mode: Literal["probe"] = "probe"  # the fields a run record shares with a model's run
    batch_size: Literal[0] = 0
    screen_seconds: float | None = Field(
        None, gt=0, description="check (not time) gemm and conv this long per GPU, fresh inputs each round (screen)"
    )

    @field_validator("probes")
    @classmethod
    def _known_probes(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [p for p in v if p not in PROBES]
        if unknown or not v:
            raise ValueError(f"unknown probe {(unknown or [''])[0]!r}; known: {', '.join(PROBES)}")
        return tuple(p for p in PROBES if p in v)

    @model_validator(mode="after")
    def _consistent(self) -> ProbeSpec:
        pair = [p for p in self.probes if p in PAIR_PROBES]
        alone = [p for p in self.probes if p not in PAIR_PROBES]
        if self.distributed and alone:
            raise ValueError(
                f"{alone[0]} runs on one target (--scenario single); between workers: {', '.join(PAIR_PROBES)}"
            )
        local = [p for p in pair if p in NODE_PROBES and self.gpus == NODE]  # between a machine's GPUs
        if not self.distributed and len(local) < len(pair):
            raise ValueError(
                f"{pair[0]} runs between the workers of a job: --scenario distributed"
                + (" (allreduce also between one machine's GPUs: --gpus node)" if pair[0] in NODE_PROBES else "")
            )
        other = [p for p in self.probes if p not in SCREEN_PROBES]
        if self.screen_seconds is not None and other:
            raise ValueError(f"--suite screen checks {' and '.join(SCREEN_PROBES)}, not {other[0]}")
        self._check_gpus()
        self._check_data()
        return self

    @property
    def size(self) -> int:
        """No input images: 0."""
        return 0


Spec = WorkloadSpec | ProbeSpec  # what a run runs: a model or the microbenchmarks


def spec_json(spec: Spec) -> str:
    """The spec as the workload reads it (`--spec`): one line of JSON holding its model, which says its kind (a
    model's run, or "micro"), and each field that differs from its default."""
    fields = {"model": spec.model, **spec.model_dump(mode="json", exclude_defaults=True)}
    return json.dumps(fields, separators=(",", ":"), ensure_ascii=False)


def load_spec(text: str) -> Spec:
    """The validated spec of spec_json's text (a ProbeSpec where its model is "micro"), or a ConfigError in one
    line: not JSON, not an object, or a field that is unknown or out of range."""
    try:
        fields = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"--spec: not JSON: {exc}") from None
    if not isinstance(fields, dict):
        raise ConfigError(f"--spec: a JSON object of the run's fields, not {type(fields).__name__}")
    kind = ProbeSpec if fields.get("model") == ProbeSpec.model_fields["model"].default else WorkloadSpec
    spec = build(kind, **fields)
    assert isinstance(spec, WorkloadSpec | ProbeSpec)
    return spec


def probe_spec(**values: object) -> ProbeSpec:
    """A validated ProbeSpec or a ConfigError naming the bad field."""
    spec = build(ProbeSpec, **values)
    assert isinstance(spec, ProbeSpec)
    return spec


def parse_cpu_list(text: str) -> list[int]:
    """CPU numbers of a cpuset list like "0-3,8" (sorted, unique), or ValueError saying what is wrong."""
    cpus: set[int] = set()
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m:
            raise ValueError(f"CPU list {text!r} is not like 0-3,8")
        lo, hi = int(m[1]), int(m[2] or m[1])
        if hi < lo:
            raise ValueError(f"CPU list {text!r}: range {lo}-{hi} runs backwards")
        cpus.update(range(lo, hi + 1))
    return sorted(cpus)


def missing_cpu(wanted: list[int], have: Collection[int]) -> str | None:
    """Why a CPU list cannot be used on a machine with CPUs `have` ("CPU 5 is not one of this machine's
    (0-1)"), or None when it can."""
    missing = sorted(set(wanted) - set(have))
    if not missing:
        return None
    return f"CPU {missing[0]} is not one of this machine's ({format_cpu_list(sorted(have))})"


def format_cpu_list(cpus: list[int]) -> str:
    """The shortest cpuset list for CPU numbers: [0, 1, 2, 5] → "0-2,5"."""
    out: list[str] = []
    for c in sorted(set(cpus)):
        if out and "-" in out[-1] and int(out[-1].split("-")[1]) == c - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{c}"
        elif out and "-" not in out[-1] and int(out[-1]) == c - 1:
            out[-1] = f"{out[-1]}-{c}"
        else:
            out.append(str(c))
    return ",".join(out)


def build(model_cls: type[BaseModel], **values: object) -> BaseModel:
    """Build a pydantic model, turning a validation failure into one ConfigError line."""
    try:
        return model_cls(**values)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc)) from None


def describe_validation_error(exc: ValidationError) -> str:
    """One line for the first problem: `field: message (got value)`."""
    err = exc.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in err["loc"])
    msg = plain(err["msg"])
    field = OPTION_OF.get(loc, loc.replace("_", "-")) if loc else ""
    got = err.get("input")
    if isinstance(got, (tuple, list)):
        got = ",".join(str(g) for g in got)
    if field and err["type"] == "missing":
        return f"--{field}: required"
    if field and not isinstance(got, dict):
        return f"--{field}: {msg} (got {got!r})"
    return msg


OPTION_OF = {"screen_seconds": "screen-time"}  # a spec's field where the option's name differs


def workload_spec(**values: object) -> WorkloadSpec:
    """A validated WorkloadSpec or a ConfigError naming the bad field."""
    spec = build(WorkloadSpec, **values)
    assert isinstance(spec, WorkloadSpec)
    return spec


def resolve_path(p: str | Path) -> Path:
    """Expand ~ and make absolute (paths travel to workloads, which may run elsewhere)."""
    return Path(p).expanduser().resolve()
