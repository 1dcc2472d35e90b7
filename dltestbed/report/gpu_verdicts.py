"""A verdict for each GPU of an acceptance: pass, warn, fail or cannot judge, each with its reasons in words, the
action they call for and the evidence. What a GPU is judged on: its XIDs (report/xids.py), its uncorrectable ECC
errors, its PCIe link under load, its power limit and memory against its board's expected values
(dltestbed/expected.py), what it measured against the fraction of the datasheet a healthy board reaches, and
against its peers (the other GPUs of the same name: leave-one-out median and MAD). A check whose evidence is
missing cannot judge, never passes. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from dltestbed.expected import Board, for_gpu, unknown_board
from dltestbed.report import FLEET_MIN_SLOWDOWN, ROBUST_Z
from dltestbed.report import xids as xid_table
from dltestbed.report.inference import slow_outliers
from dltestbed.report.verdicts import FAIL, PASS, UNDECIDED, WARN
from dltestbed.workload.peaks import gpu_peak
from dltestbed.workload.probes import pcie_rate

MARGIN = 0.25  # a measure fails below (1 − MARGIN) × what a healthy board reaches (DCGM's thresholds: 0.75 × measured)
POWER_SHORT = 0.05  # an enforced power limit this far below the expected one fails
MEMORY_SHORT = 0.02  # memory this far below the board's (in GiB: what an "80GB" board shows less the driver's)
PEERS_MIN = 3  # GPUs of one name needed to judge one against the others
ORDER = (FAIL, UNDECIDED, WARN, PASS)  # a GPU's verdict: its worst reason's
EXIT = {PASS: 0, WARN: 0, FAIL: 1, UNDECIDED: 3}  # 0 all pass, 1 any fail, 3 any cannot judge (and none fails)
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
    names, in FLOP/s, B/s or img/s. A fact or measure left out was not read."""

    node: str
    index: int
    name: str  # NVML's
    facts: Mapping[str, float] = field(default_factory=dict)
    xids: tuple[int, ...] = ()
    measures: Mapping[str, float] = field(default_factory=dict)

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


def _expected_measure(name: str, ev: GpuEvidence, board: Board) -> tuple[float, str] | None:
    """What a healthy GPU of this board measures for `name`, in the measure's unit, and whence; None: no value."""
    if name.startswith("gemm_"):
        fraction, (peak, _) = board.get(name), gpu_peak(ev.name, name.removeprefix("gemm_"))
        if fraction is None or peak is None:
            return None
        return fraction.value * peak, f"{fraction.value:.3f} of the datasheet's {peak / 1e12:g} TFLOP/s"
    if name in ("h2d_pinned", "d2h_pinned"):
        fraction, gen, width = board.get(f"{name}_fraction"), board.get("pcie_gen"), board.get("pcie_width")
        if fraction is None or gen is None or width is None:
            return None
        link, _ = pcie_rate(int(gen.value), int(width.value))
        if link is None:
            return None
        return (
            fraction.value * link,
            f"{fraction.value:.3f} of Gen{gen.value:g} x{width.value:g}'s {link / 1e9:.1f} GB/s",
        )
    if name == "memory_copy":
        fraction, bandwidth = board.get("memory_copy_fraction"), board.get("memory_bandwidth_tbs")
        if fraction is None or bandwidth is None:
            return None
        return fraction.value * bandwidth.value * 1e12, f"{fraction.value:.3f} of {bandwidth.value:g} TB/s"
    value = board.get(name)
    return (value.value, "its board's file") if value is not None else None


def _facts(ev: GpuEvidence, board: Board | None) -> list[Reason]:
    out = []
    for x in ev.xids:
        call = xid_table.call(x)
        out.append(Reason("xid", call.verdict, call.reason, call.action, f"XID {x} while the acceptance ran"))
    ecc = ev.facts.get("ecc_uncorrected")
    if ecc is None:
        out.append(Reason("ecc", UNDECIDED, "its uncorrectable ECC errors were not read"))
    elif ecc > 0:
        out.append(
            Reason(
                "ecc",
                FAIL,
                f"{ecc:g} uncorrectable ECC error(s)",
                "drain the node and reset the GPU (the rows are remapped on reset); return the board if they recur",
                f"ecc_uncorrected {ecc:g}",
            )
        )
    gen, width = ev.facts.get("pcie_gen"), ev.facts.get("pcie_width")
    want_gen = board.get("pcie_gen") if board else None
    want_width = board.get("pcie_width") if board else None
    if gen is None or width is None:
        out.append(Reason("pcie", UNDECIDED, "its PCIe link under load was not read"))
    elif want_gen is None or want_width is None:
        out.append(Reason("pcie", UNDECIDED, f"PCIe Gen{gen:g} x{width:g}: no expected link for this board"))
    elif gen < want_gen.value or width < want_width.value:
        out.append(
            Reason(
                "pcie",
                FAIL,
                f"PCIe link at Gen{gen:g} x{width:g} under load; the board's is "
                f"Gen{want_gen.value:g} x{want_width.value:g}",
                "drain the node and reseat or service the link (slot, riser, retimer, cable), then accept it again",
                want_gen.source,
            )
        )
    limit = ev.facts.get("power_limit_w")
    board_power = board.get("power_limit_w") if board else None
    want = ev.facts.get("power_default_w") or (board_power.value if board_power else None)
    if limit is None or want is None:
        out.append(Reason("power", UNDECIDED, "its power limit or the expected one was not read"))
    elif limit < want * (1 - POWER_SHORT):
        out.append(
            Reason(
                "power",
                FAIL,
                f"power limit {limit:g} W, {(1 - limit / want) * 100:.0f} % below the expected {want:g} W",
                f"restore the limit (nvidia-smi -pl {want:g}), or give the site's cap in its expected values",
                f"power_limit_w {limit:g}",
            )
        )
    total, gb = ev.facts.get("memory_total_bytes"), board.get("memory_gb") if board else None
    if total is not None and gb is not None and total < gb.value * 1024**3 * (1 - MEMORY_SHORT):
        out.append(
            Reason(
                "memory",
                FAIL,
                f"{total / 1024**3:.1f} GiB of memory; the board has {gb.value:g} GB",
                "drain the node and return the board (or turn MIG off if it is on)",
                gb.source,
            )
        )
    return out


def _measured(
    ev: GpuEvidence, board: Board | None, peers: Mapping[tuple[str, str], Mapping[str, Peers]]
) -> list[Reason]:
    """Each measure against its board's expected value and against its peers (`peers`: see `_peers`)."""
    out = []
    for name, label in MEASURES.items():
        value = ev.measures.get(name)
        if value is None:
            continue
        expected = _expected_measure(name, ev, board) if board is not None else None
        if expected is not None and value < expected[0] * (1 - MARGIN):
            out.append(
                Reason(
                    name,
                    FAIL,
                    f"{label} at {value / expected[0]:.2f} of what a healthy {board.board if board else ''} "
                    f"reaches ({expected[1]}); it fails below {1 - MARGIN:.2f}",
                    "drain the node, reset the GPU and look at its clocks and throttle reasons; return the board if it "
                    "stays slow",
                    f"{name} {value:.4g}",
                )
            )
        compared = peers.get((name, ev.name))
        flagged = compared.get(ev.gpu) if compared is not None else None
        if flagged is not None:
            out.append(
                Reason(
                    name,
                    FAIL,
                    f"{label} {(1 - value / flagged.median) * 100:.0f} % below its {flagged.count} peers' "
                    f"median (modified z {flagged.z:.1f})",
                    "rerun it in the second pass; if it stays slow, drain the node, reset the GPU and look at its "
                    "clocks, power and cooling",
                    f"{name} {value:.4g}, peers' median {flagged.median:.4g}",
                )
            )
        if expected is None and compared is None:
            out.append(
                Reason(
                    name,
                    UNDECIDED,
                    f"{label}: no expected value for its board and fewer than "
                    f"{PEERS_MIN} GPUs of its name to compare it with",
                )
            )
    return out


@dataclass(frozen=True)
class Peers:
    """A GPU found slow against its peers: their median, how many they are, its leave-one-out modified z."""

    median: float
    count: int
    z: float


def _peers(gpus: Sequence[GpuEvidence]) -> dict[tuple[str, str], dict[str, Peers]]:
    """For each measure and GPU name with PEERS_MIN or more GPUs measured: the GPUs slower than their peers
    (leave-one-out modified z below −ROBUST_Z and at least FLEET_MIN_SLOWDOWN % below the peers' median)."""
    out = {}
    for name in MEASURES:
        for gpu_name in sorted({g.name for g in gpus}):
            values = {g.gpu: g.measures[name] for g in gpus if g.name == gpu_name and name in g.measures}
            if len(values) >= PEERS_MIN:
                slow = slow_outliers(values, ROBUST_Z, FLEET_MIN_SLOWDOWN)
                out[name, gpu_name] = {k: Peers(sc.median, len(values) - 1, sc.z) for k, sc in slow.items()}
    return out


def judge(gpus: Sequence[GpuEvidence], boards: Sequence[Board]) -> list[GpuVerdict]:
    """Every GPU's verdict: against its board's expected values (when its board has a file) and its peers (the
    other GPUs of the same NVML name)."""
    peers = _peers(gpus)
    out = []
    for ev in gpus:
        board = for_gpu(ev.name, boards)
        reasons = _facts(ev, board) + _measured(ev, board, peers)
        if board is None:
            reasons.append(Reason("board", PASS, unknown_board(ev.name)))
        out.append(GpuVerdict(ev.gpu, ev.name, board.key if board else "", worst(reasons), tuple(reasons)))
    return out


def worst(reasons: Sequence[Reason]) -> str:
    """The verdict of a set of reasons: the worst of theirs in ORDER (none: pass)."""
    return next(v for v in ORDER if v == PASS or any(r.verdict == v for r in reasons))


class Judged(Protocol):
    """Anything with a verdict: a GPU's, a node's (accept/judge.py)."""

    @property
    def verdict(self) -> str: ...


def exit_code(judged: Sequence[Judged]) -> int:
    """1 when any fails, else 3 when any cannot be judged, else 0 (a warning alone passes)."""
    seen = {v.verdict for v in judged}
    return EXIT[FAIL] if FAIL in seen else EXIT[UNDECIDED] if UNDECIDED in seen else EXIT[PASS]
