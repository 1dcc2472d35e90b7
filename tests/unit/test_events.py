"""The line parser on captured workload output, and on malformed lines."""

from __future__ import annotations

import json

import pytest

from dltestbed.workload.codec import SCHEMA_VERSION, encode, parse_line
from dltestbed.workload.events import ErrorEvent, ResourceEvent, StartEvent, StepEvent, SummaryEvent, Unparsed
from tests.conftest import CAPTURED


def parse_file(name: str) -> list:
    return [parse_line(line) for line in (CAPTURED / name).read_text().splitlines()]


def test_successful_run_parses_completely() -> None:
    events = parse_file("alexnet_train_ok.jsonl")
    assert not [e for e in events if isinstance(e, Unparsed)]
    assert isinstance(events[0], StartEvent)
    assert isinstance(events[-1], SummaryEvent)
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert [s.index for s in steps] == [0, 1, 2, 3]
    assert [s.phase for s in steps] == ["warmup", "timed", "timed", "timed"]
    assert all(abs(s.images_per_sec - s.images / s.seconds) < 1e-6 for s in steps)
    summary = events[-1]
    timed = steps[1:]
    assert summary.timed_steps == 3 and summary.images == 24
    assert summary.timed_seconds == pytest.approx(sum(s.seconds for s in timed))
    assert summary.images_per_sec == pytest.approx(24 / summary.timed_seconds)
    assert summary.first_step_seconds == pytest.approx(steps[0].seconds)
    assert any(isinstance(e, ResourceEvent) and e.rss_bytes > 0 for e in events)
    start = events[0]
    assert start.spec["model"] == "alexnet" and start.spec["image_size"] == 64
    for key in ("host", "kernel", "cpu_model", "python", "tensorflow", "gpus"):
        assert key in start.fingerprint


@pytest.mark.parametrize(
    ("name", "kind", "text"),
    [
        ("missing_data_dir.jsonl", "config", "does not exist"),
        ("no_gpu.jsonl", "config", "no GPU is visible"),
        ("corrupt_jpeg.jsonl", "InvalidArgumentError", "step 0: Unknown image file format"),
        ("interrupted.jsonl", "interrupted", "interrupted"),
    ],
)
def test_failed_runs_end_with_an_error_event(name: str, kind: str, text: str) -> None:
    events = parse_file(name)
    assert not [e for e in events if isinstance(e, Unparsed)]
    last = events[-1]
    assert isinstance(last, ErrorEvent) and last.kind == kind and text in last.message
    assert not any(isinstance(e, SummaryEvent) for e in events)


def test_interrupted_run_keeps_its_steps() -> None:
    steps = [e for e in parse_file("interrupted.jsonl") if isinstance(e, StepEvent)]
    assert len(steps) > 5
    assert [s.index for s in steps] == list(range(len(steps)))


def _line(**fields: object) -> str:
    return json.dumps({"v": SCHEMA_VERSION, **fields})


STEP = {
    "event": "step",
    "index": 1,
    "phase": "timed",
    "images": 8,
    "seconds": 0.1,
    "images_per_sec": 80.0,
    "t": 1.0,
}


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("", "not a JSON object"),
        ("Welcome to Ubuntu 22.04 LTS", "not a JSON object"),
        ("{not json", "invalid JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"event": "step"}', "schema version None"),
        (json.dumps({"v": 99, **STEP}), "schema version 99"),
        (_line(event="bogus"), "unknown event 'bogus'"),
        (_line(event=7), "unknown event 7"),
        (_line(**{k: v for k, v in STEP.items() if k != "seconds"}), "without 'seconds'"),
        (_line(**{**STEP, "images": "8"}), "'images' has the wrong type"),
        (_line(**{**STEP, "images": True}), "'images' has the wrong type"),
        (_line(**{**STEP, "index": 1.5}), "'index' has the wrong type"),
        (_line(**{**STEP, "phase": "cooldown"}), "unknown phase"),
        (
            '{"v": 1, "event": "step", "index": 1, "phase": "timed", "images": 8, "seconds": NaN, '
            '"images_per_sec": 1, "t": 1}',
            "'seconds' is not finite",
        ),
        (_line(event="error", kind="x"), "without 'message'"),
        (_line(event="start", spec=[], fingerprint={}, t=1), "'spec' has the wrong type"),
    ],
)
def test_malformed_lines_are_unparsed_not_fatal(line: str, reason: str) -> None:
    ev = parse_line(line)
    assert isinstance(ev, Unparsed)
    assert reason in ev.reason
    assert ev.line == line


def test_resource_without_gpus_defaults_to_empty() -> None:
    ev = parse_line(_line(event="resource", t=1.0, rss_bytes=10, cpu_percent=5))
    assert ev == ResourceEvent(t=1.0, rss_bytes=10, cpu_percent=5, gpus=[])


@pytest.mark.parametrize(
    "ev",
    [
        StartEvent(spec={"model": "alexnet"}, fingerprint={"host": "h"}, t=1.5),
        StepEvent(index=3, phase="warmup", images=8, seconds=0.5, images_per_sec=16.0, t=2.0),
        ResourceEvent(t=3.0, rss_bytes=1 << 30, cpu_percent=150.0, gpus=[{"index": 0}]),
        SummaryEvent(
            timed_steps=2,
            images=16,
            timed_seconds=1.0,
            mean_images_per_sec=16.5,
            images_per_sec=16.0,
            elapsed_seconds=2.0,
            first_step_seconds=1.0,
            warmup_seconds=1.0,
        ),
        ErrorEvent(kind="config", message="bad"),
    ],
)
def test_encode_parse_round_trip(ev: object) -> None:
    line = encode(ev)  # type: ignore[arg-type]
    assert "\n" not in line
    assert parse_line(line) == ev


def test_a_resource_sample_under_the_allocators_former_name_is_read() -> None:
    """A workload of this schema that still says tf_gpu_bytes: read as gpu_bytes, not lost."""
    ev = parse_line('{"v":1,"event":"resource","t":1.0,"rss_bytes":1,"cpu_percent":0.0,"tf_gpu_bytes":[7]}')
    assert isinstance(ev, ResourceEvent) and ev.gpu_bytes == [7]
