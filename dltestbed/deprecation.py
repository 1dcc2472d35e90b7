"""Old spellings that still work for one release: each use says, in one line on stderr, what replaces it."""

from __future__ import annotations

import sys

RELEASE = "0.3"  # the release that drops the old spellings


def warn(old: str, new: str) -> None:
    """Say that `old` is deprecated and what to write instead."""
    print(f"warning: {old} is deprecated and goes in dltestbed {RELEASE}; use {new}", file=sys.stderr, flush=True)
