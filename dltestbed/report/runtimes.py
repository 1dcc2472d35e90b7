"""Container runtimes against native (HPEC'19's questions, for a runtime that runs as the user against bare metal):
for the workload that ran under the most container runtimes, each runtime's throughput with its 95 % interval, its
overhead against bare metal with the interval and verdict the groups' table computed (report/stats.py: paired t
on log ratios within a bench's repetitions, Welch across benches), launch-to-finish time, peak host memory (the
largest RSS sample of each run, averaged over runs), peak GPU memory, top-1 on held-out data (--accuracy), and who
the workload ran as, inside and outside. Pure."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dltestbed.kinds import BASELINE
from dltestbed.report.inference import Effect
from dltestbed.report.keys import GroupKey
from dltestbed.report.mdtable import head as md_head
from dltestbed.report.mdtable import row as md_row
from dltestbed.report.stats import GroupStats
from dltestbed.results.records import RunRecord
from dltestbed.workload.events import ResourceEvent

CONTAINER = "cbm"  # the kind whose runtimes are compared: a container on the same machine as bare metal
NATIVE = "native"


@dataclass(frozen=True)
class RuntimeRow:
    """One runtime (or native: bare metal) on the compared workload."""

    runtime: str  # "native", or the container runtime
    layer: str
    workload: str  # the workload compared, in words
    runs: int  # ok runs
    images_per_sec: float | None  # mean over ok runs
    images_per_sec_ci: tuple[float, float] | None  # 95 % t-interval of that mean (stats.MEAN_T)
    effect: Effect | None  # overhead against native, with its interval; None for native or too few runs
    verdict: str | None
    wall_seconds: float | None  # mean launch to finish
    host_memory_peak_bytes: float | None  # mean over runs of each run's largest RSS sample
    gpu_memory_peak_bytes: float | None
    top1: float | None  # mean top-1 on held-out data (--accuracy runs)
    inside: str  # the uids (and names) the workload saw, "; "-joined when they differ
    outside: str  # the users the runs were started as on the machine

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return dataclasses.asdict(self)


def _mean(values: Sequence[float | None]) -> float | None:
    have = [v for v in values if v is not None]
    return statistics.fmean(have) if have else None


def _peak_rss(samples: Sequence[ResourceEvent]) -> float | None:
    rss = [s.rss_bytes for s in samples if s.rss_bytes is not None]
    return float(max(rss)) if rss else None


def _who(runs: Sequence[RunRecord]) -> tuple[str, str]:
    inside = {
        f"uid {r.fingerprint['uid']}" + (f" ({r.fingerprint['user']})" if r.fingerprint.get("user") else "")
        for r in runs
        if r.fingerprint.get("uid") is not None
    }
    outside = {str(r.fingerprint["run_as_user"]) for r in runs if r.fingerprint.get("run_as_user")}
    return "; ".join(sorted(inside)) or "?", "; ".join(sorted(outside)) or "?"


def table(
    groups: Sequence[GroupStats], runs: Sequence[RunRecord], samples: Mapping[str, Sequence[ResourceEvent]]
) -> list[RuntimeRow]:
    """Native and each container runtime on the one workload that ran under the most runtimes (at least one, and
    bare metal beside it); [] when no container ran beside bare metal."""
    by_work: dict[tuple[Any, ...], list[GroupStats]] = {}
    for g in groups:
        if g.key.host is None and not g.key.arm and g.key.target_kind in (BASELINE, CONTAINER):
            by_work.setdefault(g.key.workload, []).append(g)
    candidates = [
        gs
        for gs in by_work.values()
        if any(g.key.target_kind == BASELINE for g in gs) and any(g.key.target_kind == CONTAINER for g in gs)
    ]
    if not candidates:
        return []
    chosen = max(candidates, key=lambda gs: len({g.key.runtime for g in gs}))  # the first of the most runtimes
    chosen.sort(key=lambda g: (g.key.target_kind != BASELINE, g.key.runtime))
    ok = [r for r in runs if r.status == "ok" and r.measured and not r.is_probe]
    rows = []
    for g in chosen:
        mine = [r for r in ok if GroupKey.of(r) == g.key]
        ips = g.images_per_sec
        inside, outside = _who(mine)
        rows.append(
            RuntimeRow(
                runtime=g.key.runtime or NATIVE,
                layer=g.key.layer,
                workload=f"{g.key.model} {g.key.mode}, {g.key.data} data, batch {g.key.batch_size}, "
                f"{g.key.image_size} px ({g.key.framework})",
                runs=len(mine),
                images_per_sec=ips.mean if ips else None,
                images_per_sec_ci=g.images_per_sec_ci,
                effect=g.effect,
                verdict=g.verdict,
                wall_seconds=g.wall_seconds.mean if g.wall_seconds else None,
                host_memory_peak_bytes=_mean([_peak_rss(samples.get(r.id, ())) for r in mine]),
                gpu_memory_peak_bytes=g.gpu_memory_peak_bytes.mean if g.gpu_memory_peak_bytes else None,
                top1=_mean([r.top1 for r in mine]),
                inside=inside,
                outside=outside,
            )
        )
    return rows


def _num(value: float | None, fmt: str, scale: float = 1.0) -> str:
    return "–" if value is None else format(value * scale, fmt)


def markdown(rows: Sequence[RuntimeRow]) -> list[str]:
    """The runtime comparison as a Markdown section ([] without rows)."""
    if not rows:
        return []
    lines = [
        "",
        "## Container runtimes against native",
        "",
        "One workload under each container runtime that ran it, beside bare metal (native): throughput with its "
        "95 % t-interval, the overhead against native with its interval and verdict (as in the overheads' table), "
        "launch to finish, the peak memory on the host (largest RSS sample) and on the GPU, top-1 on held-out data "
        "where the runs measured it, and whom the workload ran as. Workload: " + rows[0].workload + ".",
        "",
        *md_head(
            [
                "runtime",
                "runs",
                "img/s (95 % CI)",
                "overhead (95 % CI)",
                "verdict",
                "launch to finish s",
                "peak host memory GiB",
                "peak GPU memory GiB",
                "top-1",
                "ran as inside",
                "started as",
            ]
        ),
    ]
    for r in rows:
        ci = f" ({r.images_per_sec_ci[0]:.1f}–{r.images_per_sec_ci[1]:.1f})" if r.images_per_sec_ci else ""
        eff = r.effect
        over = "–" if eff is None else f"{eff.overhead_pct:+.1f} % ({eff.lo_pct:+.1f} to {eff.hi_pct:+.1f})"
        lines.append(
            md_row(
                [
                    r.layer if r.runtime != NATIVE else "native (bm)",
                    str(r.runs),
                    _num(r.images_per_sec, ".1f") + ci,
                    over,
                    r.verdict or ("baseline" if r.runtime == NATIVE else "–"),
                    _num(r.wall_seconds, ".1f"),
                    _num(r.host_memory_peak_bytes, ".2f", 2**-30),
                    _num(r.gpu_memory_peak_bytes, ".2f", 2**-30),
                    _num(r.top1, ".3f"),
                    r.inside,
                    r.outside,
                ]
            )
        )
    return lines
