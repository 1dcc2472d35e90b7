"""A Markdown table's row, spelled once for every table of the report."""

from __future__ import annotations

from collections.abc import Sequence


def row(cells: Sequence[str]) -> str:
    """`| a | b |`."""
    return "| " + " | ".join(cells) + " |"
