"""Acceptance levels, as DCGM's diagnostic has them: how much each stage runs. One registered class per level
would hold nothing but these numbers, so a level is data. Pure."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dltestbed.choices import LEVELS as NAMES
from dltestbed.errors import ConfigError


@dataclass(frozen=True)
class Level:
    """How long and how often each stage measures."""

    name: str
    summary: str
    repeat: int  # repetitions of the model bench per node (and GPU)
    steps: int  # timed steps of a model run
    probe_steps: int  # timed calls of each probe case
    screen_seconds: float  # the screen, per GPU
    hold_seconds: float  # burn-in: rounds of the screen and the models held this long (0: none)


LEVELS: dict[str, Level] = {
    "quick": Level(
        "quick",
        NAMES["quick"],
        repeat=1,
        steps=20,
        probe_steps=5,
        screen_seconds=30.0,
        hold_seconds=0.0,
    ),
    "standard": Level(
        "standard",
        NAMES["standard"],
        repeat=3,
        steps=100,
        probe_steps=20,
        screen_seconds=300.0,
        hold_seconds=0.0,
    ),
    "burn-in": Level(
        "burn-in",
        NAMES["burn-in"],
        repeat=3,
        steps=100,
        probe_steps=20,
        screen_seconds=300.0,
        hold_seconds=4 * 3600.0,
    ),
}


def level(name: str) -> Level:
    """The level of that name, or one line that lists them."""
    if name not in LEVELS:
        raise ConfigError(f"--level {name!r}: unknown; known: {', '.join(LEVELS)}")
    return LEVELS[name]


def seconds(text: str, option: str = "--hold") -> float:
    """A duration such as 90s, 30m or 4h (a bare number: seconds), or one line that says how to write it."""
    units = {"s": 1.0, "m": 60.0, "h": 3600.0}
    t = text.strip().lower()
    unit = units.get(t[-1:])
    number = t[:-1] if unit is not None else t
    try:
        value = float(number) * (unit or 1.0)
    except ValueError:
        raise ConfigError(f"{option} {text!r}: give a duration such as 90s, 30m or 4h") from None
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{option} {text!r}: must be more than 0, and finite")
    return value
