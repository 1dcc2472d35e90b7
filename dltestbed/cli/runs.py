"""`dltestbed runs` and `dltestbed report`: what is stored, and what it means."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, ClassVar

import typer

from dltestbed.choices import ReportFormat
from dltestbed.cli import deprecated
from dltestbed.cli.grouped import grouped
from dltestbed.cli.options import OUTPUT_HELP, RESULTS_HELP, Output, wants_json
from dltestbed.panels import opt
from dltestbed.report import FLEET_MIN_SLOWDOWN, ROBUST_Z


def format_for(out: Path | None, fmt: str | None) -> str:
    """The format asked for, else the one --out's suffix names (.html/.htm, .json), else md."""
    if fmt:
        return fmt
    suffix = out.suffix.lower() if out is not None else ""
    return {".html": "html", ".htm": "html", ".json": "json"}.get(suffix, "md")


def stderr(line: str) -> None:
    """A notice for the user, on stderr."""
    print(line, file=sys.stderr)


def runs(
    bench: str | None = typer.Option(
        None, metavar="ID", help="Only this bench's runs (an id, a run's id: its bench, or 'last')."
    ),
    benches: bool = typer.Option(False, "--benches", help="A row per bench instead of per run."),
    no_trunc: bool = typer.Option(False, "--no-trunc", help="Whole ids, not their short form."),
    fmt: Output = typer.Option("table", "--format", metavar="FMT", help=OUTPUT_HELP),
    results: Path | None = typer.Option(None, metavar="FILE", help=RESULTS_HELP),
    as_json: bool = deprecated.param(False, "--json", "--format json"),
) -> None:
    """List stored runs, oldest first (or benches, with --benches).

    An id shown is the short form of the run's: `report ID` and `--bench ID` take it, or any unique prefix.
    """
    from dltestbed.cli import listing
    from dltestbed.results.select import select_runs
    from dltestbed.results.store import Store

    store = Store.open(results, read_only=True)
    try:
        records = select_runs(store, None, bench, stderr)
    finally:
        store.close()
    if wants_json(fmt, as_json):
        rows = listing.bench_rows(records) if benches else [r.to_dict() for r in records]
        print(json.dumps(rows, indent=2))
        return
    table = listing.benches_table(records, no_trunc) if benches else listing.runs_table(records, no_trunc)
    listing.show(table, store.path, records if not benches else [], no_trunc)


RunIdsArg = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="[RUN_ID]...", help="Runs to include, by id or a unique prefix (default: the latest bench)."
    ),
]


@dataclass(frozen=True)
class Asked:
    """Which runs, judged how, written where."""

    PANEL: ClassVar[str | None] = None  # the command's one panel
    DEFAULTS_SHOWN: ClassVar[bool] = True

    fmt: Annotated[ReportFormat | None, opt("--format", help="md, json, html (default: --out).")] = None
    bench: Annotated[str | None, opt("--bench", metavar="ID", help="This bench's runs (default: last).")] = None
    all_runs: Annotated[bool, opt("--all", help="Every stored run, of every bench.")] = False
    equivalence: Annotated[
        float | None, opt("--equivalence", metavar="PCT", help="Judge equivalence within ±PCT %.")
    ] = None
    compare: Annotated[tuple[str, str] | None, opt("--compare", metavar="A B", help="Bench B against bench A.")] = None
    out: Annotated[Path | None, opt("--out", help="Write it here (.md, .json, .html).")] = None
    by_host: Annotated[bool, opt("--by-host", help="A row per host too: the slow node.")] = False
    fleet_slowdown: Annotated[
        float, opt("--fleet-slowdown", metavar="PCT", help=f"Flag a host this % slower, z<-{ROBUST_Z:g}.")
    ] = FLEET_MIN_SLOWDOWN
    results: Annotated[Path | None, opt("--results", help=RESULTS_HELP)] = None


@grouped
def report(run_ids: RunIdsArg = None, asked: Asked = Asked()) -> None:
    """What each layer costs against bare metal: throughput, one overhead with its 95 % interval, verdicts.

    Reports the latest bench unless run ids, --bench or --all say otherwise (its title says which); then the
    environment, probes, jobs, co-tenants, slow hosts and GPU health, each where the runs have it.

    On a terminal its tables are drawn to fit; piped, or with --format: Markdown, JSON or HTML.

    --bench takes an id, a unique prefix (a run's: its bench) or 'last'. --out FILE writes the report (e.g.
    reports/x.html): Markdown is also printed and its figures go as SVG files into x_files/ beside it; HTML and
    JSON are only written, and the path is printed. --equivalence PCT judges each layer equivalent to bare
    metal within ±PCT % (two one-sided tests). --compare A B sets bench B against bench A (ids, 'last',
    'prev'): per group, the change with its interval and verdict, and what changed in the environment.
    --by-host adds a row per host, VMs and containers counted on the machine under them; the fleet check
    flags a host below its peers' median beyond their spread (leave-one-out median and MAD, a modified z
    score) and by at least --fleet-slowdown %.
    """
    from dltestbed.errors import ConfigError

    kind = format_for(asked.out, asked.fmt)
    if asked.all_runs and (asked.bench or run_ids):
        raise ConfigError("--all reports every run; leave out --bench and run ids with it")
    if asked.compare:
        if asked.all_runs or asked.bench or run_ids:
            raise ConfigError("--compare names its two benches; leave out --all, --bench and run ids with it")
        if kind == "html":
            raise ConfigError("--compare: md or json (the HTML page is for one bench's runs)")
        if asked.out is not None:
            check_out(asked.out, "--out", make=False)
        _compare(asked.compare, kind, asked.out, asked.results)
        return
    if asked.equivalence is not None and not 0 < asked.equivalence < 100:
        raise ConfigError(f"--equivalence: a margin in % between 0 and 100 (got {asked.equivalence:g})")
    if not 0 <= asked.fleet_slowdown < 100:
        raise ConfigError(f"--fleet-slowdown: a % between 0 and 100 (got {asked.fleet_slowdown:g})")
    if asked.out is not None:  # before the report is composed (its figures drawn): seconds, for nothing
        check_out(asked.out, "--out", make=False)
    # after the cheap checks: composing loads the statistics and the figures' libraries
    from dltestbed.report.compose import Options
    from dltestbed.results.select import select_runs
    from dltestbed.results.store import Store

    store = Store.open(asked.results, read_only=True)
    try:
        scope_bench = None if asked.all_runs or run_ids else (asked.bench or "last")
        records = select_runs(store, run_ids, scope_bench, stderr)
        opts = Options(kind, asked.by_host, asked.equivalence, fleet_slowdown=asked.fleet_slowdown)
        text, line = write_report(store, records, _scope(records, run_ids, scope_bench), opts, asked.out)
        if asked.out is None and asked.fmt is None and sys.stdout.isatty():
            terminal(text)  # tables drawn to the terminal's width; piped or asked for: Markdown as it is
        elif asked.out is None or kind == "md":  # Markdown is printed as well as written
            print(text, end="")
        if line:
            print(line, file=sys.stderr if kind == "md" else sys.stdout)
    finally:
        store.close()


def terminal(markdown: str) -> None:
    """Markdown drawn for a terminal (tables, headings) at its width, as gh and rich apps do."""
    from rich.console import Console
    from rich.markdown import Markdown

    Console(highlight=False).print(Markdown(markdown))


def _scope(records: list, run_ids: list[str] | None, scope_bench: str | None) -> str:
    """What the report covers, for its title."""
    if run_ids:
        return f"{len(records)} chosen run(s)"
    if scope_bench is None:
        return f"every stored run ({len({r.bench_id for r in records})} bench(es))"
    latest = " (the latest; --all for every bench)" if scope_bench == "last" else ""
    return f"bench {records[0].bench_id}{latest}"


def check_out(out: Path, option: str = "--report", make: bool = True) -> None:
    """Refuse, before anything runs, a report path that cannot be written: its folder is made and a
    temporary file written and removed there (permission bits say yes to root where writes then fail). With
    `make` False nothing is made: the file is tried in the nearest folder of the path that exists."""
    from dltestbed.errors import ConfigError

    if out.is_dir():
        raise ConfigError(f"{option} {str(out)!r}: cannot write there (it is a folder)")
    folder = out.parent if make else next(p for p in (out.parent, *out.parent.parents) if p.exists())
    if not make and not folder.is_dir():
        raise ConfigError(f"{option} {str(out)!r}: cannot write there ({folder} is a file)")
    _try_writing(folder, option, out)


def check_folder(folder: Path, option: str) -> None:
    """Refuse, before anything runs, a folder that cannot be written: it is made, and a temporary file
    written and removed there."""
    from dltestbed.errors import ConfigError

    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{option} {str(folder)!r}: not a folder")
    _try_writing(folder, option, folder)


def _try_writing(folder: Path, option: str, named: Path) -> None:
    """Make `folder` and write and remove a temporary file there; a ConfigError naming `named` if not."""
    import tempfile

    from dltestbed.errors import ConfigError

    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".dltestbed-"):
            pass
    except OSError as exc:
        raise ConfigError(f"{option} {str(named)!r}: cannot write there ({exc.strerror or exc})") from None


def write_report(
    store: object, records: list, scope: str, opts: object, out: Path | None, option: str = "--out"
) -> tuple[str, str]:
    """The report's text, and when `out` is given, the text written there (a Markdown file's figures
    beside it in NAME_files/) and the line that says where it went ("" without `out`)."""
    import dataclasses

    from dltestbed.report import compose

    assert isinstance(store, compose.Store) and isinstance(opts, compose.Options)
    if out is not None and opts.fmt == "md":
        opts = dataclasses.replace(opts, figures_dir=f"{out.stem}_files")
    built = compose.build(store, records, scope, opts)
    if out is None:
        return built.text, ""
    _write(built.text, out, built.files, option)
    figs = f", {built.figures} figure(s)" + (f" in {out.parent / str(opts.figures_dir)}" if built.files else "")
    return built.text, f"report written to {out} ({out.stat().st_size / 1024:.0f} KiB{figs if built.figures else ''})"


def _compare(names: tuple[str, str], fmt: str, out: Path | None, results: Path | None) -> None:
    from dltestbed.report import compare, render
    from dltestbed.results.select import bench_id_of
    from dltestbed.results.store import Store

    store = Store.open(results, read_only=True)
    try:
        a, b = (bench_id_of(store, n, "--compare", stderr) for n in names)
        changes = compare.compare(store.runs(bench_id=a), store.runs(bench_id=b))
    finally:
        store.close()
    if fmt == "json":
        text = json.dumps({"a": a, "b": b, "changes": [c.to_dict() for c in changes]}, indent=2) + "\n"
    else:
        text = render.comparison(a, b, changes)
    print(text, end="")
    if out is not None:
        _write(text, out)


def _write(text: str, out: Path, files: dict[str, str] | None = None, option: str = "--out") -> None:
    """Write the report to `out` and its figures beside it, each through a temporary file and a rename
    (a reader never sees half a file); SVGs left in the figures folder by an earlier report are removed."""
    from dltestbed.errors import ConfigError

    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        folders = {out.parent / Path(rel).parent for rel in files or {}}
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)
            for old in folder.glob("*.svg"):
                if str(old.relative_to(out.parent)) not in (files or {}):
                    old.unlink()
        for rel, content in [*(files or {}).items(), (out.name, text)]:
            path = out.parent / rel
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(content, encoding="utf-8")
            tmp.replace(path)
    except OSError as exc:
        raise ConfigError(f"{option} {str(out)!r}: cannot write ({exc.strerror or exc})") from None
