"""What the lab's controllers on this machine (Slurm's, Kubernetes') share: their processes found by their command
lines, and the last line of a log for a one-line error."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def pids_where(match: Callable[[list[bytes]], bool]) -> list[int]:
    """This machine's processes (not this one) whose command line, split into its arguments, `match` accepts."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if match(argv):
            out.append(int(entry.name))
    return out


def log_tail(path: Path, limit: int | None = None) -> str:
    """`: <the log's last line>` (at most `limit` characters), or "" when there is none: a message's tail."""
    lines = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
    return f": {lines[-1][:limit]}" if lines else ""
