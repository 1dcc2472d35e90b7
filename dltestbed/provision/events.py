"""ansible-runner events → per-host outcomes. Pure: tested on captured events."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


@dataclass
class HostOutcome:
    """What a playbook did on one host."""

    name: str
    ok: int = 0
    changed: int = 0
    failed: int = 0
    skipped: int = 0
    unreachable: bool = False
    message: str | None = None  # the first failure, in one line
    task: str | None = None  # the task it was on (or failed in)
    reported: dict[str, Any] = field(default_factory=dict)  # variables shown by debug tasks

    @property
    def succeeded(self) -> bool:
        """Reached, and no task failed."""
        return not self.unreachable and not self.failed


def _one_line(text: str, limit: int = 300) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return (lines[0] if lines else "")[:limit]


def failure_message(res: dict[str, Any]) -> str:
    """One line for a failed task's result, naming the usual causes plainly."""
    nested = res.get("failed_modules")
    if isinstance(nested, dict) and nested:
        return failure_message(next(iter(nested.values())))
    stderr = str(res.get("module_stderr") or res.get("stderr") or "")
    msg = str(res.get("msg") or "")
    if res.get("rc") == 127 and ("python" in (stderr + msg).lower() or "MODULE FAILURE" in msg):
        m = re.search(r"(/\S+): not found", stderr) or re.search(r"interpreter '([^']+)' was not found", msg)
        where = m.group(1) if m else "the configured interpreter"
        return f"no Python 3 at {where} (install python3 or set ansible_python_interpreter)"
    if "No python interpreters found" in msg or "interpreter discovery" in msg.lower():
        return "no Python 3 found on the host (install python3 or set ansible_python_interpreter)"
    text = msg or stderr or str(res.get("stdout") or "") or "task failed"
    if msg.startswith("MODULE FAILURE") and stderr:
        text = stderr
    return _one_line(text)


def apply(hosts: dict[str, HostOutcome], event: dict[str, Any]) -> str | None:
    """Update outcomes with one event; returns the host it concerned (or None)."""
    kind = event.get("event", "")
    data = event.get("event_data") or {}
    name = data.get("host")
    if not name or not kind.startswith("runner_on_"):
        return None
    h = hosts.setdefault(name, HostOutcome(name))
    task = data.get("task")
    res = data.get("res") or {}
    h.task = task or h.task
    if kind == "runner_on_ok":
        h.ok += 1
        if res.get("changed"):
            h.changed += 1
        for key, value in res.items():
            if key.startswith("dltestbed_"):
                h.reported[key] = value
    elif kind == "runner_on_failed":
        if data.get("ignore_errors"):
            return name
        h.failed += 1
        if h.message is None:
            h.message = f"{task}: {failure_message(res)}"
    elif kind == "runner_on_unreachable":
        h.unreachable = True
        if h.message is None:
            msg = _one_line(res.get("msg") or "no connection")
            h.message = f"unreachable: {msg.split('over ssh: ', 1)[-1]}"
    elif kind == "runner_on_skipped":
        h.skipped += 1
    else:
        return None
    return name
