"""The controller's secrets in its environment (the stream's settings and token, INFLUXDB_V2_*): read
once at start and taken out of the process environment, so that no child inherits them — not
ansible-runner (which writes the environment it was given into its artifacts), a container CLI, ssh,
or a workload. Every command's environment is filtered again on its way out (`scrub`)."""

from __future__ import annotations

import os
from collections.abc import Mapping

SECRET_ENV_PREFIXES = ("INFLUXDB_V2_",)

_taken: dict[str, str] = {}


def is_secret(name: str) -> bool:
    """Whether an environment variable is one of dltestbed's secrets."""
    return name.startswith(SECRET_ENV_PREFIXES)


def take(fresh: bool = False) -> None:
    """Move the secrets from os.environ into this module; `fresh`: forget what earlier calls took (a
    new command starts)."""
    if fresh:
        _taken.clear()
    _taken.update({k: os.environ.pop(k) for k in [k for k in os.environ if is_secret(k)]})


def environ() -> dict[str, str]:
    """The environment as the user gave it: os.environ with the secrets that were taken from it."""
    return {**os.environ, **_taken}


def scrub(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without secrets."""
    return {k: v for k, v in env.items() if not is_secret(k)}
