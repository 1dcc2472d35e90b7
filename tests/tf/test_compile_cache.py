"""A compiled PyTorch bench shares Inductor's caches between its runs, for real on this machine's CPU: its first run
compiles, its second reads what the first stored; the folder goes when the bench ends, and the report counts both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

pytestmark = [pytest.mark.tf, pytest.mark.torch]

# inference: a forward graph alone compiles in half a training step's time on two cores
COMPILED = ["--framework", "pytorch", "-m", "alexnet", "--image-size", "32", "--batch-size", "2", "--warmup", "1"]
COMPILED += ["--steps", "2", "--mode", "infer", "--xla", "--repeat", "2"]


def test_a_benchs_second_compiled_run_reads_the_cache_its_first_wrote(tmp_path: Path) -> None:
    results = str(tmp_path / "results.sqlite")
    tmp = tmp_path / "tmp"  # the folder is made in $TMPDIR: this test's own, whatever another CI tier makes
    tmp.mkdir()
    args = ["bench", *COMPILED, "--targets", "bm", "--format", "json", "--results", results]
    proc = run_cli(*args, env={"TMPDIR": str(tmp)}, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads(proc.stdout)
    assert [(r["status"], r["compile_cache"]) for r in runs] == [("ok", "miss"), ("ok", "hit")], runs
    assert (
        f"torch.compile's caches shared by the runs of each machine and kind ({tmp}/dltestbed-compile." in proc.stderr
    )
    assert not list(tmp.iterdir())  # removed when the bench ended
    report = run_cli("report", "--results", results)
    assert report.returncode == 0, report.stderr
    assert "compiled step" in report.stdout and "1 compiled, 1 from the cache" in report.stdout
