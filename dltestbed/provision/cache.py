"""Keep caches bounded: every source change makes a new wheelhouse, image archive and image tag."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

KEEP = 2  # builds kept per kind: the current one and the one before (a host may still be on it)


def prune(entries: Iterable[Path], keep: int = KEEP, current: Path | None = None) -> list[Path]:
    """Remove all but the `keep` newest entries (files or folders, by mtime), never `current`; the removed."""
    ordered = sorted((p for p in entries if p.exists()), key=lambda p: p.stat().st_mtime, reverse=True)
    if current is not None and current in ordered:
        ordered.remove(current)
        ordered.insert(0, current)
    removed = []
    for p in ordered[keep:]:
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        removed.append(p)
    return removed
