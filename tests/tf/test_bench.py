"""`dltestbed bench` end to end with real TensorFlow: stored runs, runs, report, failures, Ctrl-C."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

import psutil
import pytest

from dltestbed.config import workload_spec
from dltestbed.results.store import Store
from dltestbed.runner import RunContext, execute
from dltestbed.targets.local import LocalTarget
from tests.conftest import one_error_line, run_cli, start_endless_bench, wait_for_steps

pytestmark = pytest.mark.tf

QUICK = ["--batch-size", "8", "--warmup", "1", "--steps", "3", "--targets", "bm", "--repeat", "1"]


def test_bench_runs_report(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "reports" / "bench.md"
    proc = run_cli(
        "bench",
        "-m",
        "alexnet",
        "-m",
        "resnet50",
        "--image-size",
        "32",
        *QUICK,
        "--repeat",
        "2",
        "--format",
        "json",
        "--results",
        str(results),
        "--report",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed = json.loads(proc.stdout)  # stdout is the JSON and nothing else
    # --report: this bench's Markdown with its figures beside it, and the line that says where
    assert f"report written to {out} (" in proc.stderr and "figure(s) in" in proc.stderr
    text = out.read_text()
    assert f"bench {printed[0]['bench_id']}" in text.splitlines()[0]
    figs = sorted(p.name for p in (out.parent / "bench_files").glob("*.svg"))
    assert figs == ["memory-1.svg", "memory-2.svg", "steps.svg", "throughput.svg"]  # bm only: no overhead
    assert all(f"](bench_files/{f})" in text for f in figs)
    assert [(r["model"], r["repetition"]) for r in printed] == [
        ("alexnet", 1),
        ("resnet50", 1),
        ("alexnet", 2),
        ("resnet50", 2),
    ]  # interleaved
    assert all(r["status"] == "ok" and r["images_per_sec"] > 0 and r["target_kind"] == "bm" for r in printed)
    # the math asked and used (the quick preset's float32), and the elapsed time from launch (CLOSER'18): the
    # workload's own start-up (TensorFlow's import, the model's build) and its steps are inside it
    assert all(r["math"] == "float32" and r["framework"] == "tensorflow" and not r["xla"] for r in printed)
    assert all(
        r["startup_seconds"] > 0 and r["startup_seconds"] + r["elapsed_seconds"] < r["wall_seconds"] for r in printed
    )
    assert all(r["gpu_memory_peak_bytes"] is None for r in printed)  # no GPU here
    assert "bench b-" in proc.stderr and "4 run(s) on bm:local" in proc.stderr

    listed = json.loads(run_cli("runs", "--format", "json", "--results", str(results)).stdout)
    assert [r["id"] for r in listed] == [r["id"] for r in printed]
    store = Store.open(results)
    for r in printed:
        steps = store.steps(r["id"])
        assert [s.phase for s in steps] == ["warmup", "timed", "timed", "timed"]
        timed = [s for s in steps if s.phase == "timed"]
        assert r["images_per_sec"] == pytest.approx(24 / sum(s.seconds for s in timed))
        assert store.resources(r["id"])
        assert r["fingerprint"]["tensorflow"] and r["fingerprint"]["target_kind"] == "bm"

    table = run_cli("runs", "--results", str(results)).stdout
    rows = [line for line in table.splitlines() if " train " in line]
    assert len(rows) == 4 and "failed" not in table and "alexnet" in table

    md = run_cli("report", "--results", str(results)).stdout
    rows = [line for line in md.splitlines() if line.startswith("| bm |") and line.rstrip().endswith("| baseline |")]
    assert len(rows) == 2 and all("| 2 |" in row for row in rows)
    groups = json.loads(run_cli("report", "--format", "json", "--results", str(results)).stdout)["groups"]
    alex = next(g for g in groups if g["key"]["model"] == "alexnet")
    ips = sorted(r["images_per_sec"] for r in printed if r["model"] == "alexnet")
    assert alex["images_per_sec"]["min"] == ips[0] and alex["images_per_sec"]["max"] == ips[1]
    assert alex["images_per_sec"]["std"] is not None

    one = run_cli("report", printed[0]["id"], "--format", "json", "--results", str(results))
    assert json.loads(one.stdout)["groups"][0]["runs"] == 1


def test_bench_real_data_inference(results: Path, dataset_dir: Path) -> None:
    proc = run_cli(
        "bench",
        "-m",
        "inception3",
        "--image-size",
        "75",
        "--data",
        "real",
        "--data-dir",
        str(dataset_dir),
        "--mode",
        "infer",
        *QUICK,
        "--format",
        "json",
        "--results",
        str(results),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (r,) = json.loads(proc.stdout)
    assert (r["data"], r["mode"], r["spec"]["classes"], r["status"]) == ("real", "infer", 3, "ok")


def test_a_crashing_workload_is_stored_failed_and_the_bench_says_so(results: Path, tmp_path: Path) -> None:
    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        for i in range(4):
            (tmp_path / cls / f"{i}.jpg").write_bytes(b"\xff\xd8 not a jpeg \xff\xd9")  # whole, but garbage
    proc = run_cli(
        "bench",
        "-m",
        "alexnet",
        "--image-size",
        "32",
        "--data",
        "real",
        "--data-dir",
        str(tmp_path),
        *QUICK,
        "--results",
        str(results),
    )
    line = one_error_line(proc)
    assert proc.returncode == 1
    assert "1 of 1 run(s) failed" in line and "step 0: Unknown image file format" in line and "(log: " in line
    (run,) = Store.open(results).runs()
    assert run.status == "failed" and "Unknown image file format" in (run.reason or "")
    assert "Traceback" in Path(run.log_path).read_text()  # the detail is in the run's log


def test_ctrl_c_keeps_the_measured_steps(results: Path) -> None:
    proc = start_endless_bench(results, "--targets", "bm")
    assert wait_for_steps(results, 4), "the bench did not start measuring"
    children = psutil.Process(proc.pid).children(recursive=True)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    (run,) = Store.open(results).runs()
    assert run.status == "failed" and run.reason == "interrupted (Ctrl-C or a stop signal)"
    assert run.steps_done >= 5 and len(Store.open(results).steps(run.id)) == run.steps_done
    psutil.wait_procs(children, timeout=15)
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]


def test_a_workload_killed_mid_run_keeps_its_steps(results: Path) -> None:
    """The OOM killer's way: SIGKILL after 3 steps, no error event."""
    store = Store.open(results)

    class KillAfter3:
        def begin(self, run: object) -> None: ...
        def end(self, run: object) -> None: ...
        def step(self, run: object, ev: object) -> None:
            if ev.index == 2:  # type: ignore[attr-defined]
                me = psutil.Process(os.getpid())
                for child in me.children(recursive=False):  # the workload (its stdin watchdog dies with it)
                    with contextlib.suppress(psutil.Error):
                        if "dltestbed.workload" in " ".join(child.cmdline()):
                            child.kill()

    spec = workload_spec(model="alexnet", image_size=32, batch_size=2, warmup=1, steps=1000)
    run = execute(LocalTarget(), spec, store, RunContext(bench_id="b"), KillAfter3())
    assert run.status == "failed" and run.reason and run.reason.startswith("workload killed by signal 9")
    assert 3 <= len(store.steps(run.id)) <= 6
    assert store.runs()[0].status == "failed"


def test_a_screen_checks_and_compares_the_same_answer(results: Path, dataset_dir: Path) -> None:
    """--suite screen on bare metal, twice: the gemm and conv products checked against float64 and themselves,
    and the deterministic training of rep 2 bit for bit rep 1's; then --accuracy on real data, in the report."""
    tiny = ["--image-size", "32", "--batch-size", "4", "--warmup", "1", "--steps", "3", "--repeat", "2"]
    proc = run_cli(
        "bench", "--suite", "screen", "--screen-time", "1", "--targets", "bm", *tiny, "--results", str(results)
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(run_cli("report", "--format", "json", "--results", str(results)).stdout)
    rows = {r["probe"]: r for r in report["checks"]["rows"]}
    assert set(rows) == {"gemm", "conv"} and report["checks"]["mismatches"] == []
    assert all(r["failed"] == 0 and r["kinds"] == ["reference", "repeat"] and r["checks"] >= 2 for r in rows.values())
    (same,) = report["agreement"]
    assert (same["verdict"], same["steps_compared"], same["basis"]) == ("identical", 4, "bare metal")
    proc = run_cli(
        "bench",
        "-m",
        "alexnet",
        "--data",
        "real",
        "--data-dir",
        str(dataset_dir),
        "--accuracy",
        "--targets",
        "bm",
        *tiny,
        "--format",
        "json",
        "--results",
        str(results),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads(proc.stdout)
    assert [(r["spec"]["seed"], r["eval_images"]) for r in runs] == [(0, 3), (1, 3)]  # 8 images a class: 1 held out
    md = run_cli("report", "--results", str(results)).stdout
    assert "## Accuracy (trained, then tested on held-out images)" in md and "| alexnet | bm | 3 | 2 |" in md
