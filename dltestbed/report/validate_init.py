"""`validate --init`: a reference made from a bench the team trusts, each group's throughput with a tolerance
from its measured spread and each layer's maximum overhead from its measured bound; a bench too noisy to be a
reference is refused, with what to run instead. Pure."""

from __future__ import annotations

from typing import Any

from dltestbed.errors import ConfigError
from dltestbed.report.analysis import Analysis
from dltestbed.report.health_rules import init_health
from dltestbed.report.inference import MIN_N, cv
from dltestbed.report.validate import MATCH_FIELDS, Reference

INIT_MIN_TOLERANCE = 2.0  # % below expected a reference made by --init allows at least
INIT_SPREADS = 3.0  # … or this many run-to-run coefficients of variation, whichever is larger
INIT_MAX_OVERHEAD_SLACK = 2.0  # % added to a trusted bench's overhead bound for --init
INIT_MAX_TOLERANCE = 25.0  # % below expected: a bench noisier than this is no reference (--init refuses it)
STEADIER = "`dltestbed bench --repeat 5 --steps 100` (more and longer runs, nothing else on the machine)"


def init_reference(a: Analysis) -> dict[str, Any]:
    """A reference made from a bench the team trusts: expected throughput per group with a tolerance
    from its measured spread, and for each layer a maximum overhead from its measured bound."""
    checks: list[dict[str, Any]] = []
    for g in a.groups:
        k = g.key
        if k.arm or k.vm_image or g.images_per_sec is None or g.images_per_sec.n < MIN_N:
            continue
        match = {
            "kind": k.target_kind,
            "model": k.model,
            "mode": k.mode,
            "data": k.data,
            "batch_size": k.batch_size,
            "image_size": k.image_size,
            "device": k.device,
            "math": k.math or None,
            "xla": k.xla,
            "scenario": k.scenario,
            "contention": k.contention,
        }
        match = {f: v for f, v in match.items() if v is not None}  # a micro or pre-math run: no math to match
        values = [
            r.images_per_sec
            for r in a.runs
            if r.status == "ok"
            and r.images_per_sec
            and r.measured
            and not r.arm
            and all(getattr(r, MATCH_FIELDS[f]) == v for f, v in match.items())
        ]
        spread = cv(values) or 0.0
        tol = round(max(INIT_MIN_TOLERANCE, INIT_SPREADS * spread * 100), 1)
        check: dict[str, Any] = {
            "name": f"{k.target_kind} {k.model} {k.mode} {k.data} b{k.batch_size} {k.image_size}px",
            "match": match,
            "images_per_sec": round(g.images_per_sec.mean, 2),
            "lower_tolerance_percent": tol,
        }
        if g.effect is not None:
            check["max_overhead_percent"] = round(max(g.effect.hi_pct, 0.0) + INIT_MAX_OVERHEAD_SLACK, 1)
        checks.append(check)
    if not checks:
        raise ConfigError("validate --init: no group of the bench has 2 ok runs; run `bench --repeat 2` or more")
    noisy = [c for c in checks if c["lower_tolerance_percent"] > INIT_MAX_TOLERANCE]
    if noisy:
        worst = max(noisy, key=lambda c: c["lower_tolerance_percent"])
        raise ConfigError(
            f"validate --init: bench {a.runs[0].bench_id} is too noisy to be a reference: {len(noisy)} of "
            f"{len(checks)} group(s) varied beyond ±{INIT_MAX_TOLERANCE / INIT_SPREADS:.1f} % run to run (worst: "
            f"{worst['name']}, ±{worst['lower_tolerance_percent'] / INIT_SPREADS:.1f} %, a tolerance of "
            f"{worst['lower_tolerance_percent']:g} %; at most {INIT_MAX_TOLERANCE:g} %); nothing written; "
            f"run a steadier bench, e.g. {STEADIER}, then --init again"
        )
    rules = init_health(a.gpus)
    data = {"version": 1, "checks": checks} | ({"health": rules} if rules else {})
    Reference.model_validate(data)  # never hand out a reference `validate` would refuse
    return data
