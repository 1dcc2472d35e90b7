"""The verdict gate: stored runs judged against a reference file of expected values. Pure.

A reference is a small declarative YAML (no expressions, nothing evaluated):

    version: 1
    checks:
      - name: alexnet on bare metal
        match: {kind: bm, model: alexnet, mode: train, data: synthetic, batch_size: 8, image_size: 64}
        images_per_sec: 130.0          # expected throughput …
        lower_tolerance_percent: 10    # … with this much below it allowed
      - name: container overhead
        match: {kind: cbm, model: alexnet, mode: train, data: synthetic, batch_size: 8, image_size: 64}
        max_overhead_percent: 3        # against bare metal of the same bench

`match` may also name `device`, `math` (float32, tf32, mixed_bfloat16, mixed_float16, mixed, default), `xla`,
`scenario`, `contention`, `gpu_model` (the runs' GPU model) and
`hosts` (a host group: only runs on these machines). A `health:` section adds rules of GPU health, each
judged per host and GPU (report/health_rules.py):

    health:
      no_xid: true                     # no XID error while a run lasted
      no_new_uncorrectable_ecc: true   # no new uncorrectable ECC error, row remapped or page retired for one
      no_hardware_slowdown: true       # no hardware (thermal, power brake) slowdown while the GPU was busy
      pcie_link_at_max: true           # the PCIe link under load at its max generation and width
      power_limit_watts: 700           # the enforced power limit (±1 W)

Whatever the reference says, the probes' checked results and the --deterministic runs' losses are judged too
(report/correct_rules.py): a wrong answer is a failing case.

Every judgement of a check is three-way, from 95 % intervals, so noise never passes or fails a check by itself:
  pass — the interval lies on the right side of the limit;
  fail — it lies wholly on the wrong side;
  cannot judge — it straddles the limit, or there are too few runs (2 are needed), or no baseline.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Literal
from xml.sax.saxutils import escape, quoteattr

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from dltestbed.config import Math
from dltestbed.errors import ConfigError
from dltestbed.report.analysis import Analysis
from dltestbed.report.correct_rules import judge_agreement, judge_results
from dltestbed.report.environment import environment
from dltestbed.report.health_rules import HealthRules, judge_health
from dltestbed.report.inference import MIN_N, mean_interval
from dltestbed.report.stats import GroupStats
from dltestbed.report.verdicts import FAIL, PASS, SKIPPED, UNDECIDED, Judgement
from dltestbed.results.records import RunRecord

MATCH_FIELDS = {
    "kind": "target_kind",
    "model": "model",
    "mode": "mode",
    "data": "data",
    "device": "device",
    "math": "math",
    "xla": "xla",
    "batch_size": "batch_size",
    "image_size": "image_size",
    "scenario": "scenario",
    "contention": "contention",
}


class Match(BaseModel):
    """Which groups of runs a check is about."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["bm", "vm", "cbm", "cvm"]
    model: str
    mode: Literal["train", "infer"] = "train"
    data: Literal["synthetic", "real"] = "synthetic"
    batch_size: int | None = None
    image_size: int | None = None
    device: Literal["auto", "cpu", "gpu"] | None = None
    math: Math | Literal["default"] | None = None  # default: runs stored before dltestbed recorded math
    xla: bool | None = None
    scenario: Literal["single", "distributed", "shared"] = "single"
    contention: str = "none"
    gpu_model: str | None = None
    hosts: list[str] | None = None


class Check(BaseModel):
    """One expectation: a throughput with a lower tolerance, and/or a maximum overhead against bare metal."""

    model_config = ConfigDict(extra="forbid")
    name: str
    match: Match
    images_per_sec: float | None = Field(None, gt=0)
    lower_tolerance_percent: float = Field(5.0, ge=0, lt=100)
    max_overhead_percent: float | None = None

    @model_validator(mode="after")
    def _something(self) -> Check:
        if self.images_per_sec is None and self.max_overhead_percent is None:
            raise ValueError("give images_per_sec and/or max_overhead_percent")
        if self.max_overhead_percent is not None and self.match.kind == "bm":
            raise ValueError("max_overhead_percent is for a layer (vm, cbm, cvm), not bare metal itself")
        return self


class Reference(BaseModel):
    """A reference file: checks of throughput and overhead, and/or rules of GPU health."""

    model_config = ConfigDict(extra="forbid")
    version: Literal[1] = 1
    checks: list[Check] = Field(default_factory=list)
    health: HealthRules | None = None

    @model_validator(mode="after")
    def _something(self) -> Reference:
        if not self.checks and self.health is None:
            raise ValueError("give checks and/or health")
        return self


def parse_reference(text: str, source: str) -> Reference:
    """A Reference from YAML text, or a ConfigError naming the file, the field and what is wrong."""
    # PyYAML loads only for the commands that read YAML
    import yaml

    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"reference {source}: not YAML ({str(exc).splitlines()[0]})") from None
    try:
        return Reference.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top)"
        raise ConfigError(f"reference {source}: {where}: {err['msg']}") from None


def _agrees(field: str, wanted: object, got: object) -> bool:
    """Whether a run's (or a group's) value is the one a check's `match` names: `math: mixed` takes what mixed
    resolved to on the target (a run records the math it used: mixed_bfloat16 or mixed_float16)."""
    return got == wanted or (field == "math" and wanted == "mixed" and str(got).startswith("mixed_"))


def _selected(check: Check, runs: Sequence[RunRecord]) -> list[RunRecord]:
    m = check.match
    out = []
    for r in runs:
        if not r.measured or r.arm or r.vm_image:
            continue
        if any(
            getattr(m, k) is not None and not _agrees(k, getattr(m, k), getattr(r, f)) for k, f in MATCH_FIELDS.items()
        ):
            continue
        if m.hosts is not None and r.machine not in m.hosts:
            continue
        if m.gpu_model is not None and environment(r).get("gpu_model") != m.gpu_model:
            continue
        out.append(r)
    return out


def _three_way(lo: float, hi: float, limit: float, higher_is_better: bool) -> str:
    if higher_is_better:
        return PASS if lo >= limit else FAIL if hi < limit else UNDECIDED
    return PASS if hi <= limit else FAIL if lo > limit else UNDECIDED


def judge(reference: Reference, a: Analysis) -> list[Judgement]:
    """Every check of the reference against a bench's analysis (its runs and its report groups); then, asked
    or not, the probes' checked results and the deterministic runs' losses (a wrong answer always fails)."""
    out = []
    for check in reference.checks:
        mine = [r for r in _selected(check, a.runs) if r.status == "ok" and r.images_per_sec]
        if check.images_per_sec is not None:
            limit = check.images_per_sec * (1 - check.lower_tolerance_percent / 100)
            if len(mine) < MIN_N:
                out.append(
                    Judgement(
                        check.name,
                        UNDECIDED,
                        f"{len(mine)} ok run(s) match; {MIN_N} are needed for an interval",
                        "images_per_sec",
                    )
                )
            else:
                values = [r.images_per_sec for r in mine if r.images_per_sec is not None]
                g, (lo, hi) = statistics.fmean(values), mean_interval(values) or (math.nan, math.nan)
                status = _three_way(lo, hi, limit, higher_is_better=True)
                out.append(
                    Judgement(
                        check.name,
                        status,
                        f"mean {g:.1f} img/s [{lo:.1f}, {hi:.1f}] over {len(mine)} runs "
                        f"against at least {limit:.1f} ({check.images_per_sec:g} − "
                        f"{check.lower_tolerance_percent:g} %)",
                        "images_per_sec",
                    )
                )
        if check.max_overhead_percent is not None:
            out.append(_overhead(check, a.groups))
    if reference.health is not None:
        out += judge_health(reference.health, a.gpus)
    return out + judge_results(a.checked, a.mismatches) + judge_agreement(a.agreement)


def _overhead(check: Check, groups: Sequence[GroupStats]) -> Judgement:
    m, limit = check.match, check.max_overhead_percent
    assert limit is not None
    found = [
        g
        for g in groups
        if g.key.target_kind == m.kind
        and not g.key.arm
        and not g.key.vm_image
        and all(getattr(m, k) is None or _agrees(k, getattr(m, k), getattr(g.key, f)) for k, f in MATCH_FIELDS.items())
    ]
    effects = [g for g in found if g.effect is not None]
    if len(effects) != 1:
        why = (
            found[0].verdict
            if len(found) == 1 and found[0].verdict
            else (
                "no interval: no bare-metal runs of the same bench and settings, or fewer than 2 runs a side"
                if len(found) <= 1
                else f"{len(found)} groups match; narrow `match`"
            )
        )
        return Judgement(check.name, UNDECIDED, why or "no matching runs", "max_overhead_percent")
    e = effects[0].effect
    assert e is not None
    status = _three_way(e.lo_pct, e.hi_pct, limit, higher_is_better=False)
    return Judgement(
        check.name,
        status,
        f"overhead {e.overhead_pct:.1f} % [{e.lo_pct:.1f}, {e.hi_pct:.1f}] "
        f"({e.method}, n = {e.n}) against at most {limit:g} %",
        "max_overhead_percent",
    )


XML_HEAD = '<?xml version="1.0" encoding="UTF-8"?>'


def junit_xml(judgements: Sequence[Judgement], suite: str = "dltestbed validate") -> str:
    """JUnit XML: a testcase per judgement; fail → <failure>, cannot judge → <error> (never a pass)."""
    return "\n".join([XML_HEAD, *_suite(suite, judgements, "dltestbed.validate")]) + "\n"


def junit_suites(name: str, suites: Sequence[tuple[str, Sequence[Judgement]]], classname: str) -> str:
    """JUnit XML of several testsuites (each as junit_xml's), under one <testsuites>."""
    lines = [XML_HEAD, f"<testsuites name={quoteattr(name)}>"]
    for suite, judgements in suites:
        lines += ["  " + line for line in _suite(suite, judgements, classname)]
    return "\n".join([*lines, "</testsuites>"]) + "\n"


def _suite(suite: str, judgements: Sequence[Judgement], classname: str) -> list[str]:
    fails = sum(j.status == FAIL for j in judgements)
    errors = sum(j.status == UNDECIDED for j in judgements)
    skipped = sum(j.status == SKIPPED for j in judgements)
    counts = f'tests="{len(judgements)}" failures="{fails}" errors="{errors}"' + (
        f' skipped="{skipped}"' if skipped else ""
    )
    lines = [f"<testsuite name={quoteattr(suite)} {counts}>"]
    for j in judgements:
        head = f"  <testcase classname={quoteattr(f'{classname}.{j.what}')} name={quoteattr(j.name)}"
        if j.status == PASS:
            lines.append(f"{head}><system-out>{escape(j.evidence)}</system-out></testcase>")
        elif j.status == SKIPPED:
            lines.append(f"{head}><skipped message={quoteattr(j.evidence)}/></testcase>")
        else:
            tag = "failure" if j.status == FAIL else "error"
            lines.append(
                f"{head}><{tag} message={quoteattr(j.status + ': ' + j.evidence)}>"
                f"{escape(j.evidence)}</{tag}></testcase>"
            )
    lines.append("</testsuite>")
    return lines
