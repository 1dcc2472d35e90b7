"""Targets by kind: a registry, so an unknown kind is a config error that lists the known ones.

A target is made from a Site: one machine of a bench with what its targets need, found beforehand
(the container image, the VM record). Making a target runs nothing and makes nothing: images are
built by `image build` / `provision`, VMs by provision's VM service, both before any target exists."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from dltestbed.errors import ConfigError
from dltestbed.inventory import Host, over_ssh
from dltestbed.kinds import KINDS
from dltestbed.runtimes import RUNTIMES, ContainerOptions, runtime
from dltestbed.targets.asuser import AsUserTarget
from dltestbed.targets.base import CommandResult, Placement, Target, machine_under
from dltestbed.targets.container import ContainerTarget
from dltestbed.targets.local import LocalTarget
from dltestbed.targets.ssh import SSHTarget
from dltestbed.targets.unreachable import UnreachableTarget
from dltestbed.targets.vm import VMTarget
from dltestbed.vms import userimage
from dltestbed.vms.record import VMRecord

PODMAN = RUNTIMES["podman"]  # what dltestbed's guest image carries (cvm)


@dataclass(frozen=True)
class ContainerImage:
    """The workload image in a runtime's store on the machine: what cbm runs."""

    runtime: str
    tag: str
    digest: str
    runtime_env: Mapping[str, str] = field(default_factory=dict)  # for the runtime's CLI (e.g. CONTAINERS_CONF)
    options: ContainerOptions = field(default_factory=lambda: ContainerOptions(gpus="auto"))


@dataclass(frozen=True)
class DataPlace:
    """Where a site's copy of the bench's dataset lies: on its host (read by bm, mounted into cbm) and
    in its VM (read by vm, mounted into cvm); None where no copy was placed."""

    host: str | None = None
    vm: str | None = None


@dataclass(frozen=True)
class Site:
    """One machine of a bench: this machine (host None), an inventory host, or a machine a launcher's scheduler
    gave (placed), with its container image (cbm) and its VM (vm, cvm) when the bench uses them."""

    host: Host | None = None
    container: ContainerImage | None = None
    vm: VMRecord | None = None
    data: DataPlace = field(default_factory=DataPlace)
    placed: Placement | None = None  # a scheduler's machine (launchers/): how its bare metal is reached
    down: str | None = None  # why the machine did not answer when the bench began: its runs fail at once with it
    as_user: str | None = None  # --as-user: every workload on the machine runs as this unprivileged user
    # the bench's compile caches by kind: a folder on the machine that holds the kind's process (its host for bm and
    # cbm, its VM for vm and cvm), shared by the kind's runs (orchestrate/compilecache.py)
    caches: Mapping[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """For messages."""
        if self.placed is not None:
            return self.placed.label
        return "this machine" if self.host is None else self.host.name


Factory = Callable[[Site], Target]
_FACTORIES: dict[str, Factory] = {}


def register(kind: str) -> Callable[[Factory], Factory]:
    """Decorator: make a factory of targets available under its kind."""
    if kind not in KINDS:
        raise ValueError(f"unknown target kind {kind!r}")

    def deco(f: Factory) -> Factory:
        _FACTORIES[kind] = f
        return f

    return deco


def check_kind(kind: str) -> None:
    """A ConfigError naming the known kinds, for an unknown one."""
    if kind not in KINDS:
        raise ConfigError(f"unknown target kind {kind!r}; known: {', '.join(KINDS)}")


def factory(kind: str) -> Factory:
    """The factory of a kind, or a ConfigError naming the kinds that exist."""
    check_kind(kind)
    if kind not in _FACTORIES:
        available = ", ".join(sorted(_FACTORIES))
        raise ConfigError(f"target kind {kind!r} is not available in this version; available: {available}")
    return _FACTORIES[kind]


def make(kind: str, site: Site | None = None) -> Target:
    """A fresh target of `kind` on a site (default: this machine), ready to run; nothing is started.
    On a site that was down when the bench began, a target whose every run fails at once with why."""
    site = site or Site()
    make_one = factory(kind)
    if site.down is not None:
        return UnreachableTarget(kind, site.label, site.host.address if site.host else "", site.down)
    return make_one(site)


def _missing(kind: str, site: Site, what: str) -> ConfigError:
    return ConfigError(f"{kind} on {site.label}: {what} was not prepared for it (a bench prepares its sites first)")


@register("bm")
def _bm(site: Site) -> Target:
    return _as_user(site, _bare(site, site.caches.get("bm")))


def _as_user(site: Site, bare: Target) -> Target:
    return AsUserTarget(bare, site.as_user) if site.as_user else bare


def _bare(site: Site, cache: str | None = None) -> Target:
    """The machine's bare-metal target, as the user dltestbed reaches it as: a placed machine's (the scheduler's
    way to it), this machine's processes without an inventory host or for a local one (ansible_connection: local),
    else SSH; its workloads' compile caches in `cache`."""
    data = site.data.host
    if site.placed is not None:
        return site.placed.bare(data, cache)
    if site.host is None:
        return LocalTarget(name="local", data_dir=data, compile_cache=cache)
    if site.host.local:
        return LocalTarget(data_dir=data, spec=site.host, compile_cache=cache)
    return SSHTarget(site.host, data_dir=data, compile_cache=cache)


@register("cbm")
def _cbm(site: Site) -> Target:
    if site.placed is not None and (pod := site.placed.container(site.data.host, site.caches.get("cbm"))) is not None:
        return _as_user(site, pod)
    c = site.container
    if c is None:
        raise _missing("cbm", site, "the container image")
    rt = runtime(c.runtime)
    return ContainerTarget(
        _as_user(site, _bare(site)) if rt.rootless else _bare(site),  # a rootful runtime's CLI runs as dltestbed does
        rt,
        c.tag,
        c.digest,
        c.options,
        runtime_env=c.runtime_env,
        data_source=site.data.host,
        as_user=site.as_user,
        cache_source=site.caches.get("cbm"),
    )


@register("vm")
def _vm(site: Site) -> Target:
    if site.vm is None:
        raise _missing("vm", site, "the VM")
    return VMTarget(site.vm, via=over_ssh(site.host), data_dir=site.data.vm, compile_cache=site.caches.get("vm"))


@register("cvm")
def _cvm(site: Site) -> Target:
    rec = site.vm
    if rec is None:
        raise _missing("cvm", site, "the VM")
    if not rec.container_tag:  # a user's image: the bench's checks refuse this first
        raise userimage.refuse_cvm(site.host.name if site.host else None, rec.image_name)
    return ContainerTarget(
        _vm(site),
        PODMAN,
        rec.container_tag,
        rec.container_digest,
        kind="cvm",
        data_source=site.data.vm,
        cache_source=site.caches.get("cvm"),
    )


__all__ = [
    "KINDS",
    "CommandResult",
    "ContainerImage",
    "DataPlace",
    "Placement",
    "Site",
    "Target",
    "check_kind",
    "factory",
    "machine_under",
    "make",
    "register",
]
