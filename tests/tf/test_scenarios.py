"""Scenarios end to end with real TensorFlow on this machine: distributed (2 real workers on loopback)
and shared (a real co-tenant), their faults, and the report."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from dltestbed.results.store import Store
from tests.conftest import one_error_line, run_cli

pytestmark = pytest.mark.tf

TINY = ["--model", "alexnet", "--image-size", "64", "--batch-size", "8", "--warmup", "1", "--repeat", "1"]


def _this_test(environ: dict[str, str]) -> str:
    """The test whose process (or an ancestor's) made this environment: pytest's PYTEST_CURRENT_TEST less its phase."""
    return environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]


def _workloads() -> list[psutil.Process]:
    """This test's workload processes: each inherits PYTEST_CURRENT_TEST from the bench that started it (in this
    process or a child of it). Not another test's: CI runs another pytest beside this one (scripts/test.sh), whose
    workloads this test must neither count, freeze nor kill."""
    me = _this_test(dict(os.environ))
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if "dltestbed.workload" in cmd and p.pid != os.getpid():
            with contextlib.suppress(psutil.Error):  # gone meanwhile, or a zombie (no environment left)
                if _this_test(p.environ()) == me:
                    out.append(p)
    return out


def test_distributed_job_sums_its_workers(results: Path) -> None:
    """Through the library call under `dltestbed bench` (a program's way in); the report through the CLI."""
    from dltestbed import orchestrate as o
    from dltestbed.orchestrate.scenarios import Options

    request = o.BenchRequest(
        workloads=o.Workloads(models=("alexnet",), image_size=64, batch_size=8, warmup=1, steps=3),
        repetitions=o.Repetitions(repeat="1"),
        scenario=Options(scenario="distributed"),
        results=results,
    )
    outcome = o.run_bench(request, o.Silent())
    assert outcome.kinds == ("bm",) and not outcome.failed and outcome.store == results
    runs = [r.to_dict() for r in outcome.records]
    alone = [r for r in runs if r["worker_index"] is None]
    workers = sorted((r for r in runs if r["worker_index"] is not None), key=lambda r: r["worker_index"])
    assert len(alone) == 1 and alone[0]["workers"] == 1 and alone[0]["spec"]["distributed"] is False
    assert [w["worker_index"] for w in workers] == [0, 1]
    assert len({r["job_id"] for r in runs}) == 1 and all(r["scenario"] == "distributed" for r in runs)
    for w in workers:
        assert w["status"] == "ok" and w["workers"] == 2 and w["spec"]["distributed"] is True
        assert w["fingerprint"]["workers"] == 2 and w["fingerprint"]["worker_index"] == w["worker_index"]
        assert w["steps_done"] == 4
    report = json.loads(run_cli("report", "--format", "json", "--results", str(results)).stdout)
    (dist,) = report["distributed"]
    total = sum(w["images_per_sec"] for w in workers)
    assert dist["workers"] == 2 and dist["jobs"] == 1
    assert dist["total_images_per_sec"]["mean"] == pytest.approx(total)
    assert dist["efficiency_percent"]["mean"] == pytest.approx(total / (2 * alone[0]["images_per_sec"]) * 100)
    md = run_cli("report", "--results", str(results)).stdout
    assert "## Distributed: total throughput and scaling efficiency" in md
    assert not _workloads()


def test_probes_between_two_workers(results: Path) -> None:
    """--suite micro with --scenario distributed: net and allreduce in one job of 2 real workers; no lone
    worker (it has no peer); the report lists every case with the method that compares them."""
    proc = run_cli(
        "bench",
        "--scenario",
        "distributed",
        "--suite",
        "micro",
        "--warmup",
        "0",
        "--steps",
        "2",
        "--repeat",
        "1",
        "--format",
        "json",
        "--results",
        str(results),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads(proc.stdout)
    assert sorted(r["worker_index"] for r in runs) == [0, 1] and len({r["job_id"] for r in runs}) == 1
    assert all(
        r["status"] == "ok"
        and r["model"] == "micro"
        and r["spec"]["probes"] == ["net", "allreduce"]
        and r["fingerprint"]["workers"] == 2
        for r in runs
    )
    report = json.loads(run_cli("report", "--format", "json", "--results", str(results)).stdout)
    (checked,) = report["checks"]["rows"]  # each worker checked each size's sums: exactly n(n+1)/2 x the pattern
    assert (checked["probe"], checked["checks"], checked["failed"], checked["worst_share"]) == ("allreduce", 6, 0, 0)
    cases = report["micro"]["cases"]
    names = [c["key"]["case"] for c in cases]
    assert names == [
        "latency: 4 B all-reduce",
        "all-gather 4 MiB a worker: received",
        "4 KiB algbw",
        "4 KiB busbw",
        "256 KiB algbw",
        "256 KiB busbw",
        "4 MiB algbw",
        "4 MiB busbw",
    ]
    assert all(c["runs"] == 2 and c["key"]["workers"] == 2 for c in cases)  # one run per worker
    by = {c["key"]["case"]: c["value"]["mean"] for c in cases}
    assert by["4 MiB busbw"] == pytest.approx(by["4 MiB algbw"])  # 2(n-1)/n = 1 for two workers
    assert 0 < by["latency: 4 B all-reduce"] < 1  # seconds
    assert not _workloads()


def test_a_worker_that_dies_ends_the_job(results: Path) -> None:
    """Kill worker 1 mid-job: worker 0 (which would wait for it forever) is stopped, the bench ends."""
    import subprocess
    import sys

    bench = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dltestbed",
            "bench",
            "--scenario",
            "distributed",
            "--no-baseline",
            *TINY,
            "--steps",
            "100000",
            "--results",
            str(results),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 180
    victim = None
    while victim is None and time.monotonic() < deadline:
        for p in _workloads():
            try:
                env = p.environ()
            except psutil.Error:
                continue
            if '"index": 1' in env.get("TF_CONFIG", "") and _steps(results) >= 4:
                victim = p
        time.sleep(0.5)
    assert victim is not None, "worker 1 never got going"
    victim.send_signal(signal.SIGKILL)
    _, err = bench.communicate(timeout=120)
    assert bench.returncode == 1, err[-3000:]
    assert "Traceback" not in err
    store = Store.open(results)
    runs = {r.worker_index: r for r in store.runs()}
    assert runs[1].status == "failed" and "killed by signal 9" in (runs[1].reason or "")
    assert runs[0].status == "failed"
    assert runs[0].reason is not None and runs[0].reason.startswith("stopped: worker 1 (")
    assert runs[0].steps_done >= 2  # measured steps are kept
    assert not _workloads()


def _steps(results: Path) -> int:
    import sqlite3

    if not results.exists():
        return 0
    try:
        with sqlite3.connect(results) as db:
            return int(db.execute("SELECT count(*) FROM steps").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def test_distributed_needs_two_workers(results: Path) -> None:
    line = one_error_line(
        run_cli(
            "bench", "--scenario", "distributed", "--workers", "1", *TINY, "--steps", "2", "--results", str(results)
        )
    )
    assert line == "error: scenario distributed needs at least 2 workers; got 1"
    line = one_error_line(
        run_cli(
            "bench", "--scenario", "distributed", "--mode", "infer", *TINY, "--steps", "2", "--results", str(results)
        )
    )
    assert "distributed trains" in line
    assert not results.exists()  # nothing ran


def test_shared_measures_the_co_tenant_effect(results: Path, tmp_path: Path) -> None:
    page = tmp_path / "shared.html"
    proc = run_cli(
        "bench",
        "--scenario",
        "shared",
        *TINY,
        "--steps",
        "6",
        "--cotenant-batch",
        "32",
        "--format",
        "json",
        "--results",
        str(results),
        "--report",
        str(page),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"report written to {page} (" in proc.stderr
    html = page.read_text()
    assert 'data-figure="shared"' in html and "Shared: the foreground alone and with a co-tenant" in html
    runs = json.loads(proc.stdout)
    alone = next(r for r in runs if r["contention"] == "none")
    under = next(r for r in runs if r["role"] == "foreground" and r["contention"] != "none")
    co = next(r for r in runs if r["role"] == "cotenant")
    assert under["contention"] == co["contention"] == "alexnet b32"
    assert alone["job_id"] == under["job_id"] == co["job_id"]
    assert all(r["status"] == "ok" for r in runs)
    assert co["batch_size"] == 32 and co["images_per_sec"] > 0 and co["steps_done"] >= 2
    # the co-tenant started before the foreground was timed and stopped after it
    assert co["started_at"] <= under["started_at"] and co["finished_at"] >= under["finished_at"]
    report = json.loads(run_cli("report", "--format", "json", "--results", str(results)).stdout)
    (sh,) = report["shared"]
    assert sh["contention"] == "alexnet b32" and sh["pairs"] == 1
    drop = (alone["images_per_sec"] - under["images_per_sec"]) / alone["images_per_sec"] * 100
    assert sh["drop_percent"]["mean"] == pytest.approx(drop)
    assert all(g["key"]["contention"] in ("none", "alexnet b32") for g in report["groups"])
    assert not any(g["key"]["batch_size"] == 32 for g in report["groups"])  # co-tenants are not rows
    assert not _workloads()


def test_isolated_shared_pins_each_side(results: Path) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    proc = run_cli(
        "bench",
        "--scenario",
        "shared",
        "--isolate",
        *TINY,
        "--steps",
        "3",
        "--cotenant-batch",
        "16",
        "--format",
        "json",
        "--results",
        str(results),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads(proc.stdout)
    co = next(r for r in runs if r["role"] == "cotenant")
    fg = [r for r in runs if r["role"] == "foreground"]
    assert {r["spec"]["cpus"] for r in fg} == {"0"} and co["spec"]["cpus"] == "1"
    assert all(r["fingerprint"]["cpu_affinity"] == 1 for r in runs)  # the workload saw only its CPU
    assert "isolated (cpus 0 / co-tenant 1)" in co["contention"]


def test_a_co_tenant_that_cannot_start(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No GPU here: --cotenant gpu is refused in one line before any run. Where a GPU is seen before the runs
    (taken as given here) and the co-tenant still cannot start (TensorFlow sees none): one line, and the
    foreground measured alone is kept."""
    from dltestbed import orchestrate as o
    from dltestbed import runner
    from dltestbed.errors import DltestbedError
    from dltestbed.orchestrate import gpus
    from dltestbed.orchestrate.scenarios import Options

    args = ("--scenario", "shared", "--cotenant", "gpu", *TINY, "--steps", "2", "--results", str(results))
    line = one_error_line(run_cli("bench", *args))
    assert line.startswith("error: --cotenant gpu: no GPU on bm:local (") and not results.exists()

    monkeypatch.setattr(gpus.Local, "seen", lambda self, kind: gpus.Seen(f"{kind}:local", True, "taken as given"))
    finish = runner._finish

    def slow_finish(*args: Any, **kwargs: Any) -> None:  # a store slow to keep a run's end, as under CI's load
        time.sleep(2)
        finish(*args, **kwargs)

    monkeypatch.setattr(runner, "_finish", slow_finish)
    request = o.BenchRequest(
        workloads=o.Workloads(models=("alexnet",), image_size=64, batch_size=8, warmup=1, steps=2),
        repetitions=o.Repetitions(repeat="1"),
        scenario=Options(scenario="shared", cotenant="gpu"),
        results=results,
    )
    with pytest.raises(DltestbedError) as err:
        o.run_bench(request, o.Silent())
    assert "the co-tenant (gpu b64) could not start on" in str(err.value)
    assert "no GPU is visible to TensorFlow" in str(err.value)
    runs = Store.open(results).runs()
    assert [(r.role, r.contention, r.status) for r in runs] == [
        ("foreground", "none", "ok"),
        ("cotenant", "gpu b64", "failed"),
    ]
    assert not _workloads()


def _tf_index(p: psutil.Process) -> tuple[int, int] | None:
    """(worker index, its port) of a distributed workload process, from its TF_CONFIG; None otherwise."""
    try:
        cfg = json.loads(p.environ().get("TF_CONFIG") or "null")
    except (psutil.Error, ValueError):
        return None
    if not cfg:
        return None
    index = cfg["task"]["index"]
    return index, int(cfg["cluster"]["worker"][index].rsplit(":", 1)[1])


def _listening(p: psutil.Process, port: int) -> bool:
    try:
        return any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in p.net_connections("tcp"))
    except psutil.Error:
        return False


def _gone_within(seconds: float) -> float | None:
    """Seconds until no workload process is left (zombies aside), or None if some still are after `seconds`."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        alive = [p for p in _workloads() if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        if not alive:
            return time.monotonic() - t0
        time.sleep(0.2)
    return None


@pytest.fixture
def sweep() -> Iterator[None]:
    """After the test, whatever it asserted: no workload left for the next test (a failed one kills them)."""
    yield
    for p in _workloads():
        with contextlib.suppress(psutil.Error):
            p.kill()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
@pytest.mark.usefixtures("sweep")
def test_a_stop_during_the_rendezvous_leaves_nothing_running(results: Path, sig: signal.Signals) -> None:
    """Worker 1 is frozen before it joins, so worker 0 waits in the rendezvous (its gRPC server up, inside
    TensorFlow's C++ where Python signal handlers do not run). Ctrl-C, or a SIGKILLed controller (worker
    0's stdin closes), must still end both workers within a stated delay."""
    import subprocess
    import sys

    bench = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dltestbed",
            "bench",
            "--scenario",
            "distributed",
            "--no-baseline",
            *TINY,
            "--steps",
            "100000",
            "--results",
            str(results),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    frozen = waiting = None
    deadline = time.monotonic() + 180
    while (frozen is None or waiting is None) and time.monotonic() < deadline:
        for p in _workloads():
            at = _tf_index(p)
            if at and at[0] == 1 and frozen is None:
                p.suspend()
                frozen = p
            elif at and at[0] == 0 and _listening(p, at[1]):
                waiting = p
        time.sleep(0.1)
    assert frozen is not None and waiting is not None, "worker 0 never reached the rendezvous"
    time.sleep(2)
    assert _steps(results) == 0 and waiting.is_running()  # still waiting for worker 1
    bench.send_signal(sig)
    if sig == signal.SIGINT:
        _, err = bench.communicate(timeout=60)
        assert bench.returncode == 130, err[-3000:]
        runs = Store.open(results).runs()
        assert sorted(r.worker_index for r in runs) == [0, 1]
        assert all(r.status == "failed" and r.reason == "interrupted (Ctrl-C or a stop signal)" for r in runs)
    else:
        bench.wait(timeout=30)
        frozen.resume()  # a frozen process cannot read the end of its stdin; worker 0 must end by itself
    took = _gone_within(40)
    assert took is not None, [p.cmdline() for p in _workloads()]
    print(f"{sig.name}: no workload {took:.1f} s after the controller ended")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
@pytest.mark.usefixtures("sweep")
def test_a_stop_during_the_co_tenant_warm_up_leaves_nothing_running(results: Path, sig: signal.Signals) -> None:
    """The co-tenant has started (its run stored, its process up) but not reached a timed step, and the
    foreground has not begun: Ctrl-C stores it failed and stops it; a SIGKILLed controller's co-tenant ends
    by itself (its stdin closes)."""
    import sqlite3
    import subprocess
    import sys

    bench = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dltestbed",
            "bench",
            "--scenario",
            "shared",
            *TINY,
            "--steps",
            "3",
            "--cotenant-batch",
            "512",
            "--results",
            str(results),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def cotenant_rows() -> list[tuple[str, str]]:
        if not results.exists():
            return []
        try:
            with sqlite3.connect(results) as db:
                return db.execute("SELECT role, status FROM runs").fetchall()
        except sqlite3.OperationalError:
            return []

    deadline = time.monotonic() + 180  # the foreground runs alone first (3 steps), then the co-tenant starts
    while time.monotonic() < deadline and not (("cotenant", "running") in cotenant_rows() and _workloads()):
        time.sleep(0.1)
    assert cotenant_rows() == [("foreground", "ok"), ("cotenant", "running")] and _workloads(), cotenant_rows()
    time.sleep(3)  # importing TensorFlow, building the model: its warm-up step has not ended yet
    bench.send_signal(sig)
    if sig == signal.SIGINT:
        _, err = bench.communicate(timeout=60)
        assert bench.returncode == 130, err[-3000:]
        _, co = Store.open(results).runs()
        assert (co.role, co.status, co.reason) == ("cotenant", "failed", "interrupted (Ctrl-C or a stop signal)")
    else:
        bench.wait(timeout=30)
    with sqlite3.connect(results) as db:
        timed = db.execute(
            "SELECT count(*) FROM steps JOIN runs ON runs.id = steps.run_id WHERE phase = 'timed' AND role = 'cotenant'"
        ).fetchone()[0]
    assert timed == 0, "the signal came after the warm-up: the test did not test the warm-up"
    took = _gone_within(40)
    assert took is not None, [p.cmdline() for p in _workloads()]
    print(f"{sig.name}: no workload {took:.1f} s after the controller ended")
