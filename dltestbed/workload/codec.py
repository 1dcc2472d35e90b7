"""Events as the workload's stdout lines (events.py says what each event is): `encode` writes one JSON line per
event, the schema version first, for the workload; `parse_line` (pure, never raises) reads one back for the
controller, every field's type checked: a line that is not a well-formed event comes back as `Unparsed`."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import Any

from dltestbed.workload.events import (
    AccuracyEvent,
    CheckEvent,
    ErrorEvent,
    Event,
    HealthEvent,
    MeasureEvent,
    ProbesDoneEvent,
    ResourceEvent,
    SkipEvent,
    StartEvent,
    StepEvent,
    SummaryEvent,
    Unparsed,
)

SCHEMA_VERSION = 1

_KINDS: dict[str, type] = {
    "start": StartEvent,
    "step": StepEvent,
    "resource": ResourceEvent,
    "health": HealthEvent,
    "summary": SummaryEvent,
    "accuracy": AccuracyEvent,
    "measure": MeasureEvent,
    "check": CheckEvent,
    "skip": SkipEvent,
    "probes_done": ProbesDoneEvent,
    "error": ErrorEvent,
}

# Field -> accepted JSON types, for the fields that must be numbers or strings.
_NUM = (int, float)
_TYPES: dict[str, dict[str, tuple[type, ...]]] = {
    "start": {"spec": (dict,), "fingerprint": (dict,), "t": _NUM},
    "step": {"index": (int,), "phase": (str,), "images": (int,), "seconds": _NUM, "images_per_sec": _NUM, "t": _NUM},
    "resource": {"t": _NUM, "rss_bytes": (int,), "cpu_percent": _NUM, "gpus": (list,)},
    "health": {"phase": (str,), "t": _NUM, "gpus": (list,)},
    "summary": {
        "timed_steps": (int,),
        "images": (int,),
        "timed_seconds": _NUM,
        "mean_images_per_sec": _NUM,
        "images_per_sec": _NUM,
        "elapsed_seconds": _NUM,
        "first_step_seconds": _NUM,
        "warmup_seconds": _NUM,
    },
    "accuracy": {"images": (int,), "correct": (int,), "loss": (*_NUM, str), "t": _NUM},
    "measure": {
        "probe": (str,),
        "case": (str,),
        "index": (int,),
        "phase": (str,),
        "value": _NUM,
        "unit": (str,),
        "seconds": _NUM,
        "t": _NUM,
    },
    "check": {
        "probe": (str,),
        "case": (str,),
        "kind": (str,),
        "elements": (int,),
        "mismatches": (int,),
        "worst": (*_NUM, str),
        "tolerance": _NUM,
        "seed": (int,),
        "t": _NUM,
    },
    "skip": {"probe": (str,), "case": (str,), "reason": (str,)},
    "probes_done": {"measures": (int,), "skips": (int,)},
    "error": {"kind": (str,), "message": (str,)},
}
# Fields an event may leave out (older workloads, or nothing to say): absent or null is None.
_OPTIONAL: dict[str, dict[str, tuple[type, ...]]] = {
    "step": {"device": (str,), "libraries": (dict,), "result": (*_NUM, str)},
    "resource": {"gpu_bytes": (list,)},
    "health": {"xids": (list,), "unseen": (list,)},
    "summary": {"startup_seconds": _NUM, "gpu_memory_peak_bytes": (int,), "compile_cache": (str,)},
    "check": {"gpu": (int,), "where": (str,), "rounds": (int,)},
}
# Fields a workload of this schema version sent under another name before (read as the new one)
_FORMERLY: dict[str, dict[str, str]] = {"resource": {"tf_gpu_bytes": "gpu_bytes"}}
# Fields that may hold a value that is not a finite number (a loss gone to NaN, an error that is inf): JSON has
# no NaN, so they travel as text.
_NON_FINITE = {"step": "result", "check": "worst", "accuracy": "loss"}
_NOT_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def encode(ev: Event) -> str:
    """One JSON line (no newline) for an event, with the schema version first."""
    body = asdict(ev)
    kind = body.pop("event")
    for name in _OPTIONAL.get(kind, ()):
        if body[name] is None:
            del body[name]  # e.g. a step's device: said once, on the first step
    odd = _NON_FINITE.get(kind, "")
    if isinstance(body.get(odd), float) and not math.isfinite(body[odd]):
        body[odd] = repr(body[odd])
    return json.dumps({"v": SCHEMA_VERSION, "event": kind, **body}, separators=(",", ":"))


def _wrong(value: Any, accepted: tuple[type, ...]) -> str | None:
    """What is wrong with a field's JSON value, or None."""
    if isinstance(value, str) and float in accepted and str in accepted:  # a _NON_FINITE field
        return None if value in _NOT_FINITE else f"{value!r} is not a number"
    if isinstance(value, bool) or not isinstance(value, accepted):
        return "has the wrong type"
    if isinstance(value, float) and not math.isfinite(value):
        return "is not finite"
    return None


def parse_line(line: str) -> Event:
    """Parse one stdout line of the workload into an event. Pure; never raises.

    Anything that is not a well-formed event of this schema version comes back as `Unparsed`
    with the reason, so a stray line (an SSH banner, a library's print) never kills a run.
    """
    text = line.strip()
    if not text.startswith("{"):
        return Unparsed(line, "not a JSON object")
    try:
        obj = json.loads(text)
    except ValueError as exc:
        return Unparsed(line, f"invalid JSON: {exc}")
    if not isinstance(obj, dict):
        return Unparsed(line, "not a JSON object")
    if obj.get("v") != SCHEMA_VERSION:
        return Unparsed(line, f"schema version {obj.get('v')!r}, expected {SCHEMA_VERSION}")
    kind = obj.get("event")
    if not isinstance(kind, str) or kind not in _KINDS:
        return Unparsed(line, f"unknown event {kind!r}")
    cls = _KINDS[kind]
    types = _TYPES[kind]
    values: dict[str, Any] = {}
    for name, accepted in types.items():
        if name not in obj:
            if name == "gpus":
                values[name] = []
                continue
            return Unparsed(line, f"{kind} event without {name!r}")
        value = obj[name]
        if why := _wrong(value, accepted):
            return Unparsed(line, f"{kind} event: {name!r} {why}")
        values[name] = _NOT_FINITE.get(value, value) if name == _NON_FINITE.get(kind) else value
    if kind in ("step", "measure") and values["phase"] not in ("warmup", "timed"):
        return Unparsed(line, f"{kind} event: unknown phase {values['phase']!r}")
    if kind == "health" and values["phase"] not in ("before", "after"):
        return Unparsed(line, f"health event: unknown phase {values['phase']!r}")
    if kind == "measure" and (values["value"] <= 0 or values["seconds"] <= 0):
        return Unparsed(line, "measure event: value and seconds must be positive")
    for old, new in _FORMERLY.get(kind, {}).items():
        if new not in obj and old in obj:
            obj[new] = obj[old]
    for name, accepted in _OPTIONAL.get(kind, {}).items():
        value = obj.get(name)
        if value is None:
            continue
        if why := _wrong(value, accepted):
            return Unparsed(line, f"{kind} event: {name!r} {why}")
        values[name] = _NOT_FINITE.get(value, value) if name == _NON_FINITE.get(kind) else value
    return cls(**values)
