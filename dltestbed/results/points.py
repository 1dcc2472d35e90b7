"""Results as InfluxDB line protocol: one point per step, resource sample and finished run. Pure.

Schema (documented in README, "InfluxDB stream"):
  dltestbed_step      tags RUN_TAGS + phase; fields images_per_sec, seconds, images, index; time = step end
  dltestbed_resource  tags RUN_TAGS; fields rss_bytes, cpu_percent, gpu<N>_memory_used_bytes,
                      gpu<N>_process_memory_bytes, gpu<N>_util_percent
  dltestbed_run       tags RUN_TAGS + status; fields images_per_sec, elapsed_seconds, timed_seconds,
                      steps_done, ok (1/0); time = when the run finished
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from influxdb_client import Point, WritePrecision

from dltestbed.results.records import RunRecord
from dltestbed.workload.events import ResourceEvent, StepEvent

MEASUREMENTS = ("dltestbed_step", "dltestbed_resource", "dltestbed_run")

RUN_TAGS = (
    "bench_id", "run_id", "scenario", "target_kind", "target_name", "host", "model", "data", "mode",
    "device", "batch_size", "image_size", "repetition", "contention", "role", "job_id", "worker_index",
)  # fmt: skip


def _tags(run: RunRecord) -> dict[str, str]:
    values: dict[str, Any] = {**run.to_dict(), "run_id": run.id}
    # An empty tag value is not allowed in line protocol: "-" stands for none.
    return {k: "-" if values.get(k) in (None, "") else str(values[k]) for k in RUN_TAGS}


def _ns(t: float) -> int:
    return round(t * 1e9)


def _point(measurement: str, run: RunRecord, t: float) -> Point:
    p = Point(measurement).time(_ns(t), WritePrecision.NS)
    for k, v in _tags(run).items():
        p.tag(k, v)
    return p


def step_line(run: RunRecord, ev: StepEvent) -> str:
    """A step as one line of line protocol (tags escaped by the client library)."""
    p = _point("dltestbed_step", run, ev.t).tag("phase", ev.phase)
    p.field("images_per_sec", float(ev.images_per_sec)).field("seconds", float(ev.seconds))
    return p.field("images", int(ev.images)).field("index", int(ev.index)).to_line_protocol()


def resource_line(run: RunRecord, ev: ResourceEvent) -> str:
    """A resource sample as one line."""
    p = _point("dltestbed_resource", run, ev.t)
    p.field("rss_bytes", int(ev.rss_bytes)).field("cpu_percent", float(ev.cpu_percent))
    for i, gpu in enumerate(ev.gpus):
        for key, value in gpu.items():
            if key != "index" and isinstance(value, int | float) and not isinstance(value, bool):
                p.field(f"gpu{gpu.get('index', i)}_{key}", float(value))
    return p.to_line_protocol()


def run_line(run: RunRecord) -> str:
    """A finished run as one line: its status and result."""
    t = datetime.fromisoformat(run.finished_at).timestamp() if run.finished_at else 0.0
    p = _point("dltestbed_run", run, t).tag("status", run.status)
    p.field("ok", int(run.status == "ok")).field("steps_done", int(run.steps_done))
    for name in ("images_per_sec", "elapsed_seconds", "timed_seconds"):
        value = getattr(run, name)
        if value is not None:
            p.field(name, float(value))
    return p.to_line_protocol()
