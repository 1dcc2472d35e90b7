"""Typed, validated settings. Errors name the field and what is allowed, in one line."""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dltestbed.catalog import MODELS, model_names
from dltestbed.choices import DEFAULT_FRAMEWORK, PER_GPU, DataKind, Device, Framework, Gpus, Math, Mode, ProbeScale
from dltestbed.errors import ConfigError, plain

# a GPU's UUID as NVIDIA's driver writes it (nvidia-smi, NVML, CUDA_VISIBLE_DEVICES): GPU-… or, a MIG slice, MIG-…
GPU_UUID = re.compile(r"(GPU|MIG)-[0-9a-fA-F][0-9a-fA-F/-]*")


class _RunSpec(BaseModel):
    """What every run shares, a model's or the microbenchmarks': its data, device, samples, seed, CPUs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    framework: Framework = DEFAULT_FRAMEWORK  # what the run computes with (workload/frameworks/)
    data: DataKind = "synthetic"
    data_dir: str | None = None
    data_digest: str | None = None  # real data: the dataset's content digest (dataset.identify) ...
    data_files: int | None = Field(None, ge=1)  # ... its file count and bytes, which the workload checks of its copy
    data_bytes: int | None = Field(None, ge=0)
    device: Device = "auto"
    sample_interval: float = Field(1.0, gt=0)  # seconds between resource samples
    seed: int = 0
    distributed: bool = False  # one worker of a distributed job (its cluster from the framework's worker_env)
    cpus: str | None = None  # pin the workload to these CPUs, e.g. "0-3,8" (Linux cpuset list syntax)
    # GPU memory per process: None grows as the run needs it (TensorFlow would otherwise map the whole GPU at
    # start, and a second process on the GPU fails); a number is a fixed limit in MiB (a slice of the GPU)
    gpu_memory_mib: int | None = Field(None, ge=64)
    # the one GPU this run uses, by UUID, the only one it sees (CUDA_VISIBLE_DEVICES) and samples: set on each
    # run of --gpus per-gpu, whose CUDA and NVML indices then cannot name another GPU
    gpu: str | None = None
    gpu_index: int | None = Field(None, ge=0)  # its NVML index as the controller read it (the run's `host/gpuN`)
    gpus: Gpus = "one"
    # with gpus node: the CPU split into this many logical devices (TensorFlow's), a replica each where there is
    # no GPU: a multi-GPU node's replica arithmetic, on a CPU (the workload's own option, for tests)
    cpu_devices: int | None = Field(None, ge=2, le=64)

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
        if self.gpus != "one" and self.distributed:
            raise ValueError(f"--gpus {self.gpus} is for one machine's GPUs; a distributed job's workers use theirs")
        if self.cpu_devices is not None and self.gpus != "node":
            raise ValueError("--cpu-devices splits the CPU into replicas for --gpus node")
        if self.gpus == PER_GPU and self.device == "cpu":
            raise ValueError("--gpus per-gpu runs a process on each GPU, and --device cpu hides them")
        if self.gpu is not None and (self.gpus != "one" or self.device == "cpu"):
            raise ValueError("--gpu names the one GPU of a run: not with --gpus node or per-gpu, nor --device cpu")

    def _check_data(self) -> None:
        if self.data == "real" and not self.data_dir:
            raise ValueError("--data real needs --data-dir DIR (make one with `dltestbed data make`)")
        if self.data == "synthetic" and self.data_dir:
            raise ValueError("--data-dir is only used with --data real")
        if self.data_digest is not None and (self.data != "real" or self.data_files is None or self.data_bytes is None):
            raise ValueError("--data-digest goes with --data real, --data-files and --data-bytes")

    def _common_argv(self) -> list[str]:
        """The arguments both of the workload's command lines take, for what differs from the defaults."""
        argv = [
            "--data",
            self.data,
            "--device",
            self.device,
            "--sample-interval",
            repr(self.sample_interval),
            "--seed",
            str(self.seed),
        ]
        if self.framework != DEFAULT_FRAMEWORK:  # a workload older than the option still takes the default's run
            argv += ["--framework", self.framework]
        if self.data_dir:
            argv += ["--data-dir", self.data_dir]
        if self.data_digest is not None:
            argv += [
                "--data-digest",
                self.data_digest,
                "--data-files",
                str(self.data_files),
                "--data-bytes",
                str(self.data_bytes),
            ]
        if self.distributed:
            argv.append("--distributed")
        if self.cpus:
            argv += ["--cpus", self.cpus]
        if self.gpu:
            argv += ["--gpu", self.gpu]
        if self.gpu_memory_mib is not None:
            argv += ["--gpu-memory-mib", str(self.gpu_memory_mib)]
        if self.gpus != "one":
            argv += ["--gpus", self.gpus]
        if self.cpu_devices is not None:
            argv += ["--cpu-devices", str(self.cpu_devices)]
        return argv


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


class WorkloadSpec(_RunSpec):
    """One workload run: what the controller asks a target to run, and what the workload parses."""

    model: str
    mode: Mode = "train"
    batch_size: int = Field(32, ge=1, le=65536)
    image_size: int | None = None  # None: the model's native size
    warmup: int | None = Field(None, ge=0)  # None: until steady (workload/steady.py)
    steps: int = Field(100, gt=0)
    classes: int = Field(1000, ge=2)
    math: Math = "float32"
    xla: bool = False  # compile the step with XLA (tf.function(jit_compile=True))
    # TensorFlow's op determinism on (the seed, initial weights and batches are the same on every target anyway):
    # the same stack on the same hardware computes the same loss, bit for bit (report/agreement.py checks it)
    deterministic: bool = False
    # hold out a fifth of the real dataset (dataset.split), train on the rest, then report the top-1 accuracy on
    # the held-out images (not timed): does a layer change what the model learns?
    accuracy: bool = False

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

    def to_argv(self) -> list[str]:
        """The workload's command-line arguments for this spec (the inverse of its parser)."""
        return [
            "--model",
            self.model,
            "--mode",
            self.mode,
            "--batch-size",
            str(self.batch_size),
            "--image-size",
            str(self.size),
            "--warmup",
            str(self.warmup) if self.warmup is not None else STEADY,
            "--steps",
            str(self.steps),
            "--classes",
            str(self.classes),
            "--math",
            self.math,
            *(["--xla"] if self.xla else []),
            *(["--deterministic"] if self.deterministic else []),
            *(["--accuracy"] if self.accuracy else []),
            *self._common_argv(),
        ]


# The microbenchmarks a `micro` run can make, in the order it makes them (workload/probes/ measures them;
# docs/reference.md, "Microbenchmarks", says what each measures and how).
PROBES = ("gemm", "conv", "membw", "h2d", "d2h", "d2d", "launch", "disk", "net", "allreduce")
PAIR_PROBES = ("net", "allreduce")  # between the workers of a distributed job; the others run on one target
ALONE_PROBES = tuple(p for p in PROBES if p not in PAIR_PROBES)
SCREEN_PROBES = ("gemm", "conv")  # what --suite screen checks, with fresh inputs, for a set time per GPU
FRAMEWORK_PROBES = ("gemm", "conv", "net", "allreduce")  # each framework's own; the others need none of its code
NODE_PROBES = ("allreduce",)  # also between one machine's GPUs (--gpus node: every GPU in one process)


class ProbeSpec(_RunSpec):
    """One `micro` run: the probes to make on a target, each case `warmup` + `steps` times. It fills the
    fields a run record shares with a model's run (model "micro", mode "probe", batch and size 0)."""

    probes: tuple[str, ...] = ALONE_PROBES
    scale: ProbeScale = "small"
    warmup: int = Field(1, ge=0)
    steps: int = Field(5, gt=0)
    model: Literal["micro"] = "micro"  # the fields a run record shares with a model's run
    mode: Literal["probe"] = "probe"
    batch_size: Literal[0] = 0
    # --suite screen: check (not time) the probes' results for this long per GPU (or on the CPU), fresh inputs
    # each round, each product against float64 and against itself
    screen_seconds: float | None = Field(None, gt=0)

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
        local = [p for p in pair if p in NODE_PROBES and self.gpus == "node"]  # between a machine's GPUs
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

    def to_argv(self) -> list[str]:
        """The workload's command line (`python -m dltestbed.workload micro ...`)."""
        return [
            "micro",
            "--probes",
            ",".join(self.probes),
            "--scale",
            self.scale,
            "--warmup",
            str(self.warmup),
            "--steps",
            str(self.steps),
            *(["--screen-seconds", repr(self.screen_seconds)] if self.screen_seconds is not None else []),
            *self._common_argv(),
        ]


Spec = WorkloadSpec | ProbeSpec  # what a run runs: a model or the microbenchmarks


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
