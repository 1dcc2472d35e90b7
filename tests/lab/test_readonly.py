"""A results store on a read-only filesystem (a real tmpfs mounted read-only; root): writing is one line
before anything runs, reading (report, runs) still works, and nothing stored is touched."""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import one_error_line, run_cli


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[Path]:
    d = tmp_path / "media"
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(d)], check=True)
    try:
        yield d
    finally:
        subprocess.run(["umount", str(d)], check=True)


def test_a_store_on_a_read_only_filesystem(mount: Path) -> None:
    bench = [
        "bench",
        "--model",
        "alexnet",
        "--image-size",
        "32",
        "--batch-size",
        "2",
        "--steps",
        "2",
        "--warmup",
        "1",
        "--repeat",
        "1",
        "--targets",
        "bm",
    ]
    made = run_cli(*bench, "--results", str(mount / "results.sqlite"), "--format", "json")
    assert made.returncode == 0, made.stderr[-2000:]
    (run,) = json.loads(made.stdout)
    subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
    before = hashlib.sha256((mount / "results.sqlite").read_bytes()).hexdigest()
    for path in (mount / "results.sqlite", mount / "new" / "results.sqlite"):
        proc = run_cli(*bench, "--results", str(path))
        line = one_error_line(proc)
        assert proc.returncode == 2 and f"{mount} is on a read-only filesystem" in line, line
        assert "bench b-" not in proc.stderr  # nothing announced, nothing run
    runs = run_cli("runs", "--results", str(mount / "results.sqlite"), "--format", "json")
    assert runs.returncode == 0, runs.stderr
    assert [r["id"] for r in json.loads(runs.stdout)] == [run["id"]]
    report = run_cli("report", "--format", "json", "--results", str(mount / "results.sqlite"))
    assert report.returncode == 0 and json.loads(report.stdout)["groups"], report.stderr
    out = one_error_line(run_cli("report", "--results", str(mount / "results.sqlite"), "--out", str(mount / "r.md")))
    assert "r.md" in out and "Read-only file system" in out
    assert hashlib.sha256((mount / "results.sqlite").read_bytes()).hexdigest() == before
