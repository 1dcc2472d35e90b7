"""`dltestbed bench`: run the workloads and store every step. Options and presentation only: the bench
itself is `dltestbed.orchestrate.run_bench`."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ClassVar, TypeVar

import typer

from dltestbed.cli.grouped import grouped
from dltestbed.cli.options import RESULTS_SHORT, Influx, Output, wants_json
from dltestbed.panels import opt
from dltestbed.requests.bench import BenchRequest

if TYPE_CHECKING:  # annotations only: the command imports these when it runs (CLI start-up)
    from dltestbed.orchestrate import BenchObserver, BenchOutcome


EXAMPLES = """[bold]Examples[/]

  dltestbed bench --dry-run                        list the default bench
  dltestbed bench -m alexnet --targets bm,cbm --repeat 5
  dltestbed bench --suite micro --targets bm,vm    what a layer costs, and why
  dltestbed bench --inventory hosts.yml --scenario distributed
  dltestbed bench --device gpu --preset gpu --report gpu.html

Every option in full: docs/bench.md"""


@dataclass(frozen=True)
class Said:
    """Where the bench's results go and how it says them."""

    PANEL: ClassVar[str] = "Output"

    results: Annotated[Path | None, opt("--results", metavar="FILE", help=RESULTS_SHORT)] = None
    report: Annotated[Path | None, opt("--report", metavar="FILE", help="Then write the report (.html .json .md).")] = (
        None
    )
    fmt: Annotated[Output, opt("--format", metavar="FMT", help="table, or json: the runs on stdout.")] = "table"
    dry_run: Annotated[bool, opt("--dry-run", help="List the runs it would make, and stop.")] = False


@dataclass(frozen=True)
class Old:
    """The old spellings, hidden: each use is warned about."""

    PANEL: ClassVar[str] = "Old"

    timeout: Annotated[float | None, opt("--timeout", help="", replaced_by="--run-timeout")] = None
    time: Annotated[str | None, opt("--time", help="", replaced_by="--slurm-time")] = None
    sequential: Annotated[bool, opt("--sequential", help="", replaced_by="--no-parallel")] = False
    json: Annotated[bool, opt("--json", help="", replaced_by="--format json")] = False


@grouped
def bench(request: BenchRequest, said: Said, stream: Influx, old: Old) -> None:
    """Run workloads on this machine's targets, or on an inventory's hosts, and store every step.

    Bare: the quick preset 3 times on bm and a container (or bm twice: A/A).

    Exits 1 when a run failed: it is stored, with its reason.
    """
    from dltestbed.cli.runs import check_out
    from dltestbed.results import influx

    if said.report is not None:
        check_out(said.report)
    where, slurm = request.where, request.slurm  # the old spellings, where the new ones were not given
    run_timeout = where.run_timeout if where.run_timeout is not None else old.timeout
    request = replace(
        request,
        where=replace(where, parallel=where.parallel and not old.sequential, run_timeout=run_timeout),
        slurm=replace(slurm, time=slurm.time or old.time),
        results=said.results,
        stream=influx.settings(stream.url, stream.org, stream.bucket, stream.token_file),
        dry_run=said.dry_run,
    )
    present(run(request), said.report, said.results, wants_json(said.fmt, old.json))


def run(request: BenchRequest) -> BenchOutcome:
    """Run the bench with progress bars on stderr; Ctrl-C is exit 130, said in one line."""
    from dltestbed import orchestrate as orch

    return run_observed(lambda observer: orch.run_bench(request, observer))


T = TypeVar("T")


def run_observed(call: Callable[[BenchObserver], T]) -> T:
    """A library call with progress bars on stderr; Ctrl-C (BenchInterrupted) is exit 130, said in one line."""
    from rich.console import Console

    from dltestbed import orchestrate as orch
    from dltestbed.cli.progress import RichObserver

    with RichObserver(Console(stderr=True, soft_wrap=True, highlight=False)) as observer:
        try:
            return call(observer)
        except orch.BenchInterrupted as exc:
            observer.say(str(exc))
            raise typer.Exit(130) from None


def present(outcome: BenchOutcome, report: Path | None, results: Path | None, as_json: bool) -> None:
    """--dry-run's list on stdout; else the bench's closing notes, its summary and report line on stderr,
    its runs as JSON on stdout (--format json); exit 1 naming the first failed run."""
    from dltestbed.errors import WorkloadError

    if outcome.planned:
        print("\n".join(outcome.planned))
        return
    for note in outcome.notes:
        typer.echo(note, err=True)
    if report is not None:
        typer.echo(_report(outcome.bench_id, report, results), err=True)
    typer.echo(summary(outcome, results), err=True)
    if as_json:
        print(json.dumps([r.to_dict() for r in outcome.records], indent=2))
    if outcome.failed:
        first = outcome.failed[0]
        raise WorkloadError(
            f"{len(outcome.failed)} of {len(outcome.records)} run(s) failed; first: {first.model} rep "
            f"{first.repetition}: {first.reason} (log: {first.log_path})"
        )


def summary(outcome: BenchOutcome, results: Path | None) -> str:
    """The bench's last line: its runs, how they ended, how long they took, and what to run next."""
    from dltestbed.cli.progress import duration
    from dltestbed.results.ids import short

    runs = [r for r in outcome.records if r.measured]
    ok = sum(r.status == "ok" for r in runs)
    took = sum(r.elapsed_seconds or 0.0 for r in runs)
    where = f" --results {results}" if results is not None else ""
    return (
        f"bench {short(outcome.bench_id)}: {len(runs)} run(s), {ok} ok, {len(runs) - ok} failed, "
        f"{duration(took)} of runs; next: dltestbed report --bench {short(outcome.bench_id)}{where}"
    )


def _report(bench_id: str, out: Path, results: Path | None) -> str:
    """Write this bench's report to `out` (the format its suffix names); the line that says where."""
    from dltestbed.cli.runs import format_for, write_report
    from dltestbed.report.compose import Options
    from dltestbed.results.store import Store

    store = Store.open(results, read_only=True)
    try:
        records = store.runs(bench_id=bench_id)
        return write_report(store, records, f"bench {bench_id}", Options(format_for(out, None)), out, "--report")[1]
    finally:
        store.close()
