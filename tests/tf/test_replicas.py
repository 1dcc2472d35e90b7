"""The replica arithmetic on TensorFlow's logical CPU devices (a MirroredStrategy of 2 and 4 replicas, as a
node's GPUs would be): each replica its own batch, the loss and the update of one device on the global
batch, the images of every replica counted, and the all-reduce sums exact (tests/tf/replicas_run.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.tf


@pytest.mark.parametrize("n", [2, 4])
def test_n_replicas_compute_what_one_device_does_on_the_global_batch(n: int) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.tf.replicas_run", str(n)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["replicas"] == n
    assert got["distinct_batches"] == n  # strategy.run on a plain tensor would give every replica the same one
    dist, one = got["losses"]
    assert dist == pytest.approx(one, rel=1e-5)  # averaged over the global batch, not n times it
    assert got["weights_moved"] > 1e-4 and got["weights_diff"] < 1e-5 * max(1.0, got["weights_moved"])
    assert got["placed_once"]  # synthetic batches are put on the replicas once
    assert got["allreduce_bad"] == 0 and got["allreduce_count"] == 1024  # sum over replicas n(n+1)/2, exact
    assert got["images_per_step"] == 3 * n  # every replica's batch counted


def test_a_loss_scaled_step_reads_the_live_scale() -> None:
    """The optimizer is built before the step is traced: an unbuilt LossScaleOptimizer scales by its initial
    scale, which the trace keeps as a constant while the update divides by the live one."""
    proc = subprocess.run(
        [sys.executable, "-m", "tests.tf.replicas_run", "loss-scale"], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["scale"] < 2.0**15 / 64  # the scale did change between steps
    assert all(d < 1e-6 for d in got["diffs"]), got


def test_a_node_job_of_two_replicas_counts_both(tmp_path: object) -> None:
    """The workload with --gpus node on 2 logical CPU devices: a step is both replicas' batches, the summary
    counts them, and the fingerprint names the replicas and their all-reduce."""
    from dltestbed.workload.codec import parse_line
    from dltestbed.workload.events import StartEvent, StepEvent, SummaryEvent

    spec = {"model": "alexnet", "image_size": 32, "batch_size": 4, "warmup": 1, "steps": 3}
    proc = subprocess.run(
        [sys.executable, "-m", "dltestbed.workload", "--spec", json.dumps(spec | {"gpus": "node", "cpu_devices": 2})],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    events = [parse_line(line) for line in proc.stdout.splitlines()]
    start, summary = events[0], events[-1]
    assert isinstance(start, StartEvent) and isinstance(summary, SummaryEvent)
    fp = start.fingerprint
    assert (fp["replicas"], fp["local_replicas"], fp["workers"]) == (2, 2, 1)
    assert fp["collective"] == "ReductionToOneDevice"  # NCCL on GPUs
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert [s.images for s in steps] == [8] * 4 and summary.images == 24


def test_allreduce_between_a_nodes_devices_in_one_process() -> None:
    """The probe with --gpus node (acceptance's all of a node's GPUs together) on 2 logical CPU devices: every
    size timed and checked exact, its bus bandwidth derived as nccl-tests does (2(n−1)/n: n = 2 gives algbw)."""
    from dltestbed.workload.codec import parse_line
    from dltestbed.workload.events import CheckEvent, MeasureEvent, StartEvent

    spec = {"model": "micro", "probes": ["allreduce"], "gpus": "node", "cpu_devices": 2, "device": "cpu"}
    proc = subprocess.run(
        [sys.executable, "-m", "dltestbed.workload", "--spec", json.dumps(spec | {"warmup": 1, "steps": 2})],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    events = [parse_line(line) for line in proc.stdout.splitlines()]
    (start,) = [e for e in events if isinstance(e, StartEvent)]
    assert (start.fingerprint["replicas"], start.fingerprint["workers"]) == (2, 1)
    timed = [e for e in events if isinstance(e, MeasureEvent) and e.phase == "timed"]
    sizes = {e.case.rsplit(" ", 1)[0] for e in timed}
    assert sizes == {"4 KiB", "256 KiB", "4 MiB"}
    for e in timed:
        if e.case.endswith("busbw"):
            twin = next(t for t in timed if t.index == e.index and t.case == e.case.replace("busbw", "algbw"))
            assert e.value == pytest.approx(twin.value)  # 2(n-1)/n = 1 for n = 2
    checks = [e for e in events if isinstance(e, CheckEvent)]
    assert len(checks) == 3 and all(c.mismatches == 0 for c in checks)
