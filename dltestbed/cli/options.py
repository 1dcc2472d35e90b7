"""Options and choices shared by several commands (bench, provision, runs, report, results)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer


class DataOpt(StrEnum):
    synthetic = "synthetic"
    real = "real"


class ModeOpt(StrEnum):
    train = "train"
    infer = "infer"


class DeviceOpt(StrEnum):
    auto = "auto"
    cpu = "cpu"
    gpu = "gpu"


class ScenarioOpt(StrEnum):
    single = "single"
    distributed = "distributed"
    shared = "shared"


LayoutOpt = ScenarioOpt  # a layout places hosts for the scenario of the same name


class OrderOpt(StrEnum):
    interleaved = "interleaved"
    random = "random"


class CotenantOpt(StrEnum):
    alexnet = "alexnet"
    cpu = "cpu"
    io = "io"
    gpu = "gpu"


class LauncherOpt(StrEnum):
    direct = "direct"
    slurm = "slurm"


class PresetOpt(StrEnum):
    auto = "auto"
    quick = "quick"
    study = "study"
    gpu = "gpu"


class SuiteOpt(StrEnum):
    study = "study"
    micro = "micro"
    full = "full"
    screen = "screen"


class ProbeScaleOpt(StrEnum):
    small = "small"
    full = "full"


class RuntimeOpt(StrEnum):
    docker = "docker"
    podman = "podman"


class VirtTypeOpt(StrEnum):
    kvm = "kvm"
    qemu = "qemu"


class OutputOpt(StrEnum):
    table = "table"
    json = "json"


def wants_json(fmt: OutputOpt, as_json: bool) -> bool:
    """Whether JSON was asked for: --format json, or the deprecated --json."""
    return fmt == OutputOpt.json or as_json


class GpusOpt(StrEnum):
    one = "one"
    node = "node"
    per_gpu = "per-gpu"


class MathOpt(StrEnum):
    float32 = "float32"
    tf32 = "tf32"
    mixed_bfloat16 = "mixed_bfloat16"
    mixed_float16 = "mixed_float16"
    mixed = "mixed"


# No word longer than a narrow help column (rich cuts one with "…"): the folder, not the whole path.
RESULTS_HELP = "Results store: $DLTESTBED_RESULTS, else results.sqlite in ~/.local/share/dltestbed/."
RESULTS_SHORT = "Results store ($DLTESTBED_RESULTS)."
INFLUX = "InfluxDB stream"
OUTPUT_HELP = "table (default), or json (every field, full ids)."


def influx_url_opt() -> str | None:
    return typer.Option(
        None,
        "--influx-url",
        help="Stream every step to InfluxDB v2 here ($INFLUXDB_V2_URL).",
        rich_help_panel=INFLUX,
    )


def influx_org_opt() -> str | None:
    return typer.Option(None, "--influx-org", help="Organization ($INFLUXDB_V2_ORG).", rich_help_panel=INFLUX)


def influx_bucket_opt() -> str | None:
    return typer.Option(None, "--influx-bucket", help="Bucket ($INFLUXDB_V2_BUCKET).", rich_help_panel=INFLUX)


def influx_token_opt() -> Path | None:
    return typer.Option(
        None,
        "--influx-token-file",
        help="Token file ($INFLUXDB_V2_TOKEN[_FILE]).",
        rich_help_panel=INFLUX,
    )


GROUP_HELP = "e.g. bare_metal=gpu_nodes; repeatable."  # ROLE=GROUP in full: docs/reference.md, "Inventories"


def group_opt(panel: str | None = None, short: bool = False) -> list[str] | None:
    text = "e.g. bare_metal=gpu_nodes." if short else GROUP_HELP
    return typer.Option(None, "--group", metavar="ROLE=GROUP", help=text, rich_help_panel=panel)
