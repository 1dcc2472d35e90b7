"""One voice for every error line: `WHAT: what is allowed, or what to do (got VALUE)` — the voice of
dltestbed's own checks, given here to the parser's and pydantic's messages too."""

from __future__ import annotations

import re

from dltestbed.errors import plain

_CHOICE = re.compile(r"^'(?P<got>.*)' is not one of (?P<allowed>.*?)\.?$")


def bad_value(option: str, message: str, got: object | None = None) -> str:
    """`--device: one of auto, cpu, gpu (got 'tpu')` from the parser's message about a bad value."""
    message = plain(message.strip())
    m = _CHOICE.match(message)
    if m:
        allowed = ", ".join(a.strip().strip("'") for a in m["allowed"].split(","))
        return f"{option}: one of {allowed} (got {m['got']!r})"
    return f"{option}: {message.rstrip('.')}" + (f" (got {got!r})" if got is not None else "")


def bad_parameter(exc: Exception, argv: list[str]) -> str:
    """A bad option value in dltestbed's voice: the option, what it takes, the value given."""
    param = getattr(exc, "param", None)
    names = [n for n in getattr(param, "opts", ()) if n.startswith("--")] or list(getattr(param, "opts", ()))
    option = names[0] if names else getattr(exc, "param_hint", None) or "value"
    raw = getattr(exc, "message", str(exc))
    return bad_value(option, raw, None if "is not one of" in raw else _given(argv, option))


def _given(args: list[str], option: str) -> str | None:
    """The text the command line gave `option` (a parser error comes before any value is kept)."""
    for i, a in enumerate(args):
        if a == option and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(option + "="):
            return a.split("=", 1)[1]
    return None
