"""What a GPU is judged on and what is said of it, typed: the measures acceptance judges a GPU by, the evidence
it saw of one GPU, one check's reason, a GPU's verdict, and the verdict of a set of reasons (their worst).
report/gpu_verdicts.py judges with them. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dltestbed.report.verdicts import FAIL, PASS, UNDECIDED, WARN

ORDER = (FAIL, UNDECIDED, WARN, PASS)  # a GPU's verdict: its worst reason's
# What each measure is, and how it is compared with its board's expected value (the name in dltestbed/boards/).
MEASURES = {
    "gemm_float32": "float32 GEMM",
    "gemm_tf32": "TF32 GEMM",
    "gemm_bfloat16": "bfloat16 GEMM",
    "gemm_float16": "float16 GEMM",
    "h2d_pinned": "host-to-device copy (pinned)",
    "d2h_pinned": "device-to-host copy (pinned)",
    "memory_copy": "device-to-device copy",
    "resnet50_gpu_preset_ips": "ResNet-50 (gpu preset)",
    "kernel_launches_per_s": "kernel launch rate",
}


@dataclass(frozen=True)
class GpuEvidence:
    """What acceptance saw of one GPU. facts: pcie_gen, pcie_width (under load), power_limit_w (enforced),
    power_default_w, memory_total_bytes, ecc_uncorrected (count since the driver loaded); measures: MEASURES'
    names, in FLOP/s, B/s or img/s; measured_by: each measure's framework and the revision of the probe or model
    that measured it (left out: not judged by a board's measured value, which needs both); health_read: whether
    its health counters (and the XIDs) were read after its runs. A fact or measure left out was not read."""

    node: str
    index: int
    name: str  # NVML's
    facts: Mapping[str, float] = field(default_factory=dict)
    xids: tuple[int, ...] = ()
    measures: Mapping[str, float] = field(default_factory=dict)
    measured_by: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    health_read: bool = False
    conditions: Mapping[str, str] = field(default_factory=dict)  # the GPU while a measure ran: clock, power, cap

    @property
    def gpu(self) -> str:
        """e.g. `gpu-a1:3`."""
        return f"{self.node}:{self.index}"


@dataclass(frozen=True)
class Reason:
    """One check of a GPU: its verdict, why in words, what to do, and the evidence."""

    check: str
    verdict: str
    why: str
    action: str = ""
    evidence: str = ""


@dataclass(frozen=True)
class GpuVerdict:
    """A GPU's verdict (its worst reason's) and every reason."""

    gpu: str
    name: str
    board: str  # its board file's name, or "" (judged against its peers alone)
    verdict: str
    reasons: tuple[Reason, ...]


def worst(reasons: Sequence[Reason]) -> str:
    """The verdict of a set of reasons: the worst of theirs in ORDER (none: pass)."""
    return next(v for v in ORDER if v == PASS or any(r.verdict == v for r in reasons))
