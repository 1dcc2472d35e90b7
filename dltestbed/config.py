"""Typed, validated settings. Errors name the field and what is allowed, in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dltestbed.errors import ConfigError
from dltestbed.workload.catalog import MODELS, model_names

DataKind = Literal["synthetic", "real"]
Mode = Literal["train", "infer"]
Device = Literal["auto", "cpu", "gpu"]


class WorkloadSpec(BaseModel):
    """One workload run: what the controller asks a target to run, and what the workload parses."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    data: DataKind = "synthetic"
    data_dir: str | None = None
    mode: Mode = "train"
    device: Device = "auto"
    batch_size: int = Field(32, ge=1, le=65536)
    image_size: int | None = None  # None: the model's native size
    warmup: int = Field(10, ge=0)
    steps: int = Field(100, gt=0)
    classes: int = Field(1000, ge=2)
    sample_interval: float = Field(1.0, gt=0)  # seconds between resource samples
    seed: int = 0

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
        if self.data == "real" and not self.data_dir:
            raise ValueError("--data real needs --data-dir DIR (make one with `dltestbed data make`)")
        if self.data == "synthetic" and self.data_dir:
            raise ValueError("--data-dir is only used with --data real")
        return self

    @property
    def size(self) -> int:
        """The input size actually used: the given one or the model's native size."""
        return self.image_size if self.image_size is not None else MODELS[self.model].native_size

    def to_argv(self) -> list[str]:
        """The workload's command-line arguments for this spec (the inverse of its parser)."""
        argv = [
            "--model", self.model, "--data", self.data, "--mode", self.mode, "--device", self.device,
            "--batch-size", str(self.batch_size), "--image-size", str(self.size),
            "--warmup", str(self.warmup), "--steps", str(self.steps), "--classes", str(self.classes),
            "--sample-interval", repr(self.sample_interval), "--seed", str(self.seed),
        ]  # fmt: skip
        if self.data_dir:
            argv += ["--data-dir", self.data_dir]
        return argv


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
    msg = err["msg"].removeprefix("Value error, ")
    field = loc.replace("_", "-") if loc else ""
    got = err.get("input")
    if field and not isinstance(got, dict):
        return f"--{field}: {msg} (got {got!r})"
    return msg


def workload_spec(**values: object) -> WorkloadSpec:
    """A validated WorkloadSpec or a ConfigError naming the bad field."""
    spec = build(WorkloadSpec, **values)
    assert isinstance(spec, WorkloadSpec)
    return spec


def resolve_path(p: str | Path) -> Path:
    """Expand ~ and make absolute (paths travel to workloads, which may run elsewhere)."""
    return Path(p).expanduser().resolve()
