"""Microbenchmarks, run on the target by the workload with a spec whose model is "micro": each probe is a list of
cases, each case a callable timed `warmup` + `steps` times and turned into a rate (FLOP/s, B/s).

A case's call does its work `reps` times and blocks until the result is on the host; `reps` is
calibrated once so one call lasts at least CALL_SECONDS (so an emulated VM and a GPU are both timed
over a span the clock resolves). Probes that cannot run here raise Skip with the reason."""

from __future__ import annotations

from collections.abc import Callable

from dltestbed.workload.probes.base import (
    BLOCK,
    RANDOM_READS,
    SCRATCH_BYTES,
    Case,
    Skip,
    Where,
    alone,
    calibrate,
    cpu_flops_per_cycle,
    near_node,
    nvml_index,
    parse_cpuinfo,
    pcie_rate,
    timed,
)
from dltestbed.workload.probes.compute import conv_shapes
from dltestbed.workload.probes.disk import disk, mount_of
from dltestbed.workload.probes.memory import copy_cases, d2d, d2h, h2d, launch, membw

# The probes that need the run's framework: it says which GPUs a target's workload sees, the copies and launches
# included.
NEED_FRAMEWORK = {"gemm", "conv", "h2d", "d2h", "d2d", "launch", "net", "allreduce"}

Probe = Callable[[Where], list[Case | Skip]]

# The probes that need no framework's code; gemm, conv, net and allreduce are each framework's own
# (frameworks.base.ProbeFramework.probes: config.FRAMEWORK_PROBES).
PROBES: dict[str, Probe] = {
    "membw": membw,
    "h2d": h2d,
    "d2h": d2h,
    "d2d": d2d,
    "launch": launch,
    "disk": disk,
}

__all__ = [
    "BLOCK",
    "NEED_FRAMEWORK",
    "PROBES",
    "RANDOM_READS",
    "SCRATCH_BYTES",
    "Case",
    "Probe",
    "Skip",
    "Where",
    "alone",
    "calibrate",
    "conv_shapes",
    "copy_cases",
    "cpu_flops_per_cycle",
    "d2d",
    "d2h",
    "disk",
    "h2d",
    "launch",
    "membw",
    "mount_of",
    "near_node",
    "nvml_index",
    "parse_cpuinfo",
    "pcie_rate",
    "timed",
]
