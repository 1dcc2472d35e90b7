"""The whole commands that a message tells the user to run to mend something: each option they need is named
(a value the message cannot know is written as the option's metavar, e.g. INVENTORY). Pure: text only."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

SAME_OPTIONS = "(with the same options)"  # after a hint that keeps the rest of the command as the user typed it


def _frameworks(extra: Sequence[str]) -> str:
    return "".join(f" --framework {f}" for f in extra)


def image_build(runtime: str | None = None, extra: Sequence[str] = ()) -> str:
    """Makes this build's workload image (for `runtime`; None: the one `image build` detects) carrying the
    frameworks in `extra` beside the default."""
    named = f" --runtime {runtime}" if runtime else ""
    return f"dltestbed image build{named}{_frameworks(extra)}"


def provision(inventory: Path | str | None = None, host: str | None = None, extra: Sequence[str] = ()) -> str:
    """Provisions a host of an inventory (every bare_metal host's first, without `host`), with `extra`'s frameworks:
    its host key recorded, the workload installed, its image or VM made."""
    inv = shlex.quote(str(inventory)) if inventory is not None else "INVENTORY"
    limit = f" --limit {shlex.quote(host)}" if host else ""
    return f"dltestbed provision --layout single --inventory {inv}{limit}{_frameworks(extra)}"


def accept_resume(inventory: Path | str, out: Path | str, init: bool = False) -> str:
    """Goes on with an acceptance from its folder (said with SAME_OPTIONS after it)."""
    first = " --init" if init else ""
    return f"dltestbed accept{first} --inventory {shlex.quote(str(inventory))} --out {shlex.quote(str(out))} --resume"
