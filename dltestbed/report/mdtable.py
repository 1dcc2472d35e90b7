"""A Markdown table's row, spelled once for every table of the report."""

from __future__ import annotations

from collections.abc import Sequence


def row(cells: Sequence[str]) -> str:
    """`| a | b |`."""
    return "| " + " | ".join(cells) + " |"


def head(cells: Sequence[str]) -> list[str]:
    """A table's header row and the line under it."""
    return [row(cells), "|" + "---|" * len(cells)]
