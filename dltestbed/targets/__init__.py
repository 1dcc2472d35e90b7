"""Targets by kind: a registry, so an unknown kind is a config error that lists the known ones."""

from __future__ import annotations

import functools
import shutil
from collections.abc import Callable
from typing import TYPE_CHECKING

from dltestbed.errors import ConfigError
from dltestbed.targets.base import CommandResult, Target

if TYPE_CHECKING:
    from dltestbed.provision.image import Image

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


def make(kind: str, host: object | None = None, runtime: str | None = None) -> Target:
    """A target of `kind`: on this machine when host is None, else on that inventory host.

    cbm wraps the bare-metal target of the same machine; its image must have been built
    (`dltestbed image build`), or this is a ConfigError that says so.
    """
    if kind not in KINDS:
        raise ConfigError(f"unknown target kind {kind!r}; known: {', '.join(KINDS)}")
    if host is not None:
        from dltestbed.targets.ssh import SSHTarget

        if kind == "cbm":
            return _remote_container(host, runtime)
        if kind != "bm":
            raise ConfigError(
                f"target kind {kind!r} on inventory hosts is not available in this version; available there: bm, cbm"
            )
        return SSHTarget(host)  # type: ignore[arg-type]
    if kind == "cbm":
        return _local_container(runtime)
    if kind in ("vm", "cvm"):
        return _local_vm_target(kind)
    return factory(kind)()


LOCAL_VM = "local"  # the VM the embedded default creates on this machine (`dltestbed teardown` removes it)
VM_SETTINGS: dict[str, object] = {"vcpus": 2, "memory_mib": 3072, "virt_type": None, "gpus": None}


@functools.cache
def _local_vm() -> object:
    """This machine's benchmark VM for this dltestbed build: reused while its image is current,
    recreated when the build changed (its workload would be stale), created when missing."""
    from dltestbed.provision import wheelhouse
    from dltestbed.vms import image as guest
    from dltestbed.vms import lifecycle

    pod = _built_image("podman")
    img = guest.find(wheelhouse.build("cpu"), pod) if pod else None
    if img is None:
        raise ConfigError("vm: no VM guest image for this dltestbed build; run `dltestbed image build`")
    rec = lifecycle.record(LOCAL_VM)
    settings = {k: v for k, v in VM_SETTINGS.items() if k in ("vcpus", "memory_mib", "gpus")}
    if rec is not None and rec.image_key == img.key and all(getattr(rec, k) == v for k, v in settings.items()):
        try:
            lifecycle.wait_ssh(rec, timeout=120)  # started earlier by a bench or provision: still there?
            return rec
        except lifecycle.VMError:
            pass
    lifecycle.delete(LOCAL_VM)
    notice = VM_SETTINGS.get("on_notice")
    return lifecycle.create(LOCAL_VM, img, vcpus=int(VM_SETTINGS["vcpus"]), memory_mib=int(VM_SETTINGS["memory_mib"]),  # type: ignore[call-overload]
                            virt_type=VM_SETTINGS["virt_type"], gpus=VM_SETTINGS["gpus"], on_notice=notice)  # type: ignore[arg-type]


def _local_vm_target(kind: str) -> Target:
    from dltestbed.targets.container import ContainerTarget
    from dltestbed.targets.vm import VMTarget

    rec = _local_vm()
    vm = VMTarget(rec)  # type: ignore[arg-type]
    if kind == "vm":
        return vm
    return ContainerTarget(vm, "podman", rec.container_tag, rec.container_digest, kind="cvm")  # type: ignore[attr-defined]


REMOTE_CONTAINERS_CONF = "/etc/dltestbed/containers.conf"  # written by the container_host role


@functools.cache
def _built_image(runtime: str) -> Image | None:
    """This build's workload image in the controller's `runtime` store, or None. Looked up once per
    process: a bench over many hosts would otherwise hash the source and inspect the image per host."""
    from dltestbed.provision import image, wheelhouse

    if not shutil.which(runtime):
        return None
    return image.find(runtime, wheelhouse.build("cpu"))


def _remote_container(host: object, runtime: str | None) -> Target:
    from dltestbed.targets.container import ContainerTarget, options_from_vars
    from dltestbed.targets.ssh import SSHTarget

    name = getattr(host, "name", "?")
    opts = options_from_vars(getattr(host, "vars", {}))
    if "container_hosts" not in getattr(host, "groups", ()):
        raise ConfigError(f"cbm on {name}: the host is not in group container_hosts of the inventory")
    rt = runtime or str(getattr(host, "vars", {}).get("dltestbed_container_runtime") or "podman")
    found = _built_image(rt)
    if found is None:
        raise ConfigError(f"cbm on {name}: no {rt} image for this dltestbed build here; run `dltestbed provision`")
    env = {"CONTAINERS_CONF": REMOTE_CONTAINERS_CONF} if rt == "podman" else {}
    return ContainerTarget(SSHTarget(host), rt, found.tag, found.digest, opts, runtime_env=env)  # type: ignore[arg-type]


def _local_container(runtime: str | None) -> Target:
    from dltestbed.provision import image
    from dltestbed.targets.container import ContainerTarget
    from dltestbed.targets.local import LocalTarget

    try:
        rt = runtime or image.detect_runtime()
        image.check_runtime(rt)
    except image.ImageError as exc:
        raise ConfigError(f"cbm: {exc}") from None
    found = _built_image(rt)
    if found is None:
        raise ConfigError(f"cbm: no {rt} image for this dltestbed build; run `dltestbed image build --runtime {rt}`")
    return ContainerTarget(LocalTarget(name="local"), rt, found.tag, found.digest, runtime_env=image.runtime_env(rt))


__all__ = ["KINDS", "CommandResult", "Target", "factory", "make", "register"]
