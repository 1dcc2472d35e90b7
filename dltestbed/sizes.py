"""Memory sizes as the runtimes write them (4g, 512m): one parser for every --*-memory option."""

from __future__ import annotations

import re

from dltestbed.deprecation import warn
from dltestbed.errors import ConfigError

SIZE_RE = re.compile(r"^(\d+)([bkmg]?)$", re.IGNORECASE)  # Docker's and Podman's --memory: 512m, 4g
_PER_MIB = {"b": 1 / 2**20, "k": 1 / 1024, "m": 1, "g": 1024}


def mib(text: str, option: str) -> int:
    """`text` in MiB: a whole number with a unit b, k, m or g (binary, as Docker reads them; `3g`, `3072m`);
    a bare number is MiB. A ConfigError line for anything else or under 1 MiB."""
    m = SIZE_RE.match(text.strip())
    if not m:
        raise ConfigError(f"{option}: a size like 3g or 3072m (got {text!r})")
    value = int(m.group(1)) * _PER_MIB[(m.group(2) or "m").lower()]
    if value < 1:
        raise ConfigError(f"{option}: at least 1m (got {text!r})")
    return int(value)


def mib_or_bare(text: str | None, option: str) -> int | None:
    """An option's size in MiB (`mib`; None: not given); a bare number, the old MiB, still works, with a warning."""
    if text is None:
        return None
    if text.strip().isdigit():
        warn(f"{option} {text} (MiB without a unit)", f"{option} {text}m")
    return mib(text, option)
