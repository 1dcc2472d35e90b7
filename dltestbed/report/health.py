"""A GPU's health, from what the workload sampled and checked through NVML: findings per run (an XID, new
ECC errors or remapped rows, a PCIe link trained below its max, PCIe replays, hardware slowdown), a row per
host and GPU, and the likely cause of a run that slowed down (report/fleet.py compares the GPUs' clocks
and power with their peers'). Pure: it reads stored samples and counters and changes no number.

What counts as busy, what a slowdown is and which reasons are a fault follow NVML's documentation of the
clock-event reasons (nvmlClocksEventReason*): a power cap under full load is the GPU doing its job; a
hardware slowdown (thermal, power brake) halves the clocks and is a fault of the GPU, its cooling or its
power supply.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from statistics import median
from typing import Any

from dltestbed.results.records import RunRecord
from dltestbed.workload.events import HealthEvent, MeasureEvent, ResourceEvent

# nvmlClocksEventReason* bits, in words
REASONS = {
    0x1: "idle",
    0x2: "applications clocks setting",
    0x4: "power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "thermal slowdown (software)",
    0x40: "thermal slowdown (hardware)",
    0x80: "power brake (hardware)",
    0x100: "display clock setting",
}
SLOWDOWN = 0x4 | 0x8 | 0x20 | 0x40 | 0x80  # the reasons that lower a busy GPU's clocks
HARDWARE = 0x8 | 0x40 | 0x80  # …and those that are a fault: clocks cut by half or more
BUSY_UTIL = 50.0  # % utilisation from which a sample is of the GPU at work (idle clocks and links mean nothing)
CAUSE_MIN_SHARE = 0.1  # a reason active in fewer busy samples than this does not explain a trend
CLOCK_MIN_DROP = 0.02  # an SM clock change smaller than this is not said

ERROR, WARNING = "error", "warning"
# The rules a finding belongs to; `validate`'s health rules name them.
XID, ECC_UNCORRECTED, ECC_CORRECTED = "xid", "ecc_uncorrected", "ecc_corrected"
ROWS, PAGES, PCIE_LINK, PCIE_REPLAYS = "remapped_rows", "retired_pages", "pcie_link", "pcie_replays"
HW_SLOWDOWN, THERMAL = "hardware_slowdown", "thermal_slowdown"


def reason_names(mask: int) -> list[str]:
    """The clock-event reasons of an NVML bit mask, in words."""
    return [name for bit, name in REASONS.items() if mask & bit]


@dataclass(frozen=True)
class Finding:
    """Something wrong with a GPU during one run: stored with the run, whose numbers are kept."""

    run_id: str
    host: str
    gpu: int
    rule: str
    severity: str  # error | warning
    what: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def slowdowns(worked: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Each slowdown reason active in any of a GPU's busy samples, with the share of them it was active in."""
    out = {}
    for bit, name in REASONS.items():
        hits = sum(1 for g in worked if int(g.get("clock_reasons", 0)) & bit) if bit & SLOWDOWN else 0
        if hits:
            out[name] = hits / len(worked)
    return out


def during(samples: Iterable[ResourceEvent], gpu: int, start: float, end: float) -> str:
    """One GPU's samples taken between `start` and `end` (a probe case's calls), in words: the mean SM clock and
    power, and the share of them at the power cap ("" where none was taken then)."""
    seen = [g for s in samples if start <= s.t <= end for g in s.gpus if g.get("index") == gpu]
    clocks = [g["sm_clock_mhz"] for g in seen if g.get("sm_clock_mhz") is not None]
    power = [g["power_watts"] for g in seen if g.get("power_watts") is not None]
    if not clocks and not power:
        return ""
    capped = sum(bool(int(g.get("clock_reasons", 0)) & 0x4) for g in seen) / len(seen)
    words = [f"SM {sum(clocks) / len(clocks):.0f} MHz"] if clocks else []
    words += [f"{sum(power) / len(power):.0f} W"] if power else []
    return ", ".join(words) + f", {REASONS[0x4]} in {capped:.0%} of {len(seen)} sample(s)"


def case_conditions(
    measures: Iterable[MeasureEvent], samples: Sequence[ResourceEvent], gpu: int
) -> dict[tuple[str, str], str]:
    """(probe, case) → one GPU while that probe case's calls ran (`during`, over the span of its measures), for the
    cases some sample was taken in."""
    spans: dict[tuple[str, str], tuple[float, float]] = {}
    for m in measures:
        start, end = spans.get((m.probe, m.case), (m.t - m.seconds, m.t))
        spans[m.probe, m.case] = (min(start, m.t - m.seconds), max(end, m.t))
    out = {k: during(samples, gpu, *span) for k, span in spans.items()}
    return {k: v for k, v in out.items() if v}


def busy(samples: Iterable[ResourceEvent], gpu: int) -> list[dict[str, Any]]:
    """One GPU's samples taken while it worked (utilisation ≥ BUSY_UTIL)."""
    return [g for s in samples for g in s.gpus if g.get("index") == gpu and g.get("util_percent", 0) >= BUSY_UTIL]


def _delta(before: Mapping[str, Any], after: Mapping[str, Any], name: str) -> int:
    a, b = after.get(name), before.get(name)
    return int(a) - int(b) if a is not None and b is not None else 0


def _counters(run: RunRecord, host: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Finding]:
    """Findings from the counters before and after a run of one GPU."""
    i = int(after.get("index", 0))
    out = []
    for rule, name, severity, words in (
        (ECC_UNCORRECTED, "ecc_uncorrected", ERROR, "uncorrectable ECC error(s)"),
        (ECC_CORRECTED, "ecc_corrected", WARNING, "corrected ECC error(s)"),
        (ROWS, "remapped_rows_uncorrectable", ERROR, "row(s) remapped for an uncorrectable error"),
        (ROWS, "remapped_rows_correctable", WARNING, "row(s) remapped for correctable errors"),
        (PAGES, "retired_pages_dbe", ERROR, "page(s) retired for a double-bit error"),
        (PAGES, "retired_pages_sbe", WARNING, "page(s) retired for single-bit errors"),
        (PCIE_REPLAYS, "pcie_replays", WARNING, "PCIe replay(s): the link retried packets"),
    ):
        if (d := _delta(before, after, name)) > 0:
            out.append(Finding(run.id, host, i, rule, severity, f"{d} new {words} during the run"))
    if after.get("remapped_rows_failed"):
        out.append(Finding(run.id, host, i, ROWS, ERROR, "row remapping failed: the GPU needs service"))
    if after.get("remapped_rows_pending") and not before.get("remapped_rows_pending"):
        out.append(Finding(run.id, host, i, ROWS, WARNING, "a row remapping is pending: it takes effect at reset"))
    if after.get("retired_pages_pending") and not before.get("retired_pages_pending"):
        out.append(Finding(run.id, host, i, PAGES, WARNING, "a page retirement is pending: it takes effect at reset"))
    return out


def link(samples: Sequence[Mapping[str, Any]], snapshot: Mapping[str, Any]) -> tuple[int, int] | None:
    """The PCIe link (generation, width) a GPU ran at: the widest seen while it was busy (an idle link trains
    down to save power, so an idle reading says nothing), else the snapshot's."""
    seen = [(int(g["pcie_gen"]), int(g["pcie_width"])) for g in samples if "pcie_gen" in g and "pcie_width" in g]
    if seen:
        return max(seen)
    gen, width = snapshot.get("pcie_gen"), snapshot.get("pcie_width")
    return (int(gen), int(width)) if gen is not None and width is not None else None


def _link(run: RunRecord, host: str, i: int, at: tuple[int, int] | None, snap: Mapping[str, Any]) -> list[Finding]:
    gen_max, width_max = snap.get("pcie_gen_max"), snap.get("pcie_width_max")
    if at is None or gen_max is None or width_max is None or (at[0] >= gen_max and at[1] >= width_max):
        return []
    what = f"PCIe link at Gen{at[0]} x{at[1]} under load, below its max Gen{gen_max} x{width_max}"
    return [Finding(run.id, host, i, PCIE_LINK, ERROR, what)]


def _slowdowns(run: RunRecord, host: str, i: int, samples: Sequence[Mapping[str, Any]]) -> list[Finding]:
    out = []
    for rule, mask, severity in ((HW_SLOWDOWN, HARDWARE, ERROR), (THERMAL, 0x20, WARNING)):
        hit = [g for g in samples if int(g.get("clock_reasons", 0)) & mask]
        if hit:
            names = sorted({n for g in hit for n in reason_names(int(g["clock_reasons"]) & mask)})
            share = len(hit) / len(samples) * 100
            what = f"{', '.join(names)} active in {share:.0f} % of busy samples ({len(hit)} of {len(samples)})"
            out.append(Finding(run.id, host, i, rule, severity, what))
    return out


def findings(run: RunRecord, samples: Sequence[ResourceEvent], checks: Sequence[HealthEvent]) -> list[Finding]:
    """What went wrong with each GPU during a run: XIDs; counters that moved between before and after;
    the PCIe link under load below its max; hardware or thermal slowdown in its busy samples."""
    host = run.machine or run.host
    before = {int(g.get("index", 0)): g for c in checks if c.phase == "before" for g in c.gpus}
    after = {int(g.get("index", 0)): g for c in checks if c.phase == "after" for g in c.gpus}
    out = [
        Finding(run.id, host, int(x.get("index") or 0), XID, ERROR, f"XID {x.get('xid')} while the run lasted")
        for c in checks
        for x in c.xids
    ]
    for i in sorted(set(before) | set(after)):
        snap = after.get(i) or before[i]
        worked = busy(samples, i)
        if i in before and i in after:
            out += _counters(run, host, before[i], after[i])
        out += _link(run, host, i, link(worked, snap), snap)
        out += _slowdowns(run, host, i, worked)
    return out


def cause(samples: Sequence[ResourceEvent], start: float | None = None, end: float | None = None) -> str | None:
    """What a run's GPU samples say of why it slowed down, in words, over [start, end] (its timed steps):
    the slowdown reasons active in at least CAUSE_MIN_SHARE of the busy samples, and the SM clock (and the
    temperature) from the first third of them to the last. None: no busy GPU sample to say anything."""
    window = [s for s in samples if (start is None or s.t >= start) and (end is None or s.t <= end)]
    indices = sorted({int(g.get("index", 0)) for s in window for g in s.gpus})
    worked = max((busy(window, i) for i in indices), key=len, default=[])
    if not worked:
        return None
    words = [
        f"{name} active in {share * 100:.0f} % of samples"
        for name, share in slowdowns(worked).items()
        if share >= CAUSE_MIN_SHARE
    ]
    third = max(1, len(worked) // 3)
    for key, unit, label in (("sm_clock_mhz", " MHz", "SM clock"), ("temperature_c", " °C", "temperature")):
        head = [g[key] for g in worked[:third] if key in g]
        tail = [g[key] for g in worked[-third:] if key in g]
        if head and tail and abs(median(tail) - median(head)) >= CLOCK_MIN_DROP * median(head):
            words.append(f"{label} {median(head):.0f} → {median(tail):.0f}{unit}")
    if not words:
        clocks = [g["sm_clock_mhz"] for g in worked if "sm_clock_mhz" in g]
        steady = f"; SM clock steady at {median(clocks):.0f} MHz" if clocks else ""
        return "no slowdown reason in the GPU's samples" + steady
    return "; ".join(words)


@dataclass
class GpuHealth:
    """One GPU of one host over the runs that used it: its findings first, then what it ran at."""

    host: str
    gpu: int
    model: str = "?"
    uuid: str | None = None
    runs: int = 0
    checked: int = 0  # runs that checked its counters before or after them
    findings: list[Finding] = field(default_factory=list)
    sm_clock_mhz: float | None = None  # median over busy samples
    sm_clock_max_mhz: int | None = None
    power_watts: float | None = None  # median over busy samples
    power_limit_watts: float | None = None
    temperature_max_c: float | None = None
    throttled: dict[str, float] = field(default_factory=dict)  # slowdown reason → share of busy samples, %
    link: tuple[int, int] | None = None
    link_max: tuple[int, int] | None = None
    busy_samples: int = 0
    reasons_read: int = 0  # busy samples that carried the clock-event reasons (a slowdown is judged on these)
    unseen: dict[str, list[str]] = field(default_factory=dict)  # what could not be read → from which kinds

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self) | {"findings": [f.to_dict() for f in self.findings]}


def gpus(
    runs: Sequence[RunRecord],
    samples: Mapping[str, Sequence[ResourceEvent]],
    checks: Mapping[str, Sequence[HealthEvent]],
    found: Sequence[Finding],
) -> list[GpuHealth]:
    """A row per host and GPU that a run sampled or checked: those with findings first (errors before
    warnings), then by host and index."""
    rows: dict[tuple[str, int], GpuHealth] = {}
    worked: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in runs:
        host = r.machine or r.host
        facts = {int(g.get("index", i)): g for i, g in enumerate(r.fingerprint.get("gpus") or [])}  # Nvml.devices
        seen = {int(g.get("index", 0)) for s in samples.get(r.id, ()) for g in s.gpus}
        seen |= {int(g.get("index", 0)) for c in checks.get(r.id, ()) for g in c.gpus}
        for i in seen:
            row = rows.setdefault((host, i), GpuHealth(host, i, str(facts.get(i, {}).get("name", "?"))))
            row.runs += 1
            row.checked += any(int(g.get("index", 0)) == i for c in checks.get(r.id, ()) for g in c.gpus)
            worked.setdefault((host, i), []).extend(busy(samples.get(r.id, ()), i))
            if facts.get(i, {}).get("sm_clock_max_mhz"):
                row.sm_clock_max_mhz = int(facts[i]["sm_clock_max_mhz"])
            for c in checks.get(r.id, ()):
                snap = next((g for g in c.gpus if int(g.get("index", 0)) == i), {})
                row.uuid = row.uuid or snap.get("uuid")
                if snap.get("pcie_gen_max") is not None and snap.get("pcie_width_max") is not None:
                    row.link_max = (int(snap["pcie_gen_max"]), int(snap["pcie_width_max"]))
                if snap.get("power_limit_watts") is not None:
                    row.power_limit_watts = float(snap["power_limit_watts"])
                for what in c.unseen:
                    kinds = row.unseen.setdefault(what.split(":")[0], [])
                    kinds += [] if r.target_kind in kinds else [r.target_kind]
    for f in found:
        if (f.host, f.gpu) in rows:
            rows[(f.host, f.gpu)].findings.append(f)
    for key, row in rows.items():
        _summarise(row, worked.get(key, []))
    order = {ERROR: 0, WARNING: 1}
    return sorted(
        rows.values(),
        key=lambda g: (min((order[f.severity] for f in g.findings), default=2), g.host, g.gpu),
    )


def _summarise(row: GpuHealth, worked: Sequence[Mapping[str, Any]]) -> None:
    """A row's figures from its busy samples."""
    row.busy_samples = len(worked)
    row.reasons_read = sum(1 for g in worked if "clock_reasons" in g)
    if not worked:
        return
    for key in ("sm_clock_mhz", "power_watts"):
        values = [float(g[key]) for g in worked if key in g]
        setattr(row, key, median(values) if values else None)
    temps = [float(g["temperature_c"]) for g in worked if "temperature_c" in g]
    row.temperature_max_c = max(temps) if temps else None
    limits = [float(g["power_limit_watts"]) for g in worked if "power_limit_watts" in g]
    row.power_limit_watts = limits[-1] if limits else row.power_limit_watts
    row.throttled = {name: round(share * 100, 1) for name, share in slowdowns(worked).items()}
    row.link = link(worked, {})
