"""Pure parsers of Slurm's output (salloc, scontrol, srun's stderr), tested on captured text."""

from __future__ import annotations

import re
from collections.abc import Iterable

_FIELD = re.compile(r"(?:^|\s)([A-Za-z][\w/:.]*)=")
_CANCELLED = re.compile(
    r"\*\*\* (?:JOB|STEP) (\S+) ON (\S+) CANCELLED AT (\S+)"
    r"(?: DUE TO ([A-Z][A-Z _]*?))?(?: \*\*\*|$)"
)
_JOB_ID = re.compile(r"job allocation (\d+)")
# job states that end a job, as `scontrol show job` names them
ENDED_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "TIMEOUT",
        "REVOKED",
        "SPECIAL_EXIT",
    }
)


def fields(line: str) -> dict[str, str]:
    """One `scontrol show ... -o` record: Key=Value pairs; a value runs to the next ` Key=` (so values
    with spaces, a job name or a comment, stay whole)."""
    out: dict[str, str] = {}
    marks = list(_FIELD.finditer(line))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(line)
        out[m.group(1)] = line[m.end() : end].strip()
    return out


def records(text: str) -> list[dict[str, str]]:
    """Every record of `scontrol show job|node -o` output (one per line)."""
    return [fields(line) for line in text.splitlines() if "=" in line]


def partitions(text: str) -> tuple[dict[str, set[str]], str | None]:
    """`sinfo -h -N -o "%N %P"` → (partition → its nodes, the default partition, marked * by sinfo)."""
    out: dict[str, set[str]] = {}
    default = None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 2:
            continue
        name = parts[1].rstrip("*")
        if parts[1].endswith("*"):
            default = name
        out.setdefault(name, set()).add(parts[0])
    return out, default


def granted(line: str) -> tuple[str, str] | None:
    """The allocation holder's first line, "JOBID NODELIST" → (job id, node list); None otherwise."""
    parts = line.split()
    if len(parts) == 2 and parts[0].isdigit():
        return parts[0], parts[1]
    return None


def job_id_in(lines: Iterable[str]) -> str | None:
    """The job id salloc names on stderr ("Pending job allocation 12", "Granted job allocation 12")."""
    for line in lines:
        if m := _JOB_ID.search(line):
            return m.group(1)
    return None


def cancelled(lines: Iterable[str]) -> str | None:
    """slurmstepd's "*** JOB 12 ON node1 CANCELLED AT ... DUE TO TIME LIMIT ***" as a phrase:
    "cancelled at 2026-11-24T04:59:09 due to time limit" (the last such line), or None."""
    found = None
    for line in lines:
        if m := _CANCELLED.search(line):
            why = f" due to {m.group(4).strip().lower()}" if m.group(4) else ""
            found = f"cancelled at {m.group(3)}{why}"
    return found


def ended(job: dict[str, str]) -> str | None:
    """How the scheduler ended a job, from its `scontrol show job` record: "TIMEOUT (TimeLimit)";
    None while it runs. A job still being cleaned up (COMPLETING) is told by its reason alone."""
    state = job.get("JobState", "")
    reason = job.get("Reason", "None")
    reason = "" if reason == "None" else reason
    if state == "COMPLETING":
        return reason or None
    if state in ENDED_STATES:
        return state + (f" ({reason})" if reason else "")
    return None
