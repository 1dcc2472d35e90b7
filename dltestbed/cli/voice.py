"""One voice for every error line: `WHAT: what is allowed, or what to do (got VALUE)` — the voice of
dltestbed's own checks, given here to the parser's and pydantic's messages too."""

from __future__ import annotations

import re

from dltestbed.errors import plain

_CHOICE = re.compile(r"^'(?P<got>.*)' is not one of (?P<allowed>.*?)\.?$")


def bad_value(option: str, message: str, got: object | None = None) -> str:
    """`--device: one of auto, cpu, gpu (got 'tpu')` from the parser's message about a bad value."""
    message = message.strip().removeprefix("Value error, ")
    m = _CHOICE.match(message)
    if m:
        allowed = ", ".join(a.strip().strip("'") for a in m["allowed"].split(","))
        return f"{option}: one of {allowed} (got {m['got']!r})"
    text = plain(message.strip().rstrip("."))
    return f"{option}: {text}" + (f" (got {got!r})" if got is not None else "")
