"""Stored runs into a report, in one place for `report` and `bench --report`: the analysis once, then
Markdown (with its figures as SVG files beside it when written to a file), JSON, or one HTML page."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from dltestbed import __version__
from dltestbed.report import FLEET_MIN_SLOWDOWN, analysis, html, render
from dltestbed.results.records import RunRecord
from dltestbed.results.store import Store

if TYPE_CHECKING:  # annotations only: matplotlib is imported by reports that draw
    from dltestbed.report.figures import Plot


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
    """The report of `records` (read from `store`: steps for the steady-state check, samples for the figures and
    GPU health)."""
    a = analysis.read(
        store,
        records,
        scope=scope,
        by_host=opts.by_host,
        equivalence=opts.equivalence,
        fleet_slowdown=opts.fleet_slowdown,
    )
    if opts.fmt == "json":
        return Report(render.as_json(a) + "\n")
    title = f"dltestbed report: {scope}"
    if opts.fmt != "html" and opts.figures_dir is None:
        return Report(render.markdown(a, title))
    from dltestbed.report import figures  # matplotlib: only for reports that draw

    plots = figures.build(a)
    if opts.fmt == "html":
        md = render.markdown(a, title, _refs(plots, lambda p: f"{html.FIGURE_SRC}{p.name}"), captions=False)
        made = f"{len(records)} run(s); made {datetime.now(UTC):%Y-%m-%d %H:%M} UTC by dltestbed {__version__}"
        return Report(html.document(md, {p.name: p for p in plots}, title, made), figures=len(plots))
    refs = _refs(plots, lambda p: f"{opts.figures_dir}/{p.name}.svg")
    files = {f"{opts.figures_dir}/{p.name}.svg": p.svg for p in plots}
    return Report(render.markdown(a, title, refs), files, len(plots))


def _refs(plots: Sequence[Plot], src: Callable[[Plot], str]) -> dict[str, list[render.FigureRef]]:
    """The figures by section, as the Markdown names them."""
    out: dict[str, list[render.FigureRef]] = {}
    for p in plots:
        out.setdefault(p.section, []).append(render.FigureRef(p.title, p.caption, src(p)))
    return out
