"""A newcomer's first hour (issue 31): a reference --init would not refuse, one number per fact, `runs`
in 80 columns with ids `report` takes, tables on a terminal, read-only commands that create nothing, a
bench that can be previewed and ends with a summary, one voice for errors, old spellings that still work
with a warning, and help that fits."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from dltestbed.cli.progress import RichObserver, duration
from dltestbed.results.ids import short
from dltestbed.results.store import Store
from tests.conftest import make_run, one_error_line, run_cli

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _bench(results: Path, bench_id: str, bm: list[float], cbm: list[float], day: str = "01") -> list[str]:
    """A stored bench of bm and cbm alexnet runs, paired by repetition; the run ids."""
    store = Store.open(results)
    ids = []
    for kind, values in (("bm", bm), ("cbm", cbm)):
        for rep, ips in enumerate(values, 1):
            r = make_run(
                target_kind=kind,
                bench_id=bench_id,
                repetition=rep,
                images_per_sec=ips,
                elapsed_seconds=10.0,
                status="ok",
                host="node-a17.example.org",
                started_at=f"2026-01-{day}T00:00:{rep:02d}+00:00",
            )
            store.save_run(r)
            ids.append(r.id)
    store.close()
    return ids


def _in_terminal(args: list[str], columns: int = 80) -> str:
    """What `dltestbed ARGS` draws on an 80-column terminal (a pseudo-terminal, via script(1))."""
    line = " ".join([sys.executable, "-m", "dltestbed", *args])
    proc = subprocess.run(
        ["script", "-qec", f"stty cols {columns}; {line}", "/dev/null"],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "COLUMNS": str(columns), "TERM": "xterm"},
        timeout=120,
    )
    return ANSI.sub("", proc.stdout).replace("\r", "")


# 1. validate --init never writes a file validate refuses
def test_init_refuses_a_bench_too_noisy_to_be_a_reference(results: Path, tmp_path: Path) -> None:
    _bench(results, "b-noisy", [100.0, 140.0, 60.0], [90.0, 150.0, 40.0])
    ref = tmp_path / "ref.yml"
    proc = run_cli("validate", "--init", "--reference", str(ref), "--results", str(results))
    line = one_error_line(proc)
    assert "bench b-noisy is too noisy to be a reference" in line and "nothing written" in line
    assert "dltestbed bench --repeat 5 --steps 100" in line  # what to run instead
    assert not ref.exists()
    _bench(results, "b-steady", [100.0, 101.0, 99.0], [95.0, 96.0, 94.5], day="02")
    assert run_cli("validate", "--init", "--reference", str(ref), "--results", str(results)).returncode == 0
    proc = run_cli("validate", "--reference", str(ref), "--results", str(results))
    assert proc.returncode == 0, proc.stdout + proc.stderr


# 2. one fact, one number: the overhead and its interval, bm the baseline, validate's img/s the report's
def test_one_overhead_per_row_and_validate_reads_the_reports_mean(results: Path, tmp_path: Path) -> None:
    _bench(results, "b-one", [100.0, 104.0, 96.0, 101.0], [90.0, 97.0, 80.0, 93.0])
    text = run_cli("report", "--results", str(results)).stdout
    rows: dict[str, str] = {}
    for line in text.splitlines():  # the groups' table: the first row of each kind
        if line.startswith("| "):
            rows.setdefault(line.split(" | ")[0].strip("| "), line)
    assert rows["bm"].rstrip().endswith("| baseline |")
    main = rows["cbm"].rstrip(" |").rsplit(" | ", 1)[1]  # the groups' table: the last cell
    assert re.fullmatch(r"-?\d+\.\d \[-?\d+\.\d, -?\d+\.\d\]", main), main
    verdicts = [line for line in text.splitlines() if line.startswith("| cbm | alexnet | 8 | 64 | 4 | paired")]
    assert len(verdicts) == 1 and f"| {main} |" in verdicts[0]  # the same number in both tables
    assert "the geometric mean of the per-repetition ratios" in text  # which mean it is, said
    mean = rows["cbm"].split(" | ")[3]  # kind | model | runs | img/s mean
    ref = tmp_path / "ref.yml"
    ref.write_text(
        "checks: [{name: c, match: {kind: cbm, model: alexnet}, images_per_sec: 50, lower_tolerance_percent: 10}]"
    )
    judged = json.loads(
        run_cli("validate", "--reference", str(ref), "--format", "json", "--results", str(results)).stdout
    )
    assert judged["judgements"][0]["evidence"].startswith(f"mean {mean} img/s")


# 3. runs in 80 columns, with ids report takes; benches listed; prefixes resolved
def test_runs_fits_80_columns_with_ids_report_accepts(results: Path) -> None:
    ids = _bench(results, "b-20260101-000000-aaa111", [100.0, 101.0], [95.0, 96.0])
    _bench(results, "b-20260102-000000-bbb222", [100.0, 99.0], [97.0, 98.0], day="02")
    proc = run_cli("runs", "--results", str(results), "--bench", "aaa1", env={"COLUMNS": "80"})
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and all(len(line) <= 80 for line in lines), proc.stdout
    assert lines[1].split() == ["id", "bench", "started", "target", "model", "mode", "bs", "px", "rep", "img/s"]
    row = lines[2].split()
    assert (
        row[0] in {short(i) for i in ids}
        and row[1] == "aaa111"
        and row[-1] in ("100.0", "95.0")
        and row[-4:-1] == ["8", "64", "1"]
    )
    assert run_cli("report", row[0], "--results", str(results)).returncode == 0  # the id shown is one report takes
    benches = run_cli("runs", "--benches", "--results", str(results), env={"COLUMNS": "80"}).stdout.splitlines()
    assert [b.split()[0] for b in benches[2:]] == ["aaa111", "bbb222"]
    assert "b-20260102-000000-bbb222" in run_cli("runs", "--benches", "--no-trunc", "--results", str(results)).stdout
    line = one_error_line(run_cli("report", "--bench", "b-2026", "--results", str(results)))
    assert "--bench: 'b-2026' names 2 benchs (aaa111, bbb222); give more of its id" in line
    line = one_error_line(run_cli("report", "--bench", "c5975f", "--results", str(results)))
    assert "--bench: no bench 'c5975f' in" in line and "the latest: bbb222, aaa111" in line


# 4. report on a terminal: tables that fit; piped: Markdown
def test_report_draws_tables_on_a_terminal_and_markdown_when_piped(results: Path) -> None:
    _bench(results, "b-t", [100.0, 104.0, 96.0], [90.0, 97.0, 80.0])
    drawn = _in_terminal(["report", "--results", str(results)])
    assert "alexnet" in drawn and "baseline" in drawn
    assert "|---|" not in drawn and max(len(line) for line in drawn.splitlines()) <= 80, drawn
    piped = run_cli("report", "--results", str(results)).stdout
    assert "|---|" in piped


# 5. read-only commands create nothing
def test_read_only_commands_create_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "none.sqlite"
    for args in (["report"], ["runs"], ["validate", "--init", "--reference", str(tmp_path / "r.yml")]):
        line = one_error_line(run_cli(*args, "--results", str(missing)))
        assert f"no results store at '{missing}'" in line
    nested = tmp_path / "a" / "b" / "c.sqlite"
    assert "no results store at" in one_error_line(run_cli("runs", "--results", str(nested)))
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    assert "cannot be read (it is empty)" in one_error_line(run_cli("report", "--results", str(empty)))
    text = tmp_path / "notes.sqlite"
    text.write_text("not a database")
    assert "cannot be read (it is not an SQLite database)" in one_error_line(run_cli("runs", "--results", str(text)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.sqlite", "notes.sqlite"]
    assert empty.stat().st_size == 0


# 6. a bench can be previewed, counts its runs and ends with a summary
def test_dry_run_lists_the_runs_and_stores_nothing(results: Path) -> None:
    proc = run_cli(
        "bench",
        "--dry-run",
        "-m",
        "alexnet",
        "-m",
        "resnet50",
        "--targets",
        "bm",
        "--repeat",
        "2",
        "--results",
        str(results),
    )
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0, proc.stderr
    assert lines[:2] == [
        "rep 1  bm   alexnet train synthetic 64px bs8 auto+20 steps float32",
        "rep 1  bm   resnet50 train synthetic 64px bs8 auto+20 steps float32",
    ]
    assert lines[-1] == "4 run(s); none was run (--dry-run)" and len(lines) == 5
    assert not results.exists()


def test_progress_counts_runs_and_says_time_left() -> None:
    now = [0.0]
    obs = RichObserver(Console(file=io.StringIO(), width=80), clock=lambda: now[0])
    obs.expect(4, at_most=False)
    now[0] = 30.0
    assert obs.overall() == "run 1/4 · 30 s elapsed"
    with obs:
        run = make_run(status="ok", images_per_sec=10.0, elapsed_seconds=1.0)
        obs.begin(run)
        now[0] = 90.0
        obs.end(run)
    assert obs.overall() == "run 2/4 · 1 min 30 s elapsed · about 4 min 30 s left"
    assert duration(3725) == "1 h 02 min"


def test_the_bench_ends_with_a_summary_that_says_what_next() -> None:
    from dltestbed.cli.bench import summary
    from dltestbed.orchestrate import BenchOutcome

    runs = (make_run(status="ok", elapsed_seconds=70.0), make_run(status="failed", elapsed_seconds=5.0))
    out = BenchOutcome("b-20260101-000000-abc123", ("bm",), runs, (), Path("r.sqlite"))
    assert summary(out, None) == (
        "bench abc123: 2 run(s), 1 ok, 1 failed, 1 min 15 s of runs; next: dltestbed report --bench abc123"
    )


# 8. old spellings still work, saying what replaces them
def test_old_spellings_work_with_a_deprecation_line(results: Path, tmp_path: Path) -> None:
    _bench(results, "b-old", [100.0], [90.0])
    proc = run_cli("runs", "--json", "--results", str(results))
    assert proc.returncode == 0 and len(json.loads(proc.stdout)) == 2
    assert proc.stderr.strip() == "warning: --json is deprecated and goes in dltestbed 0.3; use --format json"
    proc = run_cli("data", "make", "--out", str(tmp_path / "d"), "--size", "16", "--classes", "1")
    assert proc.returncode == 0 and "of 16x16 px" in proc.stdout
    assert "--out is deprecated" in proc.stderr and "use --image-size" in proc.stderr
    proc = run_cli("results", "push", "--results", str(results))
    assert "warning: results push is deprecated and goes in dltestbed 0.3; use push" in proc.stderr


def _commands() -> list[tuple[str, object]]:
    from typer.main import get_command

    from dltestbed.cli import app
    from dltestbed.cli.helpstyle import tidy

    root = get_command(app)
    tidy(root)
    out: list[tuple[str, object]] = []

    def walk(path: str, cmd: object) -> None:
        out.append((path, cmd))
        for name, sub in getattr(cmd, "commands", {}).items():
            if not getattr(sub, "hidden", False):
                walk(f"{path} {name}".strip(), sub)

    walk("", root)
    return out


def test_help_speaks_in_words_not_python_types() -> None:
    for path, _ in _commands():
        text = run_cli(*path.split(), "--help", env={"COLUMNS": "200"}).stdout
        leaks = re.findall(r"<(?:bool|str|int|float|path|list\[[a-z]+\])>", text)
        assert not leaks, f"dltestbed {path} --help shows {leaks}"


# 9. bench --help fits
def test_bench_help_fits_in_about_120_lines_with_examples() -> None:
    text = run_cli("bench", "--help", env={"COLUMNS": "80"}).stdout
    lines = text.splitlines()
    assert len(lines) <= 120 and max(len(line) for line in lines) <= 80
    assert "Examples" in text and "dltestbed bench --dry-run" in text
    assert lines.index(next(x for x in lines if "--targets" in x)) < 50  # not the 29th option of one panel
