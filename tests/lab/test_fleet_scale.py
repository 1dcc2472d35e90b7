"""bench/fleet_scale.py runs in CI at 16 hosts: a lab of 16 with a shared venv, provision installing
nothing, a bench over 8 and then 16 hosts at once, sampled; nothing of the lab is left afterwards. The
script prints the figures against its goals; this test checks that they were measured, not their values."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.lab.conftest import leftovers

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "fleet_scale.py"


def test_the_fleet_script_at_16_hosts(lab_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "fleet.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--hosts",
            "8,16",
            "--name",
            "tfs",
            "--subnet",
            "10.213.88.0/24",
            "--json",  # the script's own option: where it writes its figures
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=1200,
        env={**os.environ, "DLTESTBED_LAB_DIR": str(lab_dir)},
    )
    print(proc.stdout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    measured = json.loads(out.read_text())
    rows = measured["rows"]
    assert [r["hosts"] for r in rows] == [8, 16]
    assert all(r["ok"] == r["runs"] == r["hosts"] for r in rows), rows
    assert all(r["peak_rss_mb"] > 50 and r["max_fds"] > r["hosts"] and r["controller_cpu_s"] > 0 for r in rows)
    assert all(r["machine_cpu_s"] >= r["controller_cpu_s"] for r in rows)
    assert "16 host(s) provisioned; nothing changed" in proc.stdout
    assert "T(16) / T(8) = " in proc.stdout and "peak RSS" in proc.stdout
    assert not leftovers("tfs")
