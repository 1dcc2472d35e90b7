"""The health rules of a reference file, judged per host and GPU: an acceptance run fails on a sick GPU even
when its throughput looks fine. Pure.

A rule passes when what it checks was seen and was clean, fails on a finding of its kind, and cannot be
judged where NVML could not see it from where the workload ran (XID events in a container, a GPU without
busy samples): never a pass by default.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dltestbed.report import health
from dltestbed.report.health import GpuHealth
from dltestbed.report.verdicts import FAIL, PASS, UNDECIDED, Judgement

POWER_LIMIT_SLACK_WATTS = 1.0  # NVML reports the limit in mW; a configured limit reads back within this


class HealthRules(BaseModel):
    """The `health:` section of a reference: which rules apply (all but the power limit by default)."""

    model_config = ConfigDict(extra="forbid")
    no_xid: bool = True
    no_new_uncorrectable_ecc: bool = True
    no_hardware_slowdown: bool = True
    pcie_link_at_max: bool = True
    power_limit_watts: float | None = Field(None, gt=0)


def _uncorrectable(f: health.Finding) -> bool:
    return f.rule == health.ECC_UNCORRECTED or (f.rule in (health.ROWS, health.PAGES) and f.severity == health.ERROR)


# rule → (in words, the findings that fail it, what must have been seen to pass it)
RULES: dict[str, tuple[str, Callable[[health.Finding], bool], Callable[[GpuHealth], str | None]]] = {
    "no_xid": (
        "no XID",
        lambda f: f.rule == health.XID,
        lambda g: _unseen(g, "XID events") or _unchecked(g),
    ),
    "no_new_uncorrectable_ecc": (
        "no new uncorrectable ECC error",
        _uncorrectable,
        lambda g: _unseen(g, "ECC counts") or _unchecked(g),
    ),
    "no_hardware_slowdown": (
        "no hardware slowdown",
        lambda f: f.rule == health.HW_SLOWDOWN,
        lambda g: _reasons_unread(g),
    ),
    "pcie_link_at_max": (
        "PCIe link at its max",
        lambda f: f.rule == health.PCIE_LINK,
        lambda g: None if g.link and g.link_max else "its PCIe link (current and max) was not read",
    ),
}


def _reasons_unread(g: GpuHealth) -> str | None:
    if not g.busy_samples:
        return _unseen(g, "GPU samples") or "no sample of this GPU while it was busy"
    if not g.reasons_read:
        return _unseen(g, "clock-event reasons") or "its clock-event reasons were not read under load"
    return None


def _unseen(g: GpuHealth, what: str) -> str | None:
    kinds = g.unseen.get(what)
    return f"{what} not visible from {', '.join(kinds)}" if kinds else None


def _unchecked(g: GpuHealth) -> str | None:
    return None if g.checked else "no health check before and after a run"


def judge_health(rules: HealthRules, gpus: Sequence[GpuHealth]) -> list[Judgement]:
    """Each rule that applies, for each host and GPU the bench's runs sampled or checked."""
    if not gpus:
        said = "no run of this bench recorded a GPU's health (no GPU seen, or stored before dltestbed checked it)"
        return [Judgement("GPU health", UNDECIDED, said, "health")]
    out = []
    for g in gpus:
        where = f"{g.host} GPU {g.gpu}"
        for rule, (words, fails, needs) in RULES.items():
            if not getattr(rules, rule):
                continue
            bad = [f for f in g.findings if fails(f)]
            why = needs(g)
            if bad:
                status, evidence = FAIL, "; ".join(f"run {f.run_id}: {f.what}" for f in bad)
            elif why is not None:
                status, evidence = UNDECIDED, why
            else:
                status, evidence = PASS, f"none in {g.runs} run(s)"
            out.append(Judgement(f"{words} on {where}", status, evidence, f"health.{rule}"))
        if rules.power_limit_watts is not None:
            out.append(_power(rules.power_limit_watts, g, where))
    return out


def _power(expected: float, g: GpuHealth, where: str) -> Judgement:
    name, what = f"power limit {expected:g} W on {where}", "health.power_limit_watts"
    if g.power_limit_watts is None:
        return Judgement(name, UNDECIDED, "the enforced power limit was not read", what)
    ok = abs(g.power_limit_watts - expected) <= POWER_LIMIT_SLACK_WATTS
    return Judgement(name, PASS if ok else FAIL, f"enforced limit {g.power_limit_watts:g} W", what)


def init_health(gpus: Sequence[GpuHealth]) -> dict[str, Any] | None:
    """The health section `validate --init` writes from a bench the team trusts: every rule, and the power
    limit its GPUs ran at where they all agree. None without a GPU."""
    if not gpus:
        return None
    out: dict[str, Any] = {rule: True for rule in RULES}
    limits = {g.power_limit_watts for g in gpus}
    if len(limits) == 1 and None not in limits:
        out["power_limit_watts"] = limits.pop()
    return out
