"""A bench's plan of keyword arguments (planning.plan takes the request's groups): each argument goes to the group
that has a field of its name, as the command line would give it."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dltestbed.orchestrate import planning
from dltestbed.orchestrate.planning import Plan
from dltestbed.requests.bench import Compute, Repetitions, Workloads

GROUPS = (Workloads, Compute, Repetitions)


def plan_of(device: str = "auto", scenario: str = "single", preset_name: str = "quick", **given: Any) -> Plan:
    """planning.plan with each of `given` in its group (lists as tuples, a data folder as a path)."""
    parts: list[dict[str, Any]] = [{} for _ in GROUPS]
    for name, value in given.items():
        (i,) = [i for i, g in enumerate(GROUPS) if name in {f.name for f in dataclasses.fields(g)}]
        if isinstance(value, Sequence) and not isinstance(value, str):
            value = tuple(value)
        parts[i][name] = Path(value) if name == "data_dir" else str(value) if name == "repeat" else value
    w, c, r = (g(**p) for g, p in zip(GROUPS, parts, strict=True))
    return planning.plan(w, c, r, device, scenario, preset_name)  # type: ignore[arg-type]
