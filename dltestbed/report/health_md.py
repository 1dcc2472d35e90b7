"""The report's GPU health section in Markdown: the findings first, a row per host and GPU, the GPUs whose
clocks or power lie below their peers', the likely cause of each host the fleet check flagged, and what
NVML could not see from where the workload ran. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from dltestbed.report.fleet import FleetFlag, GpuFlag
from dltestbed.report.health import BUSY_UTIL, ERROR, Finding, GpuHealth
from dltestbed.report.health_rules import RULES
from dltestbed.report.mdtable import row as md_row
from dltestbed.results.records import gpu_label


def _cell(v: float | None) -> str:
    return "—" if v is None else f"{v:.0f}"


def _link(at: tuple[int, int] | None) -> str:
    return "—" if at is None else f"Gen{at[0]} x{at[1]}"


def row(g: GpuHealth) -> str:
    """A GPU's table row."""
    errors = sum(f.severity == ERROR for f in g.findings)
    found = f"**{errors} error(s)**" if errors else ""
    if len(g.findings) > errors:
        found += (", " if found else "") + f"{len(g.findings) - errors} warning(s)"
    clock = _cell(g.sm_clock_mhz) + (f" ({g.sm_clock_max_mhz})" if g.sm_clock_max_mhz else "")
    power = _cell(g.power_watts) + (f" ({g.power_limit_watts:.0f})" if g.power_limit_watts else "")
    slow = ", ".join(f"{name} {share:g} %" for name, share in g.throttled.items()) or "none"
    link = _link(g.link) + (f" ({_link(g.link_max)})" if g.link_max else "")
    cells = [g.host, str(g.gpu), g.model, str(g.runs), found or "none", clock, power, _cell(g.temperature_max_c)]
    return md_row([*cells, slow if g.reasons_read else "—", link, str(g.busy_samples)])


def _finding(f: Finding, runs: dict[str, str]) -> str:
    return f"- **{f.severity}** {f.host} GPU {f.gpu}, run {f.run_id} ({runs.get(f.run_id, '?')}): {f.what}"


def _no_finding(gpus: Sequence[GpuHealth]) -> list[str]:
    """What "no finding" covers: each check said clean only where it was made (the rules `validate` judges
    by), and each one that could not be made, per GPU, with why."""
    clean, unjudged = [], []
    for words, _, needs in RULES.values():
        why = [f"{g.host} GPU {g.gpu}: {reason}" for g in gpus if (reason := needs(g)) is not None]
        if why:
            unjudged.append(f"- {words}: cannot judge ({'; '.join(why)})")
        else:
            clean.append(words)
    if not unjudged:
        return [f"No finding: {', '.join(clean)}."]
    lines = [f"No finding in what was checked ({', '.join(clean)})." if clean else "No finding, and no check made:"]
    return [*lines, *([""] if clean else []), *(["Not checked:", ""] if clean else []), *unjudged]


def likely_causes(fleet: Sequence[FleetFlag], gpus: Sequence[GpuHealth], flags: Sequence[GpuFlag]) -> list[str]:
    """For each host the fleet check flagged as slow, what its GPUs show: findings, slowdown reasons, and
    clocks or power below their peers'. Empty when nothing on that host's GPUs stands out."""
    lines = []
    for unit in dict.fromkeys(f.host for f in fleet):
        host, _, one = unit.partition("/")  # --gpus per-gpu: `host/gpuN`, that host's GPU N alone
        seen = [fl.words() for fl in flags if fl.host == host and (not one or gpu_label(fl.gpu) == one)]
        for g in (g for g in gpus if g.host == host and (not one or gpu_label(g.gpu) == one)):
            seen += [f"GPU {g.gpu}: {f.what}" for f in g.findings if f.severity == ERROR]
            seen += [f"GPU {g.gpu}: {name} in {share:g} % of busy samples" for name, share in g.throttled.items()]
        if seen:
            lines.append(f"- {unit}: " + "; ".join(dict.fromkeys(seen)))
    return lines


def markdown(
    gpus: Sequence[GpuHealth],
    findings: Sequence[Finding],
    flags: Sequence[GpuFlag],
    fleet: Sequence[FleetFlag],
    runs: dict[str, str],
) -> list[str]:
    """The section's lines (none without a GPU); `runs`: run id → how the findings name it."""
    if not gpus:
        return []
    lines = ["", "## GPU health", ""]
    if findings:
        lines += ["Findings, errors first (each run's numbers are kept):", ""]
        lines += [_finding(f, runs) for f in findings]
    else:
        lines += _no_finding(gpus)
    lines += [
        "",
        "| host | GPU | model | runs | findings | SM clock, MHz (max) | power, W (limit) | max temp, °C "
        "| slowdown, % of busy samples | PCIe link (max) | busy samples |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *[row(g) for g in gpus],
    ]
    if flags:
        lines += ["", "GPUs below their peers of the same model under load:", ""]
        lines += [f"- {f.words()}" for f in flags]
    causes = likely_causes(fleet, gpus, flags)
    if causes:
        lines += ["", "Likely cause of each host the fleet check flagged:", "", *causes]
    unseen = {what: kinds for g in gpus for what, kinds in g.unseen.items()}
    if unseen:
        said = "; ".join(f"{what} (from {', '.join(kinds)})" for what, kinds in unseen.items())
        lines += [
            "",
            f"Not read, so not checked (this GPU does not support it, or it is not visible from there): {said}.",
        ]
    return [
        *lines,
        "",
        f"Clock, power and temperature: median (temperature: max) over the samples taken while the GPU was at "
        f"least {BUSY_UTIL:g} % busy; the PCIe link: the widest seen under load (an idle link trains down to save "
        "power). Counters (XID, ECC, remapped rows, retired pages, PCIe replays) compared before and after each "
        "run. GPUs below their peers: leave-one-out modified z-score, as the fleet check.",
    ]
