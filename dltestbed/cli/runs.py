"""`dltestbed runs` and `dltestbed report`: what is stored, and what it means."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path

import typer

from dltestbed.cli.options import RESULTS_HELP


class FormatOpt(StrEnum):
    md = "md"
    json = "json"


def _select(store: object, ids: list[str] | None, bench: str | None) -> list:
    from dltestbed.errors import ConfigError
    from dltestbed.results.store import Store

    assert isinstance(store, Store)
    bench_id = store.last_bench_id() if bench == "last" else bench
    records = store.runs(ids=ids or None, bench_id=bench_id)
    if ids:
        missing = sorted(set(ids) - {r.id for r in records})
        if missing:
            raise ConfigError(f"run id(s) not in {store.path}: {', '.join(missing)} (see `dltestbed runs`)")
    if not records:
        what = f"bench {bench_id}" if bench_id else "runs"
        raise ConfigError(f"no {what} in {store.path}; run `dltestbed bench` first")
    return records


def runs(
    results: Path | None = typer.Option(None, help=RESULTS_HELP),
    bench: str | None = typer.Option(None, help="Only this bench's runs ('last': the latest bench)."),
    as_json: bool = typer.Option(False, "--json", help="Print the runs as JSON."),
) -> None:
    """List stored runs, oldest first."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from dltestbed.results.store import Store

    store = Store.open(results)
    try:
        records = _select(store, None, bench)
    finally:
        store.close()
    if as_json:
        print(json.dumps([r.to_dict() for r in records], indent=2))
        return
    table = Table(title=f"runs in {store.path}")
    cols = ["id", "started (UTC)", "scenario", "kind", "host", "model", "data", "mode", "batch", "size",
            "rep", "status", "img/s"]  # fmt: skip
    for c in cols:
        table.add_column(c, justify="right" if c in ("batch", "size", "rep", "img/s") else "left", no_wrap=True)
    for r in records:
        status = "[green]ok[/]" if r.status == "ok" else f"[red]{r.status}[/]"
        ips = f"{r.images_per_sec:.1f}" if r.images_per_sec is not None else "—"
        table.add_row(r.id, r.started_at.replace("+00:00", ""), r.scenario, r.target_kind, r.host, r.model,
                      r.data, r.mode, str(r.batch_size), str(r.image_size), str(r.repetition), status, ips)  # fmt: skip
    console = Console(width=None if sys.stdout.isatty() else 250, soft_wrap=True, highlight=False)
    console.print(table)
    for r in records:
        if r.status == "failed":
            console.print(f"[red]{r.id}[/]: {escape(r.reason or '')}")


def report(
    run_ids: list[str] | None = typer.Argument(None, help="Runs to include (default: the latest bench's)."),
    fmt: FormatOpt = typer.Option(FormatOpt.md, "--format", help="md (Markdown table) or json."),
    bench: str | None = typer.Option(None, help="Only this bench's runs (default and 'last': the latest bench)."),
    all_runs: bool = typer.Option(False, "--all", help="Every stored run, of every bench."),
    equivalence: float | None = typer.Option(None, help="Also judge each layer equivalent to bare metal within "
                                             "±this % (two one-sided tests), e.g. 2."),
    compare: tuple[str, str] | None = typer.Option(None, "--compare", metavar="A B", help="Bench B against bench A "
                                                   "(ids, 'last', 'prev'): per group, the change with its interval "
                                                   "and verdict, and what changed in the environment."),
    out: Path | None = typer.Option(None, help="Also write the report to this file (e.g. reports/x.md)."),
    by_host: bool = typer.Option(False, "--by-host", help="A row per host too: find the node slower than its peers "
                                 "(VMs and containers count on the machine under them)."),
    results: Path | None = typer.Option(None, help=RESULTS_HELP),
) -> None:
    """Statistics over repetitions: images/sec and elapsed time (mean, min, max, std), overhead % vs bm.

    Reports the latest bench unless run ids, --bench or --all say otherwise (its title says which).
    One row per target kind, scenario, model, data, mode, device, batch size, image size, warm-up and
    timed steps, and contention; each layer's overhead against bare metal with a 95 % interval and a
    verdict in words; then distributed jobs (total throughput, scaling efficiency) and shared pairs
    (the co-tenant's effect). JSON: {"scope": ..., "groups": [...], "distributed": [...], "shared": [...]}.
    """
    from dltestbed.errors import ConfigError
    from dltestbed.report import fleet, jobs, render, stats
    from dltestbed.results.store import Store

    if all_runs and (bench or run_ids):
        raise ConfigError("--all reports every run; leave out --bench and run ids with it")
    if compare:
        if all_runs or bench or run_ids:
            raise ConfigError("--compare names its two benches; leave out --all, --bench and run ids with it")
        _compare(compare, fmt, out, results)
        return
    if equivalence is not None and not 0 < equivalence < 100:
        raise ConfigError(f"--equivalence: a margin in % between 0 and 100 (got {equivalence:g})")
    store = Store.open(results)
    try:
        scope_bench = None if all_runs or run_ids else (bench or "last")
        records = _select(store, run_ids, scope_bench)
        timed = {r.id: [s.images_per_sec for s in store.steps(r.id) if s.phase == "timed"] for r in records}
    finally:
        store.close()
    if run_ids:
        scope = f"{len(records)} chosen run(s)"
    elif scope_bench is None:
        scope = f"every stored run ({len({r.bench_id for r in records})} bench(es))"
    else:
        latest = " (the latest; --all for every bench)" if scope_bench == "last" else ""
        scope = f"bench {records[0].bench_id}{latest}"
    groups = stats.summarise(records, by_host=by_host, equivalence=equivalence)
    dist, shared = jobs.distributed(records), jobs.shared(records)
    flags, compared = fleet.fleet(groups) if by_host else ([], 0)
    steady = fleet.steady(records, timed)
    if fmt == FormatOpt.json:
        text = render.as_json(groups, dist, shared, scope=scope, fleet=flags,
                              steady=[{"run": r.id, "flags": w} for r, w in steady]) + "\n"  # fmt: skip
    else:
        text = render.markdown(groups, title=f"dltestbed report: {scope}", dist=dist, shared=shared,
                               equivalence=equivalence, fleet_flags=flags, fleet_compared=compared,
                               steady_flags=steady)  # fmt: skip
    _write(text, out)


def _bench_id(store: object, name: str) -> str:
    """A bench id from an id, 'last' or 'prev' (the one before the last)."""
    from dltestbed.errors import ConfigError
    from dltestbed.results.store import Store

    assert isinstance(store, Store)
    ids = store.bench_ids()
    if name in ("last", "prev"):
        want = 1 if name == "last" else 2
        if len(ids) < want:
            raise ConfigError(f"--compare {name}: {store.path} holds {len(ids)} bench(es)")
        return ids[-want]
    if name not in ids:
        raise ConfigError(f"--compare: no bench {name!r} in {store.path} (see `dltestbed runs`)")
    return name


def _compare(names: tuple[str, str], fmt: FormatOpt, out: Path | None, results: Path | None) -> None:
    from dltestbed.report import compare, render
    from dltestbed.results.store import Store

    store = Store.open(results)
    try:
        a, b = (_bench_id(store, n) for n in names)
        changes = compare.compare(store.runs(bench_id=a), store.runs(bench_id=b))
    finally:
        store.close()
    if fmt == FormatOpt.json:
        text = json.dumps({"a": a, "b": b, "changes": [c.to_dict() for c in changes]}, indent=2) + "\n"
    else:
        text = render.comparison(a, b, changes)
    _write(text, out)


def _write(text: str, out: Path | None) -> None:
    """Print the report, and write it to `out` too when given."""
    from dltestbed.errors import ConfigError

    if out is not None:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"--out {str(out)!r}: cannot write ({exc.strerror})") from None
    print(text, end="")
