"""`dltestbed validate`: a bench judged against a reference of expected values; pass/fail with evidence."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from dltestbed.cli.options import RESULTS_HELP


def validate(
    reference: Path | None = typer.Option(None, help="The reference YAML to judge against (see README: validate)."),
    init: bool = typer.Option(
        False,
        "--init",
        help="Write a reference from this bench instead (values and tolerances from its measured spread); needs --out.",
    ),
    out: Path | None = typer.Option(None, help="With --init: the reference file to write."),
    bench: str = typer.Option("last", help="The bench to judge (an id, or 'last')."),
    junit: Path | None = typer.Option(None, help="Also write the judgements as JUnit XML here."),
    as_json: bool = typer.Option(False, "--json", help="Print the judgements as JSON instead of a table."),
    results: Path | None = typer.Option(None, help=RESULTS_HELP),
) -> None:
    """Judge a bench against expected images/sec and maximum overheads: pass, fail or cannot judge.

    Each judgement comes from a 95 % interval: pass when it lies on the right side of the limit, fail
    when it lies wholly on the wrong side, cannot judge when it straddles it or runs are too few.
    Always, whatever the reference asks: the probes' checked results and the --deterministic runs' losses
    (a wrong answer is a failing case).
    Exits 0 only when every check passes; 1 when any fails; 3 when none fails but some cannot be judged.
    """
    from dltestbed.cli.runs import _select
    from dltestbed.errors import ConfigError
    from dltestbed.report import analysis
    from dltestbed.report import validate as v
    from dltestbed.results.store import Store

    if init == (reference is not None):
        raise ConfigError("give --reference FILE to judge, or --init --out FILE to write one")
    if init and out is None:
        raise ConfigError("--init writes a reference: give --out FILE")
    ref = None
    if reference is not None:
        try:
            text = reference.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"--reference {str(reference)!r}: cannot read ({exc.strerror})") from None
        ref = v.parse_reference(text, str(reference))
    store = Store.open(results, read_only=True)
    try:
        runs = _select(store, None, bench)
        a = analysis.read(store, runs, scope=f"bench {runs[0].bench_id}")
    finally:
        store.close()
    if init:
        assert out is not None
        _write_reference(v.init_reference(a), runs[0].bench_id, out)
        return
    assert ref is not None
    judged = v.judge(ref, a)
    if junit is not None:
        try:
            junit.parent.mkdir(parents=True, exist_ok=True)
            junit.write_text(v.junit_xml(judged), encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"--junit {str(junit)!r}: cannot write ({exc.strerror})") from None
    if as_json:
        print(json.dumps({"bench": runs[0].bench_id, "judgements": [j.to_dict() for j in judged]}, indent=2))
    else:
        print(f"# dltestbed validate: bench {runs[0].bench_id} against {reference}\n")
        print("| check | on | status | evidence |\n|---|---|---|---|")
        for j in judged:
            print(f"| {j.name} | {j.what} | {j.status} | {j.evidence} |")
    failed = sum(j.status == v.FAIL for j in judged)
    undecided = sum(j.status == v.UNDECIDED for j in judged)
    typer.echo(f"{len(judged) - failed - undecided} passed, {failed} failed, {undecided} cannot be judged", err=True)
    if failed:
        raise typer.Exit(1)
    if undecided:
        raise typer.Exit(3)


def _write_reference(data: dict, bench_id: str, out: Path) -> None:
    """The reference --init made, as YAML with a header naming its bench."""
    import yaml

    from dltestbed.errors import ConfigError

    head = f"# written by `dltestbed validate --init` from bench {bench_id}\n"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(head + yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--out {str(out)!r}: cannot write ({exc.strerror})") from None
    typer.echo(f"reference with {len(data['checks'])} check(s) from bench {bench_id} written to {out}", err=True)
