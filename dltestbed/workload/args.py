"""The workload's command lines: a model's run and `micro`'s, parsed into validated specs (the controller
builds them with WorkloadSpec.to_argv and ProbeSpec.to_argv)."""

from __future__ import annotations

import argparse
from typing import NoReturn

from dltestbed.catalog import model_names
from dltestbed.choices import or_list
from dltestbed.config import (
    DEFAULT_FRAMEWORK,
    PAIR_PROBES,
    PER_GPU,
    PROBES,
    STEADY,
    ProbeSpec,
    WorkloadSpec,
    parse_warmup,
    probe_spec,
    workload_spec,
)
from dltestbed.errors import ConfigError
from dltestbed.workload.frameworks import REGISTRY

USAGE = """run one benchmark and print JSON-line events on stdout (`micro --probes gemm,membw,...`: the
microbenchmarks instead). stdout carries events and nothing else; logs go to stderr. Exit codes: 0 done, 1 the
run failed, 2 bad arguments or data, 130 interrupted (SIGINT or SIGTERM)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


def parser() -> argparse.ArgumentParser:
    """The workload's arguments (the controller builds them with WorkloadSpec.to_argv)."""
    p = _Parser(prog="python -m dltestbed.workload", description=USAGE)
    p.add_argument("--model", required=True, help=f"one of: {', '.join(model_names())}")
    p.add_argument("--framework", default=DEFAULT_FRAMEWORK, help=f"what the run computes with: {or_list(REGISTRY)}")
    p.add_argument("--data", default="synthetic", help="synthetic (in memory) or real (--data-dir)")
    p.add_argument("--data-dir", help="ImageNet-style folder: DIR/<class>/*.jpg")
    p.add_argument("--data-digest", help="the dataset's content digest: recorded once its files and bytes match")
    p.add_argument("--data-files", type=int, help="with --data-digest: the files the dataset has")
    p.add_argument("--data-bytes", type=int, help="with --data-digest: the bytes its files hold")
    p.add_argument("--mode", default="train", help="train or infer")
    p.add_argument("--device", default="auto", help="auto, cpu (hides GPUs) or gpu (requires one)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--image-size", type=int, help="default: the model's native size")
    p.add_argument(
        "--warmup",
        type=_warmup,
        default=None,
        help=f"untimed steps first: a count, or {STEADY} (default): until the step time is steady",
    )
    p.add_argument("--steps", type=int, default=100, help="timed steps (default 100)")
    p.add_argument("--classes", type=int, default=1000, help="with real data: the folder's classes")
    p.add_argument("--sample-interval", type=float, default=1.0, help="seconds between resource samples")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--distributed",
        action="store_true",
        help="one worker of a MultiWorkerMirroredStrategy job; the cluster and this worker's "
        "index come from TF_CONFIG; --batch-size is per worker",
    )
    p.add_argument("--cpus", help="run only on these CPUs, e.g. 0-3,8 (before TensorFlow starts its threads)")
    p.add_argument("--gpu", help="see and sample only this GPU, by UUID (GPU-… or MIG-…; one of --gpus per-gpu)")
    p.add_argument(
        "--math",
        help="float32 (TF32 off), tf32, mixed_bfloat16, mixed_float16 (loss-scaled) or mixed "
        "(bfloat16 where the device has it, else float16); default float32",
    )
    p.add_argument("--xla", action="store_true", help="compile the step with XLA")
    p.add_argument(
        "--accuracy",
        action="store_true",
        help="with --data real: train on 4/5 of the images, then report top-1 accuracy on the other fifth",
    )
    p.add_argument(
        "--deterministic",
        action="store_true",
        help="TensorFlow's op determinism: the same stack computes the same loss at every step, bit for bit",
    )
    p.add_argument(
        "--gpus",
        help="one (default: the first GPU TensorFlow sees, or --gpu's) or node (every GPU of the machine in one "
        "data-parallel job, a replica each, NCCL between them)",
    )
    p.add_argument(
        "--cpu-devices",
        type=int,
        help="with --gpus node where there is no GPU: split the CPU into this many logical devices, a replica each",
    )
    p.add_argument("--gpu-memory-mib", type=int, help="a fixed GPU memory limit per GPU (default: grow as needed)")
    p.add_argument(
        "--watch-stdin",
        action="store_true",
        help="stop (as if interrupted) when stdin closes: for runs over SSH, so a lost "
        "controller never leaves a workload behind",
    )
    return p


def _warmup(text: str) -> int | None:
    """--warmup (config.parse_warmup), or argparse's error line."""
    try:
        return parse_warmup(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def micro_parser() -> argparse.ArgumentParser:
    """The arguments of `micro` (the controller builds them with ProbeSpec.to_argv)."""
    p = _Parser(prog="python -m dltestbed.workload micro", description="microbenchmarks: " + ", ".join(PROBES))
    p.add_argument(
        "--probes",
        help="comma-separated, of: " + ", ".join(PROBES) + " (default: all that run on one "
        "target, or with --distributed all that run between workers)",
    )
    p.add_argument("--scale", default="small", help="small (seconds per probe) or full (the models' shapes)")
    for name in ("--framework", "--data", "--data-dir", "--data-digest", "--device", "--cpus", "--gpu"):
        p.add_argument(name)
    for name in ("--data-files", "--data-bytes", "--warmup", "--steps", "--seed", "--gpu-memory-mib"):
        p.add_argument(name, type=int)
    p.add_argument("--gpus", help="node: allreduce between every GPU of this machine, in this one process")
    p.add_argument("--cpu-devices", type=int, help="with --gpus node and no GPU: the CPU split into this many replicas")
    p.add_argument("--sample-interval", type=float)
    p.add_argument(
        "--screen-seconds",
        type=float,
        help="check (not time) gemm and conv for this long per GPU, fresh inputs each round (--suite screen)",
    )
    p.add_argument("--distributed", action="store_true", help="one worker of a job: net and allreduce (TF_CONFIG)")
    p.add_argument("--watch-stdin", action="store_true")
    return p


def parse(argv: list[str]) -> tuple[WorkloadSpec, argparse.Namespace]:
    """The validated spec of a command line, and the options that are not part of it."""
    ns = parser().parse_args(argv)
    values = {k: v for k, v in vars(ns).items() if v is not None and v is not False and k != "watch_stdin"}
    spec = workload_spec(**values)
    if spec.gpus == PER_GPU:  # the controller's: it starts one process per GPU, each with its --gpu
        raise ConfigError("--gpus per-gpu is the controller's (a process per GPU); a workload takes --gpu UUID")
    return spec, ns


def parse_micro(argv: list[str]) -> tuple[ProbeSpec, argparse.Namespace]:
    """The validated probe spec of a `micro` command line (after the word micro)."""
    ns = micro_parser().parse_args(argv)
    values = {k: v for k, v in vars(ns).items() if v is not None and v is not False and k != "watch_stdin"}
    if "probes" in values:
        values["probes"] = tuple(p.strip() for p in values["probes"].split(",") if p.strip())
    elif ns.distributed:
        values["probes"] = PAIR_PROBES
    spec = probe_spec(**values)
    if spec.gpus == PER_GPU:  # the controller's: it starts one process per GPU, each with its --gpu
        raise ConfigError("--gpus per-gpu is the controller's (a process per GPU); a workload takes --gpu UUID")
    return spec, ns
