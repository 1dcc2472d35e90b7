"""Acceptance levels, as DCGM's diagnostic has them: how much each stage runs. One registered class per level
would hold nothing but these numbers, so a level is data. Pure."""

from __future__ import annotations

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
