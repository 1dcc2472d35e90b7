"""Results as InfluxDB line protocol: one point per step, resource sample and finished run. Pure.

Schema (documented in docs/reference.md, "InfluxDB stream"):
  dltestbed_step      tags RUN_TAGS + phase; fields images_per_sec, seconds, images, index, result (the loss,
                      where finite); time = step end
  dltestbed_resource  tags RUN_TAGS; fields rss_bytes, cpu_percent, gpu<N>_<field> for each numeric field of
                      GPU N's sample (memory_used_bytes, util_percent, sm_clock_mhz, power_watts, temperature_c,
                      clock_reasons, pcie_*), alloc_gpu<N>_bytes (the framework's allocator)
  dltestbed_measure   tags RUN_TAGS + probe, case, unit, phase; fields value, seconds, index; time = measure end
                      (microbenchmark runs: model micro, mode probe)
  dltestbed_run       tags RUN_TAGS + status; fields images_per_sec, elapsed_seconds, timed_seconds,
                      steps_done, ok (1/0); time = when the run finished
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from dltestbed.results.records import RunRecord
from dltestbed.workload.events import MeasureEvent, ResourceEvent, StepEvent

RUN_TAGS = (
    "bench_id",
    "run_id",
    "scenario",
    "target_kind",
    "target_name",
    "host",
    "model",
    "data",
    "mode",
    "device",
    "batch_size",
    "image_size",
    "repetition",
    "contention",
    "role",
    "job_id",
    "worker_index",
)

# Line protocol escaping, as influxdb-client does it: commas and spaces (and, in tag keys and values
# and field keys, equals signs) get a backslash; newline, tab and carriage return become \n, \t, \r.
_CONTROL = {"\n": r"\n", "\t": r"\t", "\r": r"\r"}
_ESCAPE_MEASUREMENT = str.maketrans({",": r"\,", " ": r"\ ", **_CONTROL})
_ESCAPE_TAG = str.maketrans({",": r"\,", " ": r"\ ", "=": r"\=", **_CONTROL})


def escape_tag(text: str) -> str:
    """A tag key or value (or field key) escaped for line protocol."""
    return text.translate(_ESCAPE_TAG)


def series(measurement: str, run: RunRecord, **extra: str) -> str:
    """`measurement,tag=value,...` for a run: what every point of the run starts with. An empty tag
    value is not allowed in line protocol: "-" stands for none."""
    values: dict[str, Any] = {**run.__dict__, "run_id": run.id, **extra}
    tags = {k: "-" if values.get(k) in (None, "") else str(values[k]) for k in (*RUN_TAGS, *extra)}
    body = ",".join(f"{escape_tag(k)}={escape_tag(v)}" for k, v in sorted(tags.items()))
    return f"{measurement.translate(_ESCAPE_MEASUREMENT)},{body}"


def _float(v: float) -> str:
    if not math.isfinite(v):
        raise ValueError(f"line protocol has no {v}")
    return repr(float(v))


def _ns(t: float) -> int:
    return round(t * 1e9)


def step_line(run: RunRecord, ev: StepEvent, prefix: str | None = None) -> str:
    """A step as one line; `prefix` is series("dltestbed_step", run, phase=ev.phase), when the caller keeps it."""
    head = prefix or series("dltestbed_step", run, phase=ev.phase)
    result = f",result={_float(ev.result)}" if ev.result is not None and math.isfinite(ev.result) else ""
    return (
        f"{head} images={int(ev.images)}i,images_per_sec={_float(ev.images_per_sec)},"
        f"index={int(ev.index)}i{result},seconds={_float(ev.seconds)} {_ns(ev.t)}"
    )


def measure_line(run: RunRecord, ev: MeasureEvent) -> str:
    """A microbenchmark measure as one line."""
    head = series("dltestbed_measure", run, probe=ev.probe, case=ev.case, unit=ev.unit, phase=ev.phase)
    return f"{head} index={int(ev.index)}i,seconds={_float(ev.seconds)},value={_float(ev.value)} {_ns(ev.t)}"


def resource_line(run: RunRecord, ev: ResourceEvent, prefix: str | None = None) -> str:
    """A resource sample as one line."""
    fields = {"cpu_percent": _float(ev.cpu_percent), "rss_bytes": f"{int(ev.rss_bytes)}i"}
    for i, gpu in enumerate(ev.gpus):
        for key, value in gpu.items():
            if key != "index" and isinstance(value, int | float) and not isinstance(value, bool):
                fields[escape_tag(f"gpu{gpu.get('index', i)}_{key}")] = _float(value)
    for i, held in enumerate(ev.gpu_bytes or ()):  # the framework's allocator, per GPU it sees
        fields[f"alloc_gpu{i}_bytes"] = f"{int(held)}i"
    body = ",".join(f"{k}={v}" for k, v in sorted(fields.items()))
    return f"{prefix or series('dltestbed_resource', run)} {body} {_ns(ev.t)}"


def run_line(run: RunRecord) -> str:
    """A finished run as one line: its status and result."""
    t = datetime.fromisoformat(run.finished_at).timestamp() if run.finished_at else 0.0
    fields = {"ok": f"{int(run.status == 'ok')}i", "steps_done": f"{int(run.steps_done)}i"}
    for name in ("elapsed_seconds", "images_per_sec", "timed_seconds"):
        value = getattr(run, name)
        if value is not None:
            fields[name] = _float(value)
    body = ",".join(f"{k}={v}" for k, v in sorted(fields.items()))
    return f"{series('dltestbed_run', run, status=run.status)} {body} {_ns(t)}"
