"""What an acceptance is asked: the library call's input (`dltestbed accept`'s options)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dltestbed.choices import UNREACHABLE
from dltestbed.report import FLEET_MIN_SLOWDOWN


@dataclass(frozen=True)
class AcceptRequest:
    """One acceptance of an inventory's nodes."""

    inventory: Path
    out: Path  # the evidence pack's folder (and the acceptance's progress, for --resume)
    level: str = "quick"  # levels.LEVELS
    results: Path | None = None  # the store its benches go to (None: the default)
    resume: bool = False
    golden: Path | None = None  # a golden spec of facts (YAML: fact → value); else the fleet's majority
    expected: Path | None = None  # a site's expected values per board, over the shipped ones
    slowdown: float = FLEET_MIN_SLOWDOWN  # % below its peers' median a node must be (with z < −3.5) to be slow
    parallel: int | None = None  # nodes measured at once at most (None: all at once; 1: one after another)
    skip: tuple[str, ...] = ()  # stages not to run (stages.STAGES' names)
    framework: str | None = None  # None: the one installed on every node (preflight reads it), the default first
    hold_seconds: float | None = None  # burn-in: how long (None: the level's)
    sign_key: Path | None = None  # an SSH private key: the pack's manifest is signed with it
    on_fail: str | None = None  # remedy.DRAIN, or a site's command with {node} and {reason}
    on_pass: str | None = None  # remedy.RESUME, or a site's command
    apply: bool = False  # run the remedies (else they are shown, a dry run)
    limit: str | None = None  # only these hosts or groups of the inventory
    unreachable: str = UNREACHABLE[0]  # the verdict of a node left out: cannot judge (the default), or fail
