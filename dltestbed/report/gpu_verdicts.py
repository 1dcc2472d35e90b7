"""A verdict for each GPU of an acceptance: pass, warn, fail or cannot judge, each with its reasons in words, the
action they call for and the evidence. What a GPU is judged on: its XIDs (report/xids.py), its uncorrectable ECC
errors, its PCIe link under load, its power limit and memory against its board's expected values
(dltestbed/expected.py), what it measured against the fraction of the datasheet a healthy board reaches, and
against its peers (the other GPUs of the same name: leave-one-out median and MAD). A check whose evidence is
missing cannot judge, never passes. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from dltestbed.expected import Board, Value, for_gpu, unknown_board
from dltestbed.report import FLEET_MIN_SLOWDOWN, ROBUST_Z
from dltestbed.report import xids as xid_table
from dltestbed.report.gpu_evidence import MEASURES, GpuEvidence, GpuVerdict, Reason, worst
from dltestbed.report.inference import slow_outliers
from dltestbed.report.verdicts import FAIL, PASS, UNDECIDED, WARN
from dltestbed.workload.peaks import gpu_peak
from dltestbed.workload.probes import pcie_rate

MARGIN = 0.25  # a measure fails below (1 − MARGIN) × what a healthy board reaches (DCGM's thresholds: 0.75 × measured)
POWER_SHORT = 0.05  # an enforced power limit this far below the expected one fails
MEMORY_SHORT = 0.02  # memory this far below the board's (in GiB: what an "80GB" board shows less the driver's)
PEERS_MIN = 3  # GPUs of one name needed to judge one against the others
EXIT = {PASS: 0, WARN: 0, FAIL: 1, UNDECIDED: 3}  # 0 all pass, 1 any fail, 3 any cannot judge (and none fails)


def _board_value(name: str, board: Board) -> Value | None:
    """The board's value a measure is judged by (a GEMM's fraction, a copy's fraction, the figure itself)."""
    if name in ("h2d_pinned", "d2h_pinned", "memory_copy"):
        return board.get(f"{name}_fraction")
    return board.get(name)


def _expected_measure(name: str, ev: GpuEvidence, board: Board) -> tuple[float, str] | None:
    """What a healthy GPU of this board measures for `name`, in the measure's unit, and whence; None: no value."""
    value = _board_value(name, board)
    if value is None:
        return None
    if name.startswith("gemm_"):
        peak, _ = gpu_peak(ev.name, name.removeprefix("gemm_"))
        if peak is None:
            return None
        return value.value * peak, f"{value.value:.3f} of the datasheet's {peak / 1e12:g} TFLOP/s"
    if name in ("h2d_pinned", "d2h_pinned"):
        gen, width = board.get("pcie_gen"), board.get("pcie_width")
        if gen is None or width is None:
            return None
        link, _ = pcie_rate(int(gen.value), int(width.value))
        if link is None:
            return None
        return value.value * link, f"{value.value:.3f} of Gen{gen.value:g} x{width.value:g}'s {link / 1e9:.1f} GB/s"
    if name == "memory_copy":
        bandwidth = board.get("memory_bandwidth_tbs")
        if bandwidth is None:
            return None
        return value.value * bandwidth.value * 1e12, f"{value.value:.3f} of {bandwidth.value:g} TB/s"
    return value.value, "its board's file"


def _unlike(name: str, ev: GpuEvidence, board: Board | None) -> str | None:
    """Why a measure cannot be judged by its board's value: measured by another framework or another revision of
    the probe or model than the value was, or by one not recorded (None: like for like, or no value)."""
    value = _board_value(name, board) if board is not None else None
    if value is None or value.measured is None:
        return None
    by = ev.measured_by.get(name)
    if by is None:
        return "which framework and revision measured it is not recorded: measure it again with this dltestbed"
    return value.measured.differs(*by)


def _facts(ev: GpuEvidence, board: Board | None) -> list[Reason]:
    """Its XIDs, ECC, PCIe link, power limit and memory: a reason for each check made, passed or not."""
    return [*_xids(ev), _ecc(ev), _pcie(ev, board), _power(ev, board), *_memory(ev, board)]


def _xids(ev: GpuEvidence) -> list[Reason]:
    """Each XID while the acceptance ran, or none seen (or not read)."""
    out = []
    for x in ev.xids:
        call = xid_table.call(x)
        out.append(Reason("xid", call.verdict, call.reason, call.action, f"XID {x} while the acceptance ran"))
    if not ev.xids:
        if ev.health_read:
            out.append(Reason("xid", PASS, "no XID while the acceptance ran", "", "NVML's XID events, watched"))
        else:
            out.append(Reason("xid", UNDECIDED, "its XIDs were not read (no health check after its runs)"))
    return out


def _ecc(ev: GpuEvidence) -> Reason:
    """Its uncorrectable ECC errors."""
    ecc = ev.facts.get("ecc_uncorrected")
    if ecc is None:
        return Reason("ecc", UNDECIDED, "its uncorrectable ECC errors were not read")
    if ecc > 0:
        return Reason(
            "ecc",
            FAIL,
            f"{ecc:g} uncorrectable ECC error(s)",
            "drain the node and reset the GPU (the rows are remapped on reset); return the board if they recur",
            f"ecc_uncorrected {ecc:g}",
        )
    return Reason("ecc", PASS, "no uncorrectable ECC error", "", "ecc_uncorrected 0")


def _pcie(ev: GpuEvidence, board: Board | None) -> Reason:
    """Its PCIe link under load against its board's."""
    gen, width = ev.facts.get("pcie_gen"), ev.facts.get("pcie_width")
    want_gen = board.get("pcie_gen") if board else None
    want_width = board.get("pcie_width") if board else None
    if gen is None or width is None:
        return Reason("pcie", UNDECIDED, "its PCIe link under load was not read")
    if want_gen is None or want_width is None:
        return Reason("pcie", UNDECIDED, f"PCIe Gen{gen:g} x{width:g}: no expected link for this board")
    if gen < want_gen.value or width < want_width.value:
        return Reason(
            "pcie",
            FAIL,
            f"PCIe link at Gen{gen:g} x{width:g} under load; the board's is "
            f"Gen{want_gen.value:g} x{want_width.value:g}",
            "drain the node and reseat or service the link (slot, riser, retimer, cable), then accept it again",
            want_gen.source,
        )
    said = f"PCIe Gen{gen:g} x{width:g} under load, as its board's"
    return Reason("pcie", PASS, said, "", f"pcie_gen {gen:g}, pcie_width {width:g} (under load)")


def _power(ev: GpuEvidence, board: Board | None) -> Reason:
    """Its power limit against its default (or its board's)."""
    limit = ev.facts.get("power_limit_w")
    board_power = board.get("power_limit_w") if board else None
    want = ev.facts.get("power_default_w") or (board_power.value if board_power else None)
    if limit is None or want is None:
        return Reason("power", UNDECIDED, "its power limit or the expected one was not read")
    if limit < want * (1 - POWER_SHORT):
        return Reason(
            "power",
            FAIL,
            f"power limit {limit:g} W, {(1 - limit / want) * 100:.0f} % below the expected {want:g} W",
            f"restore the limit (nvidia-smi -pl {want:g}), or give the site's cap in its expected values",
            f"power_limit_w {limit:g}",
        )
    said = f"power limit {limit:g} W, the expected {want:g} W"
    return Reason("power", PASS, said, "", f"power_limit_w {limit:g}")


def _memory(ev: GpuEvidence, board: Board | None) -> list[Reason]:
    """Its memory against its board's (no reason where the board's is not known)."""
    total, gb = ev.facts.get("memory_total_bytes"), board.get("memory_gb") if board else None
    if gb is None:
        return []
    if total is None:
        return [Reason("memory", UNDECIDED, "its memory was not read")]
    short = total < gb.value * 1024**3 * (1 - MEMORY_SHORT)
    return [
        Reason(
            "memory",
            FAIL if short else PASS,
            f"{total / 1024**3:.1f} GiB of memory; the board has {gb.value:g} GB",
            "drain the node and return the board (or turn MIG off if it is on)" if short else "",
            gb.source,
        )
    ]


def _against_board(name: str, value: float, ev: GpuEvidence, board: Board | None) -> Reason | None:
    """One measure against its board's value: pass, fail, or cannot judge where measured unlike the value (another
    framework or revision); None where the board has no value for it."""
    if board is None:
        return None
    label = MEASURES[name]
    seen = f"{name} {value:.4g}" + (f" ({ev.conditions[name]})" if name in ev.conditions else "")
    differs = _unlike(name, ev, board)
    if differs is not None:
        return Reason(name, UNDECIDED, f"{label}: {differs}", "", seen)
    expected = _expected_measure(name, ev, board)
    if expected is None:
        return None
    ratio = value / expected[0]
    said = f"{label} at {ratio:.2f} of what a healthy {board.board} reaches ({expected[1]})"
    if ratio < 1 - MARGIN:
        return Reason(
            name,
            FAIL,
            f"{said}; it fails below {1 - MARGIN:.2f}",
            "drain the node, reset the GPU and look at its clocks and throttle reasons; return the board if it "
            "stays slow",
            seen,
        )
    return Reason(name, PASS, f"{said}; it passes from {1 - MARGIN:.2f}", "", seen)


def _measured(ev: GpuEvidence, board: Board | None, peers: Mapping[tuple[str, str], Compared]) -> list[Reason]:
    """Each measure against its board's expected value and against its peers (`peers`: see `_peers`)."""
    out = []
    for name, label in MEASURES.items():
        value = ev.measures.get(name)
        if value is None:
            continue
        judged = _against_board(name, value, ev, board)
        if judged is not None:
            out.append(judged)
        compared = peers.get((name, ev.name))
        if compared is not None:
            flagged = compared.slow.get(ev.gpu)
            if flagged is not None:
                out.append(
                    Reason(
                        f"{name} peers",
                        FAIL,
                        f"{label} {(1 - value / flagged.median) * 100:.0f} % below its {flagged.count} peers' "
                        f"median (modified z {flagged.z:.1f})",
                        "rerun it in the second pass; if it stays slow, drain the node, reset the GPU and look at "
                        "its clocks, power and cooling",
                        f"{name} {value:.4g}, peers' median {flagged.median:.4g}",
                    )
                )
            else:
                why = (
                    f"{label} not slower than its {compared.count - 1} peers' median (a GPU fails at "
                    f"{FLEET_MIN_SLOWDOWN:g} % below it with a modified z below −{ROBUST_Z:g})"
                )
                out.append(Reason(f"{name} peers", PASS, why, "", f"{name} {value:.4g}"))
        if judged is None and compared is None:
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


@dataclass(frozen=True)
class Compared:
    """One measure of one GPU name compared across its GPUs: how many were measured, and the slow ones."""

    count: int
    slow: Mapping[str, Peers]


def _peers(gpus: Sequence[GpuEvidence]) -> dict[tuple[str, str], Compared]:
    """For each measure and GPU name with PEERS_MIN or more GPUs measured: the GPUs slower than their peers
    (leave-one-out modified z below −ROBUST_Z and at least FLEET_MIN_SLOWDOWN % below the peers' median)."""
    out = {}
    for name in MEASURES:
        for gpu_name in sorted({g.name for g in gpus}):
            values = {g.gpu: g.measures[name] for g in gpus if g.name == gpu_name and name in g.measures}
            if len(values) >= PEERS_MIN:
                slow = slow_outliers(values, ROBUST_Z, FLEET_MIN_SLOWDOWN)
                found = {k: Peers(sc.median, len(values) - 1, sc.z) for k, sc in slow.items()}
                out[name, gpu_name] = Compared(len(values), found)
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


class Judged(Protocol):
    """Anything with a verdict: a GPU's, a node's (accept/judge.py)."""

    @property
    def verdict(self) -> str: ...


def exit_code(judged: Sequence[Judged]) -> int:
    """1 when any fails, else 3 when any cannot be judged, else 0 (a warning alone passes)."""
    seen = {v.verdict for v in judged}
    return EXIT[FAIL] if FAIL in seen else EXIT[UNDECIDED] if UNDECIDED in seen else EXIT[PASS]
