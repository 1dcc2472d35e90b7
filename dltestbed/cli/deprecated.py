"""Old spellings that still work for one release: each use says, in one line on stderr, what replaces it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from dltestbed.deprecation import warn


def renamed(old: str, new: str) -> Callable[..., Any]:
    """A callback for a hidden option kept under its old name: a value given there is warned about."""

    def callback(value: Any) -> Any:
        if value not in (None, False, (), []):
            warn(old, new)
        return value

    return callback


def param(default: Any, old: str, new: str, **kwargs: Any) -> Any:
    """A hidden option under an old name that warns when used, for a parameter's default; the command maps its
    value to the new one (a group's field says the same with `opt(..., replaced_by=...)`)."""
    return typer.Option(default, old, hidden=True, callback=renamed(old, new), **kwargs)
