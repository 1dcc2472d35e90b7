"""Shared helpers: run the real CLI as a subprocess, make small real datasets."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dltestbed.results.records import RunRecord, new_id

DATA = Path(__file__).parent / "data"
CAPTURED = DATA / "workload"

_TIER_SECONDS: dict[str, float] = {}
_TIER_TESTS: dict[str, set[str]] = {}
_MODULE_SECONDS: dict[str, float] = {}  # per test file: where a tier's time goes, for cutting CI's time
_CLI_CALLS: list[tuple[float, str]] = []  # (seconds, test and command) of every run_cli: where a tier's time goes
_FAILED_AT: list[str] = []  # per failed test: where it stopped, and the commands it ran (CI's log keeps its tail)


def _stop(signum: int, frame: object) -> None:
    """The first stop (Ctrl-C, or SIGTERM from scripts/test.sh or a time limit): raised as Ctrl-C, so the session
    ends with every fixture's teardown (labs, clusters, VMs); a later one is said and let go by, so that teardown is
    not cut short (SIGKILL still ends it). Python handlers: no child started meanwhile inherits them."""
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, _stopping)
    raise KeyboardInterrupt(f"stopped by signal {signum}")


def _stopping(signum: int, frame: object) -> None:
    print(f"signal {signum}: stopping already, the teardown goes on (SIGKILL ends it)", file=sys.stderr)


def pytest_configure(config: pytest.Config) -> None:
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, _stop)


def _tier(report: pytest.TestReport) -> str:
    """A test's tier: its folder under tests/ (unit, tf, lab, browser); `lab, slow` for the VM tests."""
    parts = Path(report.fspath).parts
    tier = parts[-2] if len(parts) > 1 else "?"
    return f"{tier}, slow" if "slow" in report.keywords else tier


def _frames(report: pytest.TestReport) -> list[str]:
    """`file:line` of each frame the failure passed through in tests/ or dltestbed/, and the innermost
    frame wherever it is (for a timeout: where the test was waiting), outermost first."""
    chain = getattr(report.longrepr, "chain", None)
    entries = chain[-1][0].reprentries if chain else []
    locs = [e.reprfileloc for e in entries if getattr(e, "reprfileloc", None) is not None]
    ours = [f"{loc.path}:{loc.lineno}" for loc in locs if str(loc.path).startswith(("tests/", "dltestbed/"))]
    if locs and (not ours or ours[-1] != f"{locs[-1].path}:{locs[-1].lineno}"):
        ours.append(f"{locs[-1].path}:{locs[-1].lineno} ({locs[-1].message})")
    return ours


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Sum each tier's wall time (setup, call and teardown: image builds and VM boots sit in fixtures);
    note where each failure stopped."""
    tier = _tier(report)
    _TIER_SECONDS[tier] = _TIER_SECONDS.get(tier, 0.0) + report.duration
    _TIER_TESTS.setdefault(tier, set()).add(report.nodeid)
    module = report.nodeid.split("::", 1)[0]
    _MODULE_SECONDS[module] = _MODULE_SECONDS.get(module, 0.0) + report.duration
    if report.failed:
        name = report.nodeid.rsplit("::", 1)[-1]
        ran = [f"  {s:7.1f}s {what.split(': ', 1)[1]}" for s, what in _CLI_CALLS if what.startswith(f"{name}: ")]
        where = " <- ".join(reversed(_frames(report))) or "?"
        _FAILED_AT.append(f"{report.nodeid} ({report.when}, {report.duration:.0f} s): at {where}")
        _FAILED_AT.extend(ran)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The time each tier took, for CI's log (the issue notes quote it)."""
    if not _TIER_SECONDS:
        return
    terminalreporter.section("time per tier")
    for tier, seconds in sorted(_TIER_SECONDS.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"{tier:12} {len(_TIER_TESTS[tier]):4} tests {seconds / 60:6.1f} min")
    terminalreporter.write_line(
        f"{'all':12} {sum(map(len, _TIER_TESTS.values())):4} tests {sum(_TIER_SECONDS.values()) / 60:6.1f} min"
    )
    terminalreporter.section("slowest test files")
    for module, seconds in sorted(_MODULE_SECONDS.items(), key=lambda kv: -kv[1])[:15]:
        terminalreporter.write_line(f"{seconds / 60:6.1f} min {module}")
    if _FAILED_AT:
        terminalreporter.section("where each failure was")
        for line in _FAILED_AT:
            terminalreporter.write_line(line)
    if _CLI_CALLS:
        terminalreporter.section("slowest dltestbed commands")
        for seconds, what in sorted(_CLI_CALLS, reverse=True)[:15]:
            terminalreporter.write_line(f"{seconds:7.1f}s {what}")


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`dltestbed ARGS` in a fresh process, as a user runs it."""
    import time

    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    started = time.monotonic()
    try:
        return subprocess.run(
            [sys.executable, "-m", "dltestbed", *args],
            capture_output=True,
            text=True,
            env=full_env,
            timeout=timeout,
        )
    finally:
        test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0].rsplit("::", 1)[-1]
        _CLI_CALLS.append((time.monotonic() - started, f"{test}: dltestbed {' '.join(args)[:110]}"))


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """Assert the process failed with exactly one `error:` line and no traceback; return it."""
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """A fresh results store path."""
    return tmp_path / "results.sqlite"


@pytest.fixture(scope="session")
def dataset_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real JPEG dataset: 3 classes × 8 images of 48 px."""
    from dltestbed import dataset

    root = tmp_path_factory.mktemp("dataset")
    root.chmod(0o755)  # mktemp makes it 0700: containers' unprivileged user reads it through a mount
    dataset.make(root, classes=3, images_per_class=8, size=48)
    return root


def make_run(**fields: object) -> RunRecord:
    """A RunRecord with plausible defaults (a unique id each call); fields override them."""
    values: dict[str, object] = dict(
        id=new_id("r"),
        bench_id="b",
        started_at="2026-01-01T00:00:00+00:00",
        scenario="single",
        target_kind="bm",
        target_name="local",
        host="h",
        model="alexnet",
        data="synthetic",
        mode="train",
        device="auto",
        batch_size=8,
        image_size=64,
        warmup=1,
        steps=3,
        repetition=1,
    )
    values.update(fields)
    return RunRecord(**values)  # type: ignore[arg-type]


ENDLESS = [
    "--model",
    "alexnet",
    "--image-size",
    "32",
    "--batch-size",
    "2",
    "--warmup",
    "1",
    "--steps",
    "100000",
    "--repeat",
    "1",
]


def start_endless_bench(results: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`dltestbed bench` with a run that would go on for hours, in the background."""
    return subprocess.Popen(
        [sys.executable, "-m", "dltestbed", "bench", *args, *ENDLESS, "--results", str(results)],
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_steps(results: Path, at_least: int, runs: int = 1, timeout: float = 180) -> bool:
    """Wait until `runs` runs each have more than `at_least` steps stored; False on timeout."""
    import contextlib
    import sqlite3
    import time

    sql = "SELECT count(*) FROM (SELECT run_id FROM steps GROUP BY run_id HAVING count(*) > ?)"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if results.exists():
            with sqlite3.connect(results) as db, contextlib.suppress(sqlite3.OperationalError):
                if db.execute(sql, (at_least,)).fetchone()[0] >= runs:
                    return True
        time.sleep(0.5)
    return False


def wait_while_running(results: Path, host: str, timeout: float) -> float:
    """Seconds until `host`'s run in the store is no longer `running` (a lost host's run stored failed), or
    `timeout`: what a test times when the bench's end depends on another host's speed."""
    import sqlite3
    import time

    start = time.monotonic()
    while time.monotonic() - start < timeout:
        with sqlite3.connect(results) as db:
            row = db.execute("SELECT status FROM runs WHERE host = ?", (host,)).fetchone()
        if row is not None and row[0] != "running":
            break
        time.sleep(0.5)
    return time.monotonic() - start


@pytest.fixture(scope="module")
def tsdb(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A VictoriaMetrics server for the module (tests/tsdb.py)."""
    from tests.tsdb import VictoriaMetrics

    server = VictoriaMetrics(tmp_path_factory.mktemp("tsdb"))
    server.start()
    yield server
    server.stop()
