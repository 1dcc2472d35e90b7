"""Targets by kind: a registry, so an unknown kind is a config error that lists the known ones."""

from __future__ import annotations

from collections.abc import Callable

from dltestbed.errors import ConfigError
from dltestbed.targets.base import CommandResult, Target

KINDS: dict[str, str] = {
    "bm": "bare metal: the workload runs directly on the host",
    "vm": "a libvirt VM on the host",
    "cbm": "a container on bare metal",
    "cvm": "a container in a VM",
}

_FACTORIES: dict[str, Callable[..., Target]] = {}


def register(kind: str) -> Callable[[Callable[..., Target]], Callable[..., Target]]:
    """Class decorator: make a target implementation available under its kind."""
    if kind not in KINDS:
        raise ValueError(f"unknown target kind {kind!r}")

    def deco(factory: Callable[..., Target]) -> Callable[..., Target]:
        _FACTORIES[kind] = factory
        return factory

    return deco


def factory(kind: str) -> Callable[..., Target]:
    """The implementation of a kind, or a ConfigError naming the kinds that exist."""
    from dltestbed.targets import local  # noqa: F401  (registers bm)

    if kind not in KINDS:
        raise ConfigError(f"unknown target kind {kind!r}; known: {', '.join(KINDS)}")
    if kind not in _FACTORIES:
        available = ", ".join(sorted(_FACTORIES))
        raise ConfigError(f"target kind {kind!r} is not available in this version; available: {available}")
    return _FACTORIES[kind]


def make(kind: str, host: object | None = None) -> Target:
    """A target of `kind`: on this machine when host is None, else on that inventory host."""
    if host is None:
        return factory(kind)()
    if kind != "bm":
        raise ConfigError(f"target kind {kind!r} on inventory hosts is not available in this version; available: bm")
    from dltestbed.targets.ssh import SSHTarget

    return SSHTarget(host)  # type: ignore[arg-type]


__all__ = ["KINDS", "CommandResult", "Target", "factory", "make", "register"]
