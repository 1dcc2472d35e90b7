"""`dltestbed validate`: a bench judged against a reference of expected values; pass/fail with evidence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from dltestbed.cli import deprecated
from dltestbed.cli.options import OUTPUT_HELP, RESULTS_HELP, Output, wants_json

if TYPE_CHECKING:  # annotations only: the command imports it when it runs (CLI start-up)
    from dltestbed.report.validate import Reference


def validate(
    reference: Path | None = typer.Option(None, metavar="FILE", help="The reference YAML to judge against."),
    init: bool = typer.Option(False, "--init", help="Write --reference from the bench instead."),
    bench: str = typer.Option("last", metavar="ID", help="An id, a unique prefix, or 'last' (default)."),
    junit: Path | None = typer.Option(None, metavar="FILE", help="Also write the judgements as JUnit XML."),
    fmt: Output = typer.Option("table", "--format", metavar="FMT", help=OUTPUT_HELP),
    results: Path | None = typer.Option(None, metavar="FILE", help=RESULTS_HELP),
    out: Path | None = deprecated.param(None, "--out", "--init --reference FILE"),
    as_json: bool = deprecated.param(False, "--json", "--format json"),
) -> None:
    """Judge a bench against expected images/sec and maximum overheads: pass, fail or cannot judge.

    Each judgement comes from a 95 % interval: pass when it lies on the right side of the limit, fail
    when it lies wholly on the wrong side, cannot judge when it straddles it or runs are too few.
    Always, whatever the reference asks: the probes' checked results and the --deterministic runs' losses
    (a wrong answer is a failing case).

    --init writes the reference instead: the bench's values, with tolerances from its spread. A bench too
    noisy to be a reference is refused, with what to run instead.

    Exits 0 only when every check passes; 1 when any fails; 3 when none fails but some cannot be judged.
    """
    from dltestbed.cli.runs import stderr
    from dltestbed.errors import ConfigError
    from dltestbed.report import analysis, validate_init
    from dltestbed.report import validate as v
    from dltestbed.results.select import select_runs
    from dltestbed.results.store import Store

    if init and out is not None:
        reference = reference or out
    if reference is None:
        raise ConfigError("--reference FILE: the reference to judge against (or to write, with --init)")
    ref = None if init else _reference(reference)
    store = Store.open(results, read_only=True)
    try:
        runs = select_runs(store, None, bench, stderr)
        a = analysis.read(store, runs, scope=f"bench {runs[0].bench_id}")
    finally:
        store.close()
    if init:
        _write_reference(validate_init.init_reference(a), runs[0].bench_id, reference)
        return
    assert ref is not None
    judged = v.judge(ref, a)
    if junit is not None:
        _write_junit(junit, v.junit_xml(judged))
    if wants_json(fmt, as_json):
        print(json.dumps({"bench": runs[0].bench_id, "judgements": [j.to_dict() for j in judged]}, indent=2))
    else:
        _table(judged, runs[0].bench_id, reference)
    failed = sum(j.status == v.FAIL for j in judged)
    undecided = sum(j.status == v.UNDECIDED for j in judged)
    typer.echo(f"{len(judged) - failed - undecided} passed, {failed} failed, {undecided} cannot be judged", err=True)
    if failed:
        raise typer.Exit(1)
    if undecided:
        raise typer.Exit(3)


def _reference(path: Path) -> Reference:
    """The reference to judge against, read and checked; one line when it cannot be read."""
    from dltestbed.errors import ConfigError
    from dltestbed.report import validate as v

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"--reference {str(path)!r}: cannot read ({exc.strerror}); write one from a bench you trust with --init"
        ) from None
    return v.parse_reference(text, str(path))


def _write_junit(path: Path, xml: str) -> None:
    """The judgements as JUnit XML at `path`; one line when it cannot be written."""
    from dltestbed.errors import ConfigError

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(xml, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--junit {str(path)!r}: cannot write ({exc.strerror})") from None


def _table(judged: list, bench_id: str, reference: Path) -> None:
    """The judgements: Markdown when piped, drawn to fit on a terminal."""
    import sys

    from dltestbed.cli.runs import terminal

    lines = [f"# dltestbed validate: bench {bench_id} against {reference}", ""]
    lines += ["| check | on | status | evidence |", "|---|---|---|---|"]
    lines += [f"| {j.name} | {j.what} | {j.status} | {j.evidence} |" for j in judged]
    text = "\n".join(lines) + "\n"
    if sys.stdout.isatty():
        terminal(text)
    else:
        print(text, end="")


def _write_reference(data: dict, bench_id: str, out: Path) -> None:
    """The reference --init made, as YAML with a header naming its bench."""
    import yaml

    from dltestbed.errors import ConfigError

    head = f"# written by `dltestbed validate --init` from bench {bench_id}\n"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(head + yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--reference {str(out)!r}: cannot write ({exc.strerror})") from None
    typer.echo(f"reference with {len(data['checks'])} check(s) from bench {bench_id} written to {out}", err=True)
