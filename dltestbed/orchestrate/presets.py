"""Presets: defaults for everything the user did not give (models, sizes, batches, warm-up, steps, math, XLA,
the probes' scale), one per name of choices.PRESETS; `--preset auto` picks one for this machine."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from dltestbed.catalog import MODELS
from dltestbed.choices import AUTO_PRESET
from dltestbed.errors import ConfigError


@dataclass(frozen=True)
class Preset:
    """Defaults for everything the user did not give."""

    name: str
    summary: str
    models: tuple[str, ...]
    sizes: dict[str, int | None]  # per model; None: native
    batch_size: int
    warmup: int | None  # None: until steady (workload/steady.py)
    steps: int
    batches: dict[str, int] = field(default_factory=dict)  # per model, over batch_size
    math: str = "float32"  # config.Math
    xla: bool = False  # left out of a --deterministic run: XLA has no deterministic MaxPool gradient on a GPU
    probe_scale: str = "small"  # micro/full's sizes, unless --probe-scale names them


PRESETS: dict[str, Preset] = {
    "quick": Preset(
        "quick",
        "alexnet and resnet50 at 64 px, batch 8, warm-up until steady + 20 timed steps: about a minute per kind "
        "and repetition on a 2-core CPU",
        ("alexnet", "resnet50"),
        {"alexnet": 64, "resnet50": 64, "inception3": 75},
        batch_size=8,
        warmup=None,
        steps=20,
    ),
    "study": Preset(
        "study",
        "the published protocol: native sizes (224/224/299 px), batch 32, warm-up until steady + 100 timed steps",
        ("alexnet", "resnet50", "inception3"),
        {name: None for name in MODELS},
        batch_size=32,
        warmup=None,
        steps=100,
    ),
    # What an owner of a modern GPU validates with (NVIDIA's own TensorFlow ResNet-50 recipe is AMP + XLA):
    # batches of NVIDIA's per-GPU AMP recipes for 80 GB cards (AlexNet at the study co-tenant's 512), mixed
    # precision (bfloat16 where the GPU has it, else float16), XLA, and a warm-up until steady, which covers XLA's
    # compile and cuDNN's autotuning (a fixed 10 left every H100 run flagged by the steady-state check).
    "gpu": Preset(
        "gpu",
        "native sizes, batch 256 (alexnet 512), mixed precision (bfloat16 where the GPU has it) with XLA, "
        "warm-up until steady + 200 timed steps",
        ("alexnet", "resnet50", "inception3"),
        {name: None for name in MODELS},
        batch_size=256,
        warmup=None,
        steps=200,
        batches={"alexnet": 512},
        math="mixed",
        xla=True,
        probe_scale="full",  # n=256/512 GEMMs reached 0-5 % of an H100's peaks: a GPU's probes need full sizes
    ),
}


def auto_preset(gpus: Sequence[str] | None, framework: str = "TensorFlow") -> tuple[str, str]:
    """`--preset auto`: (the preset, the line that says why). gpus: the GPUs this machine's `framework` (in
    words) would use (NVIDIA's driver lists them and it is a CUDA build), or None when the bench does not run
    on this machine (an inventory, Slurm): there the quick preset, as everywhere without a GPU."""
    if gpus:
        return "gpu", f"--preset auto: gpu, for this machine's {', '.join(sorted(set(gpus)))} ({len(gpus)} GPU(s))"
    where = f"this machine has no GPU {framework} can use" if gpus is not None else "not on this machine"
    return "quick", f"--preset auto: quick ({where})"


def preset(name: str) -> Preset:
    """A preset by name, or a ConfigError listing them."""
    if name not in PRESETS:
        raise ConfigError(f"--preset: unknown preset {name!r}; known: {AUTO_PRESET}, {', '.join(PRESETS)}")
    return PRESETS[name]
