"""The store the H100 produced (tests/data/gpu/h100, dltestbed d8da4db) read by this dltestbed: its runs get the
math they really used, its GEMM that beat its limit is said, a layer is never compared across math, and the
memory figure plots what a run holds."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dltestbed.report.environment import effective_math, unlike
from dltestbed.report.figures import gpu_memory_row
from dltestbed.results.store import Store
from dltestbed.workload.events import ResourceEvent
from tests.conftest import make_run, run_cli

CAPTURED = Path(__file__).parents[1] / "data" / "gpu" / "h100" / "results.sqlite"


@pytest.fixture(scope="module")
def h100(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the captured store (it is migrated on first open: the capture stays as it was)."""
    path = tmp_path_factory.mktemp("h100") / "results.sqlite"
    shutil.copy(CAPTURED, path)
    return path


def test_old_runs_get_the_math_they_used(tmp_path: Path) -> None:
    """Stored before dltestbed recorded math: a GPU run used TensorFlow's default (TF32 on Hopper), "default";
    a CPU run float32 (one is added to the capture as schema 5 stored it); a micro run none (each GEMM case
    names its own). Each gets the device its steps ran on, from its fingerprint (schema 9)."""
    import sqlite3

    path = tmp_path / "results.sqlite"
    shutil.copy(CAPTURED, path)
    db = sqlite3.connect(path)
    db.execute(
        "INSERT INTO runs (id, bench_id, mode, device, role, status, fingerprint) SELECT 'r-cpu', bench_id, "
        "'infer', 'cpu', 'foreground', 'ok', json_set(fingerprint, '$.step_device', "
        "'/job:localhost/replica:0/task:0/device:CPU:0') FROM runs WHERE mode = 'train' LIMIT 1"
    )
    db.commit()
    db.close()
    store = Store.open(path)
    try:
        runs = store.runs()
    finally:
        store.close()
    got = {(r.mode, r.device, r.math, r.used_device) for r in runs if r.role == "foreground"}
    assert got == {("train", "gpu", "default", "gpu"), ("probe", "gpu", "", "gpu"), ("infer", "cpu", "float32", "cpu")}
    assert {r.math for r in runs if r.role == "cotenant"} == {"default"}  # device auto, ran on the GPU
    assert not any(r.xla for r in runs)


def test_the_captured_gemm_above_its_limit_is_said(h100: Path) -> None:
    store = Store.open(h100, read_only=True)
    bench = next(r.bench_id for r in store.runs() if r.is_probe)
    store.close()
    proc = run_cli("report", "--results", str(h100), "--bench", bench)
    assert proc.returncode == 0, proc.stderr
    assert (
        "| gemm | float32 n=4096 | bm | 2 | 250 TFLOP/s | 249 TFLOP/s | 251 TFLOP/s | 373 % (above its limit!) |"
        in proc.stdout
    )
    assert "Above its limit:" in proc.stdout and "gemm float32 n=4096 on bm 373 %" in proc.stdout
    assert (
        "bfloat16 n=4096 | bm | 2 | 386 TFLOP/s" in proc.stdout
        and "(above its limit!)" not in proc.stdout.split("bfloat16 n=4096")[1].splitlines()[0]
    )


def test_a_layer_is_never_compared_across_math() -> None:
    """bm that chose bfloat16 for `mixed` against a container that chose float16 (its GPU older): refused,
    as runs on different devices are."""
    fp = {"tensorflow": "2.21.0", "step_device": "/job:localhost/replica:0/task:0/device:GPU:0"}
    bm = [make_run(math="mixed_bfloat16", xla=True, fingerprint=fp) for _ in range(2)]
    cbm = [make_run(target_kind="cbm", math="mixed_float16", xla=True, fingerprint=fp) for _ in range(2)]
    assert effective_math(bm[0]) == "mixed_bfloat16 + XLA"
    assert unlike(bm, cbm, "bm", "cbm") == (
        "refused: bm computed in mixed_bfloat16 + XLA, cbm in mixed_float16 + XLA; no overhead across math modes"
    )
    assert unlike(bm, bm, "bm", "bm") is None


def test_the_memory_figure_plots_what_the_framework_holds_where_it_was_sampled(h100: Path) -> None:
    store = Store.open(h100, read_only=True)
    try:
        old = [s for r in store.runs() for s in store.resources(r.id)]
    finally:
        store.close()
    row = gpu_memory_row(old)
    assert row is not None and row[0] == "GPU memory in use (device), GiB"
    assert row[1](old[0]) > 77 * 2**30  # the captured runs: the whole GPU mapped from the first second
    new = [ResourceEvent(t=1.0, rss_bytes=1, cpu_percent=0.0, gpus=old[0].gpus, gpu_bytes=[3 << 30])]
    row = gpu_memory_row(new)
    assert row is not None and row[0] == "GPU memory held by the framework, GiB" and row[1](new[0]) == 3 << 30
    assert gpu_memory_row([ResourceEvent(t=1.0, rss_bytes=1, cpu_percent=0.0)]) is None
