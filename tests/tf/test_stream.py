"""The InfluxDB stream against a real VictoriaMetrics server: exact counts, a server that goes away
mid-run, `push`, and the faults that must be one line. The token never shows."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from dltestbed.results.store import Store
from tests.conftest import one_error_line, run_cli, wait_for_steps
from tests.tsdb import PASSWORD, TOKEN, VictoriaMetrics, expected

pytestmark = pytest.mark.tf

TINY = [
    "--model",
    "alexnet",
    "--image-size",
    "64",
    "--batch-size",
    "8",
    "--warmup",
    "1",
    "--targets",
    "bm",
    "--repeat",
    "1",
]


def _bench_id(results: Path) -> str:
    bench = Store.open(results).last_bench_id()
    assert bench
    return bench


def _no_secret(results: Path, *texts: str) -> None:
    for text in texts:
        assert PASSWORD not in text
    for log in (results.parent / "logs").glob("*.log"):
        assert PASSWORD not in log.read_text(errors="replace")


def test_every_point_arrives(tsdb: VictoriaMetrics, results: Path) -> None:
    """A model and the microbenchmarks (--suite full, membw alone: no TensorFlow start) stream every point."""
    proc = run_cli(
        "bench",
        *TINY,
        "--steps",
        "5",
        "--repeat",
        "2",
        "--suite",
        "full",
        "--probes",
        "membw",
        "--results",
        str(results),
        env=tsdb.env(),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    bench = _bench_id(results)
    want = expected(results, bench)
    assert want == {
        "dltestbed_step": 12,
        "dltestbed_run": 4,
        "dltestbed_resource": want["dltestbed_resource"],
        "dltestbed_measure": 2 * 2 * (1 + 5),
    }  # 2 reps x 2 copies x (1 warm-up + 5 timed calls)
    assert tsdb.count(bench, want) == want
    assert f"InfluxDB: {sum(want.values())} point(s) sent to {tsdb.url}" in proc.stderr
    labels = tsdb.series_labels(bench)
    assert {lab["target_kind"] for lab in labels} == {"bm"} and {lab["phase"] for lab in labels} == {"warmup", "timed"}
    _no_secret(results, proc.stdout, proc.stderr)


def test_a_server_that_goes_away_mid_run_loses_nothing(tmp_path: Path, results: Path) -> None:
    server = VictoriaMetrics(tmp_path / "vm")
    server.start()
    try:
        bench = _start_bench(results, server, steps=40)
        assert wait_for_steps(results, 5), "no steps"
        server.stop()
        _wait_for_more_steps(results, 5)  # measured while it is down
        server.start()
        _, err = bench.communicate(timeout=300)
        assert bench.returncode == 0, err[-3000:]
        bench_id = _bench_id(results)
        want = expected(results, bench_id)
        assert server.count(bench_id, want) == want
        assert Store.open(results).outbox_count() == 0
        _no_secret(results, err)
    finally:
        server.stop()


@pytest.mark.parametrize("server_at_kill", ["up", "down"])
def test_a_controller_killed_mid_bench_loses_no_point(server_at_kill: str, tmp_path: Path, results: Path) -> None:
    """SIGKILL of dltestbed (an OOM kill, a lost login node) mid-run: each stored step's point waits in
    the outbox (written with the step), so `push` completes the server exactly."""
    import os
    import signal

    server = VictoriaMetrics(tmp_path / "vm")
    server.start()
    bench = _start_bench(results, server, steps=200)
    try:
        assert wait_for_steps(results, 6), "no steps"
        if server_at_kill == "down":
            server.stop()
            _wait_for_more_steps(results, 3)  # measured while it is down
        children = psutil.Process(bench.pid).children(recursive=True)
        assert any("dltestbed.workload" in " ".join(p.cmdline()) for p in children)
        os.kill(bench.pid, signal.SIGKILL)
        bench.communicate(timeout=60)
        _, alive = psutil.wait_procs(children, timeout=STOPS_WITHIN)  # its stdin closed: the workload stops
        assert not alive, alive
        bench_id = _bench_id(results)
        want = expected(results, bench_id)
        assert want["dltestbed_step"] > 6 and want["dltestbed_run"] == 0  # killed: its run is still "running"
        if server_at_kill == "down":
            server.start()
        proc = run_cli("push", "--results", str(results), env=server.env())
        assert proc.returncode == 0, proc.stderr
        doubt = proc.stdout.count("were being sent when a dltestbed process stopped")
        got = server.count(bench_id, want)
        if doubt:  # killed between a batch's send and its acknowledgement being stored: said, and bounded
            assert all(want[m] <= got[m] for m in want) and sum(got.values()) - sum(want.values()) <= 5000
        else:
            assert got == want
        assert Store.open(results).outbox_count() == 0
    finally:
        bench.kill()
        server.stop()


STOPS_WITHIN = 30.0  # seconds from a controller's death until its workload has ended (a step, then exit)


def test_points_wait_for_push_when_the_server_stays_down(tmp_path: Path, results: Path) -> None:
    server = VictoriaMetrics(tmp_path / "vm")
    server.start()
    bench = _start_bench(results, server, steps=8)
    try:
        assert wait_for_steps(results, 1), "no steps"
        server.stop()  # and it stays down until the bench is over
        _, err = bench.communicate(timeout=300)
        assert bench.returncode == 0, err[-3000:]  # the runs are fine; the stream says what it could not send
        assert "not sent" in err and "`dltestbed push` sends them" in err
        bench_id = _bench_id(results)
        waiting = Store.open(results).outbox_count()
        assert waiting > 0
        line = one_error_line(run_cli("push", "--results", str(results), env=server.env()))
        assert "unreachable" in line and f"{waiting} still waiting" in line
        server.start()
        proc = run_cli("push", "--results", str(results), env=server.env())
        assert proc.returncode == 0, proc.stderr
        assert f"sent {waiting} point(s)" in proc.stdout
        want = expected(results, bench_id)
        assert server.count(bench_id, want) == want
        assert Store.open(results).outbox_count() == 0
        assert "nothing waiting" in run_cli("push", "--results", str(results), env=server.env()).stdout
    finally:
        server.stop()


def test_push_a_bench_that_was_not_streamed(tsdb: VictoriaMetrics, results: Path) -> None:
    proc = run_cli("bench", *TINY, "--steps", "3", "--results", str(results))
    assert proc.returncode == 0, proc.stderr[-3000:]
    bench = _bench_id(results)
    none = {"dltestbed_step": 0, "dltestbed_resource": 0, "dltestbed_measure": 0, "dltestbed_run": 0}
    assert tsdb.count(bench) == none
    proc = run_cli("push", "--bench", "last", "--results", str(results), env=tsdb.env())
    assert proc.returncode == 0, proc.stderr
    want = expected(results, bench)
    assert tsdb.count(bench, want) == want


def test_an_unreachable_server_at_start(results: Path) -> None:
    env = {
        "INFLUXDB_V2_URL": "http://127.0.0.1:9",
        "INFLUXDB_V2_ORG": "lab",
        "INFLUXDB_V2_BUCKET": "bench",
        "INFLUXDB_V2_TOKEN": TOKEN,
    }
    line = one_error_line(run_cli("bench", *TINY, "--steps", "2", "--results", str(results), env=env))
    assert line.startswith("error: InfluxDB at http://127.0.0.1:9 (org lab, bucket bench): unreachable (")
    assert "nothing was run" in line
    assert not results.exists()


def test_a_wrong_token(tsdb: VictoriaMetrics, results: Path, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("dltestbed:wrong-password\n")
    env = {k: v for k, v in tsdb.env().items() if k != "INFLUXDB_V2_TOKEN"}
    proc = run_cli(
        "bench", *TINY, "--steps", "2", "--influx-token-file", str(token_file), "--results", str(results), env=env
    )
    line = one_error_line(proc)
    assert "HTTP 401 Unauthorized: the token was refused" in line
    assert "wrong-password" not in proc.stderr + proc.stdout


def test_the_token_is_not_in_the_process_list(tsdb: VictoriaMetrics, results: Path) -> None:
    bench = _start_bench(results, tsdb, steps=20)
    try:
        assert wait_for_steps(results, 2)
        for p in psutil.process_iter(["cmdline"]):
            assert PASSWORD not in " ".join(p.info["cmdline"] or [])
        for p in psutil.Process(bench.pid).children(recursive=True):  # the workload never gets the token
            assert not any(k.startswith("INFLUXDB_V2") for k in p.environ())
    finally:
        bench.terminate()
        bench.communicate(timeout=120)


def _environ() -> dict[str, str]:
    import os

    return dict(os.environ)


def _start_bench(results: Path, server: VictoriaMetrics, steps: int) -> subprocess.Popen[str]:
    """`dltestbed bench` streaming to `server`, in the background."""
    return subprocess.Popen(
        [sys.executable, "-m", "dltestbed", "bench", *TINY, "--steps", str(steps), "--results", str(results)],
        env={**_environ(), **server.env()},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_more_steps(results: Path, more: int, timeout: float = 120) -> None:
    """Wait until `more` steps beyond those stored now are stored (or the timeout)."""
    seen = _count_steps(results)
    deadline = time.monotonic() + timeout
    while _count_steps(results) < seen + more and time.monotonic() < deadline:
        time.sleep(0.2)


def _count_steps(results: Path) -> int:
    import sqlite3

    with sqlite3.connect(results) as db:
        return int(db.execute("SELECT count(*) FROM steps").fetchone()[0])


def test_streamed_json_output_is_unchanged(tsdb: VictoriaMetrics, results: Path) -> None:
    proc = run_cli("bench", *TINY, "--steps", "2", "--format", "json", "--results", str(results), env=tsdb.env())
    assert proc.returncode == 0
    assert json.loads(proc.stdout)[0]["status"] == "ok"  # stdout still holds only the JSON
