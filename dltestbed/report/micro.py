"""The microbenchmarks in a report: each probe case per layer, its fraction of the physical limit where
one is known, and its change against bare metal with an interval — then the layer decomposition (in Markdown:
report/micro_md.py): the models' overheads beside the probes' changes, so a reader sees which resource a layer
costs. Pure.

A run's value for a case is the median of its timed measures (robust to one slow call); repetitions
of a case are compared with bare metal's as the models are (stats.samples: paired t on log ratios
when the runs pair up by repetition, else Welch — the workers of a distributed job are runs of their
own, so a job's probes compare by Welch). A latency (unit "s") is compared as its inverse, a rate, so
every change reads the same way: negative is worse than bare metal.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from dltestbed import expected
from dltestbed.config import PROBES
from dltestbed.kinds import KINDS
from dltestbed.report import health
from dltestbed.report.inference import Effect, mean_interval
from dltestbed.report.keys import CaseKey, LayerKey, with_framework
from dltestbed.report.stats import Spread, compared, samples
from dltestbed.results.records import RunRecord
from dltestbed.workload.events import MeasureEvent, ResourceEvent, SkipEvent


@dataclass(frozen=True)
class CaseStats:
    """One probe case on one layer over its repetitions."""

    key: CaseKey
    runs: int  # runs that measured it
    value: Spread  # over runs: each run's median timed measure, in key.unit
    ci: tuple[float, float] | None  # t-interval of the mean over runs
    headline: bool  # the case the decomposition shows for its probe
    limit: float | None  # the physical limit in key.unit, where the target could read it
    limit_source: str
    note: str
    effect: Effect | None  # against bare metal: overhead_pct > 0 means less than bare metal
    why_none: str = ""  # why a layer has no effect
    gpu: str = ""  # the GPU while its calls ran (health.during: SM clock, power, share at the power cap), per run

    @property
    def fraction(self) -> float | None:
        """Mean ÷ limit."""
        return self.value.mean / self.limit if self.limit else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self) | {"fraction": self.fraction}


@dataclass(frozen=True)
class Skipped:
    """A probe or case a layer could not run, and why (the reasons of its runs, once each); probe "all":
    a micro run that failed."""

    target_kind: str
    probe: str
    case: str
    reasons: tuple[str, ...]


def run_values(measures: Sequence[MeasureEvent]) -> dict[tuple[str, str, str], float]:
    """(probe, case, unit) → the median of a run's timed measures."""
    by: dict[tuple[str, str, str], list[float]] = {}
    for m in measures:
        if m.phase == "timed":
            by.setdefault((m.probe, m.case, m.unit), []).append(m.value)
    return {k: statistics.median(v) for k, v in by.items()}


def _by_case(
    ok: Sequence[RunRecord], values: Mapping[str, Mapping[tuple[str, str, str], float]]
) -> dict[CaseKey, list[RunRecord]]:
    """The ok micro runs grouped by layer and case (a run is in every case it measured)."""
    groups: dict[CaseKey, list[RunRecord]] = {}
    for r in ok:
        for probe, name, unit in values[r.id]:
            key = CaseKey(
                **vars(LayerKey.of_run(r)),
                scenario=r.scenario,
                workers=r.workers,
                framework=r.framework,
                device=r.device,
                scale=r.spec.get("scale", ""),
                probe=probe,
                case=name,
                unit=unit,
            )
            groups.setdefault(key, []).append(r)
    return groups


def _case_stats(
    key: CaseKey,
    members: list[RunRecord],
    values: Mapping[str, Mapping[tuple[str, str, str], float]],
    base: Mapping[tuple[object, ...], list[RunRecord]],
) -> CaseStats:
    """One layer's case: its runs' medians summarised, its limit, and its change against bare metal's same case
    (paired where the runs pair, else Welch), or why there is none."""
    case = (key.probe, key.case, key.unit)
    vals = [values[r.id][case] for r in members]
    info = _case_info(members[0], key.probe, key.case)
    limit, source = info.get("limit"), str(info.get("limit_source") or "")
    if limit is None and key.probe == "d2d":
        limit, source = _datasheet_bandwidth(members[0])
    eff, why = None, ""
    if key.against_baseline:
        b = base.get(key.workload, [])
        s = samples(b, members, value=_rate_of(values, case)) if b else None
        if not b:
            why = "no bare-metal run of this case"
        elif s is None:
            why = "too few runs for an interval (2 per side)"
        else:
            eff = compared(s)
    return CaseStats(
        key,
        len(members),
        Spread.of(vals),
        mean_interval(vals),
        bool(info.get("headline")),
        limit,
        source,
        str(info.get("note") or ""),
        eff,
        why,
    )


def summarise(
    runs: Sequence[RunRecord],
    measures: Mapping[str, Sequence[MeasureEvent]],
    skips: Mapping[str, Sequence[SkipEvent]],
    samples: Mapping[str, Sequence[ResourceEvent]] | None = None,
) -> tuple[list[CaseStats], list[Skipped]]:
    """Per layer and case: the runs' medians summarised, the limit, the change against bare metal's same
    case, the GPU's clock and power while it ran (from `samples`); and what each layer skipped. Only ok micro
    runs count."""
    ok = [r for r in runs if r.is_probe and r.status == "ok"]
    values = {r.id: run_values(measures.get(r.id, ())) for r in ok}
    groups = _by_case(ok, values)
    base = {k.workload: members for k, members in groups.items() if not k.against_baseline}
    seen = {r.id: _during(r, measures.get(r.id, ()), (samples or {}).get(r.id, ())) for r in ok}
    out = [
        replace(_case_stats(key, members, values, base), gpu="; ".join(
            s for s in (seen[r.id].get((key.probe, key.case), "") for r in members) if s))
        for key, members in groups.items()
    ]  # fmt: skip
    kinds = list(KINDS)
    order = {(c.get("probe"), c.get("case")): i for r in ok for i, c in enumerate(r.spec.get("cases", ()))}
    out.sort(
        key=lambda c: (
            PROBES.index(c.key.probe) if c.key.probe in PROBES else len(PROBES),
            order.get((c.key.probe, c.key.case), 1 << 30),
            c.key.case,
            kinds.index(c.key.target_kind) if c.key.target_kind in kinds else 9,
            c.key.arm,
        )
    )
    out = _copy_ceiling(out)
    failed = [
        Skipped(r.target_kind, "all", "all", (f"run {r.id} {r.status}: {r.reason or 'no reason recorded'}",))
        for r in runs
        if r.is_probe and r.status != "ok"
    ]
    return out, _skipped(ok, skips) + failed


def _copy_ceiling(cases: list[CaseStats]) -> list[CaseStats]:
    """Memory copies have no datasheet limit here: their limit is the best copy bare metal measured (of the
    same size), so each layer's fraction says how much of the machine's memory bandwidth it reaches."""
    best: dict[tuple[str, str], float] = {}
    for c in cases:
        if c.key.probe == "membw" and not c.key.against_baseline:
            k = (c.key.scale, c.key.device)
            best[k] = max(best.get(k, 0.0), c.value.mean)
    out = []
    for c in cases:
        ceiling = best.get((c.key.scale, c.key.device))
        if c.key.probe == "membw" and c.limit is None and ceiling:
            c = replace(c, limit=ceiling, limit_source="the best copy bare metal measured (a measured ceiling)")
        out.append(c)
    return out


def _datasheet_bandwidth(run: RunRecord) -> tuple[float | None, str]:
    """A device copy's limit: the memory bandwidth on the datasheet of the run's GPUs' board (dltestbed/boards/, as
    acceptance judges a copy), where its GPUs are all one board that gives it; else (None, "")."""
    names = {str(g.get("name")) for g in run.fingerprint.get("gpus") or () if isinstance(g, Mapping)}
    board = expected.for_gpu(names.pop(), expected.shipped()) if len(names) == 1 else None
    bandwidth = board.get("memory_bandwidth_tbs") if board else None
    if board is None or bandwidth is None:
        return None, ""
    return bandwidth.value * 1e12, f"{bandwidth.source} (board {board.key})"


def _during(
    run: RunRecord, measures: Sequence[MeasureEvent], samples: Sequence[ResourceEvent]
) -> dict[tuple[str, str], str]:
    """(probe, case) → the GPU while the case's calls ran (health.during), for a run on one GPU: a per-GPU run's,
    or the only one its samples show (several and none named: not guessed)."""
    gpus = {int(g["index"]) for s in samples for g in s.gpus if g.get("index") is not None}
    named = run.spec.get("gpu_index")
    if named is None and len(gpus) != 1:
        return {}
    index = int(named) if named is not None else next(iter(gpus))
    return health.case_conditions(measures, samples, index)


def _rate_of(
    values: Mapping[str, Mapping[tuple[str, str, str], float]], case: tuple[str, str, str]
) -> Callable[[RunRecord], float]:
    """A run's rate for one case (what `samples` compares)."""
    return lambda r: _rate(values[r.id][case], case[2])


def _rate(value: float, unit: str) -> float:
    """Higher is better: a latency in seconds as its inverse."""
    return 1.0 / value if unit == "s" else value


def _case_info(run: RunRecord, probe: str, case: str) -> dict[str, Any]:
    for c in run.spec.get("cases", ()):
        if c.get("probe") == probe and c.get("case") == case:
            return dict(c)
    return {}


def _skipped(runs: Sequence[RunRecord], skips: Mapping[str, Sequence[SkipEvent]]) -> list[Skipped]:
    by: dict[tuple[str, str, str], list[str]] = {}
    for r in runs:
        for s in skips.get(r.id, ()):
            reasons = by.setdefault((r.target_kind, s.probe, with_framework(s.case or "all", r.framework)), [])
            if s.reason not in reasons:
                reasons.append(s.reason)
    return [Skipped(k, p, c, tuple(v)) for (k, p, c), v in sorted(by.items())]
