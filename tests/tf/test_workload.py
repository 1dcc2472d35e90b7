"""The real workload with real TensorFlow at small sizes: every model, data kind and mode."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dltestbed.workload.codec import parse_line
from dltestbed.workload.events import ErrorEvent, ResourceEvent, StartEvent, StepEvent, SummaryEvent, Unparsed

pytestmark = pytest.mark.tf

SIZES = {"alexnet": 64, "resnet50": 32, "inception3": 75}


def workload(**fields: object) -> tuple[subprocess.CompletedProcess[str], list]:
    """The workload run by hand with a spec of these fields (validated by the workload itself)."""
    proc = subprocess.run(
        [sys.executable, "-m", "dltestbed.workload", "--spec", json.dumps(fields)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc, [parse_line(line) for line in proc.stdout.splitlines()]


# every pair of (model, data, mode) values in 6 runs instead of 12 (a pairwise design): each model with
# each kind of data and in each mode, each kind of data in each mode
PAIRWISE = [
    ("alexnet", "synthetic", "train"),
    ("alexnet", "real", "infer"),
    ("resnet50", "synthetic", "train"),
    ("resnet50", "real", "infer"),
    ("inception3", "real", "train"),
    ("inception3", "synthetic", "infer"),
]


def test_the_pairwise_design_covers_every_pair() -> None:
    values = [("alexnet", "resnet50", "inception3"), ("synthetic", "real"), ("train", "infer")]
    for i, j in ((0, 1), (0, 2), (1, 2)):
        assert {(c[i], c[j]) for c in PAIRWISE} == {(a, b) for a in values[i] for b in values[j]}


@pytest.mark.parametrize(("model", "data", "mode"), PAIRWISE)
def test_schema_of_a_real_run(model: str, data: str, mode: str, dataset_dir: Path) -> None:
    fields = {"model": model, "data": data, "mode": mode, "batch_size": 4, "image_size": SIZES[model]}
    fields |= {"warmup": 1, "steps": 3, "sample_interval": 0.2}
    if data == "real":
        fields["data_dir"] = str(dataset_dir)
    proc, events = workload(**fields)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert events and not [e for e in events if isinstance(e, Unparsed)], "stdout must be events only"
    start, summary = events[0], events[-1]
    assert isinstance(start, StartEvent) and isinstance(summary, SummaryEvent)
    assert start.spec["model"] == model and start.spec["image_size"] == SIZES[model]
    assert start.spec["classes"] == (3 if data == "real" else 1000)
    assert start.fingerprint["tensorflow"].startswith("2.")
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert [(s.index, s.phase) for s in steps] == [(0, "warmup"), (1, "timed"), (2, "timed"), (3, "timed")]
    assert all(s.images == 4 and s.seconds > 0 for s in steps)
    assert summary.timed_steps == 3 and summary.images == 12
    assert summary.images_per_sec == pytest.approx(12 / sum(s.seconds for s in steps[1:]))
    assert summary.elapsed_seconds >= summary.timed_seconds + summary.warmup_seconds
    assert summary.first_step_seconds == pytest.approx(steps[0].seconds)
    samples = [e for e in events if isinstance(e, ResourceEvent)]
    assert samples and all(s.rss_bytes > 100 << 20 for s in samples)  # TensorFlow is resident
    assert not any(isinstance(e, ErrorEvent) for e in events)


def test_cpu_device_hides_gpus() -> None:
    proc, events = workload(model="alexnet", image_size=32, batch_size=2, warmup=0, steps=1, device="cpu", mode="infer")
    assert proc.returncode == 0, proc.stderr[-2000:]
    fp = events[0].fingerprint
    assert fp["cuda_visible_devices"] == "" and fp["gpus_visible_to_tf"] == 0


def test_gpu_device_without_gpu_fails_cleanly() -> None:
    proc, events = workload(model="alexnet", image_size=32, steps=1, device="gpu")
    assert proc.returncode == 2
    assert isinstance(events[-1], ErrorEvent) and "no GPU is visible to TensorFlow" in events[-1].message


def test_corrupt_images_fail_at_the_step_with_a_message(tmp_path: Path) -> None:
    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        for i in range(4):
            (tmp_path / cls / f"{i}.jpg").write_bytes(b"not a jpeg")
    proc, events = workload(
        model="alexnet", image_size=32, batch_size=2, warmup=0, steps=2, data="real", data_dir=str(tmp_path)
    )
    assert proc.returncode == 1
    err = events[-1]
    assert isinstance(err, ErrorEvent) and err.message.startswith("step 0: Unknown image file format")
    assert "Traceback" in proc.stderr  # the detail is on stderr, for the run's log


def test_mixed_precision_with_xla_runs_and_says_what_it_used() -> None:
    """`mixed` becomes bfloat16 on a CPU (oneDNN computes it), the step compiles with XLA, and the start event
    says the math the run used."""
    proc, events = workload(model="alexnet", image_size=32, batch_size=4, warmup=1, steps=2, math="mixed", xla=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    start, summary = events[0], events[-1]
    assert isinstance(start, StartEvent) and start.spec["math"] == "mixed_bfloat16" and start.spec["xla"] is True
    assert isinstance(summary, SummaryEvent) and summary.timed_steps == 2 and summary.startup_seconds > 0


def test_out_of_memory_is_said_in_tensorflows_own_line() -> None:
    """A real allocation failure (the address space capped at 6 GiB, a batch of 65536 AlexNet images): the
    error event holds TensorFlow's OOM line, not its "Graph execution error:" header."""
    import resource

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dltestbed.workload",
            "--spec",
            json.dumps({"model": "alexnet", "image_size": 224, "batch_size": 65536, "warmup": 0, "steps": 1}),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=cap,
    )
    events = [parse_line(line) for line in proc.stdout.splitlines()]
    err = events[-1]
    assert proc.returncode == 1 and isinstance(err, ErrorEvent), proc.stderr[-3000:]
    assert err.kind == "ResourceExhaustedError" and "OOM when allocating tensor with shape[65536," in err.message
    assert "Graph execution error" not in err.message and "[Op:" not in err.message and "\n" not in err.message
