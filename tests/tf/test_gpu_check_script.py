"""scripts/gpu-check.sh at CPU sizes (`--cpu`), as a GPU machine with its own PyTorch runs it (FRAMEWORK=pytorch):
its first step accepts this machine as a local node (an inventory of `ansible_connection: local`, no SSH) to a
verdict (here: cannot judge, exit 3: a node without GPUs has no board, and alone no peers, to judge its speed by),
then the benches, the probes, the screen, determinism and the reports. Left out here: validate's two steps
(a reference from 2 runs of 10 steps refuses this machine's noise, as it should: its own tests cover it) and the
harness's fidelity (torch.compile on 2 cores takes minutes: bench/harness_fidelity.py measures it)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from dltestbed.results.store import Store

pytestmark = [pytest.mark.tf, pytest.mark.torch]

ROOT = Path(__file__).resolve().parents[2]
STEPS = ("accept", "facts", "bench", "full", "screen", "det-on-cpu", "report-html", "report-json")


def test_the_gpu_check_accepts_this_machine_first_then_runs_its_steps_at_cpu_sizes(tmp_path: Path) -> None:
    out = tmp_path / "check"
    env = {**os.environ, "FRAMEWORK": "pytorch", "ONLY": " ".join(STEPS)}
    proc = subprocess.run(
        ["bash", "scripts/gpu-check.sh", str(out), "--cpu"], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip
    summary = (out / "summary.txt").read_text()
    assert proc.returncode == 1, summary + proc.stderr[-2000:]  # one step did not pass: the acceptance, exit 3
    rows = {line.split()[0]: line.split()[1] for line in summary.splitlines() if " rc=" in line}
    assert next(iter(rows)) == "accept" and set(rows) == set(STEPS), summary  # accepted first; each step timed
    assert rows == {step: "rc=3" if step == "accept" else "rc=0" for step in STEPS}, summary
    verdict = json.loads((out / "accept" / "verdict.json").read_text())
    node = socket.gethostname().split(".")[0]
    assert [n["node"] for n in verdict["nodes"]] == [node] and verdict["exit_code"] == 3
    assert verdict["framework"] == "pytorch"
    (reason,) = [r for r in verdict["nodes"][0]["reasons"] if r["verdict"] != "pass"]
    assert reason["check"] == "peers" and "a node without GPUs is not judged on its speed alone" in reason["why"]
    assert f"{node} peers: cannot judge: 1 node(s)" in summary  # the summary names what could not be judged
    left = {x["check"]: x["why"] for x in verdict["left_out"]}
    assert left["stage pairs"] == "one node: no pair" and left["stage provision"] == "skipped (--skip)"
    store = Store.open(out / "results.sqlite", read_only=True)
    try:
        runs = [r for b in verdict["benches"] for r in store.runs(bench_id=b)]
    finally:
        store.close()
    assert runs and all(r.host == node and r.fingerprint.get("transport") == "local" for r in runs)  # no SSH
