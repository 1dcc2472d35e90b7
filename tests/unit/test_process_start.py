"""A workload's start-up is counted from when its process started: that instant, read to a clock tick (10 ms),
not to psutil's whole second of boot time (which put it up to a second early: a run's start-up plus its steps
then exceeded the controller's launch-to-finish time)."""

from __future__ import annotations

import subprocess
import sys
import time


def test_the_process_start_lies_between_its_launch_and_its_first_line() -> None:
    code = "import time; from dltestbed.workload.__main__ import _process_start; print(_process_start(), time.time())"
    for _ in range(5):
        launched = time.time()
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        start, said = map(float, out.stdout.split())
        assert launched - 0.02 <= start <= said, (launched, start, said)  # a tick of /proc's clock either side
