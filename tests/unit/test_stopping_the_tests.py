"""A stop of the test session (scripts/test.sh's SIGTERM to a tier, a time limit, Ctrl-C) ends it as Ctrl-C does:
every fixture's teardown runs, and a second stop while it tears down does not cut it short (tests/conftest.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SESSION = """
import time
from pathlib import Path

import pytest


@pytest.fixture
def held():
    yield
    Path({tearing!r}).write_text("")
    time.sleep(2)
    Path({torn!r}).write_text("torn down")


def test_long(held):
    Path({running!r}).write_text("")
    time.sleep(120)
"""


def _wait_for(path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never came"
        time.sleep(0.05)


def test_sigterm_tears_down_and_a_second_stop_does_not_cut_the_teardown(tmp_path: Path) -> None:
    names = {n: str(tmp_path / n) for n in ("running", "tearing", "torn")}
    (tmp_path / "test_long.py").write_text(SESSION.format(**names))
    argv = [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider", "-q", str(tmp_path)]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(tmp_path / "running")
        proc.send_signal(signal.SIGTERM)
        _wait_for(tmp_path / "tearing")
        proc.send_signal(signal.SIGINT)  # Ctrl-C on top, as a terminal's reaches every tier
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (tmp_path / "torn").read_text() == "torn down", out[-2000:] + err[-2000:]
    assert proc.returncode == 2, out[-2000:]  # pytest's "interrupted"
    assert "stopped by signal 15" in out + err
    assert "stopping already, the teardown goes on" in err
