"""Stored runs into a report, in one place for `report` and `bench --report`: the statistics once, then
Markdown (with its figures as SVG files beside it when written to a file), JSON, or one HTML page."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from dltestbed import __version__
from dltestbed.report import FLEET_MIN_SLOWDOWN, fleet, html, jobs, micro, render, stats
from dltestbed.results.records import RunRecord
from dltestbed.results.store import Store

if TYPE_CHECKING:  # annotations only: matplotlib is imported by reports that draw
    from dltestbed.report.figures import Plot

FLEET_MIN_HOSTS = 3  # the fleet check needs 3 machines; with them it runs in every report


@dataclass(frozen=True)
class Options:
    """What kind of report: format, a row per host, a TOST margin, and where a Markdown file's figures go."""

    fmt: str = "md"
    by_host: bool = False
    equivalence: float | None = None
    figures_dir: str | None = None  # md: a folder name beside the file (x_files); None: no figures
    fleet_slowdown: float = FLEET_MIN_SLOWDOWN  # % below its peers a host must be, beyond their spread, to be flagged


@dataclass(frozen=True)
class Report:
    """The report's text and the files that go beside it (relative path → SVG text)."""

    text: str
    files: dict[str, str] = field(default_factory=dict)
    figures: int = 0


def build(store: Store, records: Sequence[RunRecord], scope: str, opts: Options) -> Report:
    """The report of `records` (read from `store`: steps for the steady-state check, samples for figures)."""
    draw = opts.fmt == "html" or (opts.fmt == "md" and opts.figures_dir is not None)
    probes = [r for r in records if r.is_probe]
    records = [r for r in records if not r.is_probe]
    cases, skipped = micro.summarise(
        probes, {r.id: store.measures(r.id) for r in probes}, {r.id: store.skips(r.id) for r in probes}
    )
    steps = {r.id: store.steps(r.id) for r in records}
    timed = {rid: [s.images_per_sec for s in ss if s.phase == "timed"] for rid, ss in steps.items()}
    groups = stats.summarise(records, by_host=opts.by_host, equivalence=opts.equivalence)
    many = len({r.machine for r in records if r.role != "cotenant"}) >= FLEET_MIN_HOSTS
    host_groups = groups if opts.by_host else (stats.summarise(records, by_host=True) if many else [])
    flags, compared = fleet.fleet(host_groups, min_slowdown=opts.fleet_slowdown) if host_groups else ([], 0)
    dist, shared = jobs.distributed(records), jobs.shared(records)
    steady = fleet.steady(records, timed)
    if opts.fmt == "json":
        text = (
            render.as_json(
                groups,
                dist,
                shared,
                scope=scope,
                fleet=flags,
                steady=[{"run": r.id, "flags": w} for r, w in steady],
                micro={"cases": [c.to_dict() for c in cases], "skipped": [s.__dict__ for s in skipped]},
                fleet_slowdown=opts.fleet_slowdown,
            )
            + "\n"
        )
        return Report(text)
    title = f"dltestbed report: {scope}"
    plots: list[Plot] = []
    if draw:
        from dltestbed.report import figures  # matplotlib: only for reports that draw

        resources = {r.id: store.resources(r.id) for r in records}
        plots = figures.build(
            groups, records, steps, resources, steady, dist, shared, host_groups, flags, cases, opts.fleet_slowdown
        )
    args = dict(
        title=title,
        dist=dist,
        shared=shared,
        equivalence=opts.equivalence,
        fleet_flags=flags,
        fleet_compared=compared,
        fleet_slowdown=opts.fleet_slowdown,
        steady_flags=steady,
        micro_lines=micro.markdown(cases, skipped, groups),
    )
    if opts.fmt == "html":
        refs = _refs(plots, lambda p: f"{html.FIGURE_SRC}{p.name}")
        md = render.markdown(groups, figures=refs, captions=False, **args)  # type: ignore[arg-type]
        made = f"{len(records)} run(s); made {datetime.now(UTC):%Y-%m-%d %H:%M} UTC by dltestbed {__version__}"
        return Report(html.document(md, {p.name: p for p in plots}, title, made), figures=len(plots))
    if opts.figures_dir is None:
        return Report(render.markdown(groups, **args))  # type: ignore[arg-type]
    refs = _refs(plots, lambda p: f"{opts.figures_dir}/{p.name}.svg")
    files = {f"{opts.figures_dir}/{p.name}.svg": p.svg for p in plots}
    return Report(render.markdown(groups, figures=refs, **args), files, len(plots))  # type: ignore[arg-type]


def _refs(plots: Sequence[Plot], src: Callable[[Plot], str]) -> dict[str, list[render.FigureRef]]:
    """The figures by section, as the Markdown names them."""
    out: dict[str, list[render.FigureRef]] = {}
    for p in plots:
        out.setdefault(p.section, []).append(render.FigureRef(p.title, p.caption, src(p)))
    return out
