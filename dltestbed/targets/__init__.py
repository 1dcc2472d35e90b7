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
    (`dltestbed image build`), or this is a ConfigError that says so. vm and cvm use the machine's
    benchmark VM, made (or reused) with the guest image of this build.
    """
    if kind not in KINDS:
        raise ConfigError(f"unknown target kind {kind!r}; known: {', '.join(KINDS)}")
    if kind in ("vm", "cvm"):
        return _vm_target(kind, host)
    if host is not None:
        from dltestbed.targets.ssh import SSHTarget

        if kind == "cbm":
            return _remote_container(host, runtime)
        return SSHTarget(host)  # type: ignore[arg-type]
    if kind == "cbm":
        return _local_container(runtime)
    return factory(kind)()


VM_OVERRIDES: dict[str, object] = {}  # bench's --vm-* options, over the inventory's dltestbed_vm_* variables
VM_NOTICES: list[Callable[[str], None]] = []  # who hears "uploading…", "TCG…"
_VMS: dict[str | None, object] = {}  # per host name (None: this machine): its VM record, made once per process


def _guest_image() -> object:
    from dltestbed.provision import wheelhouse
    from dltestbed.vms import image as guest

    pod = _built_image("podman")
    img = guest.find(wheelhouse.build("cpu"), pod) if pod else None
    if img is None:
        raise ConfigError("vm: no VM guest image for this dltestbed build; run `dltestbed image build`")
    return img


def _vm_image(settings: object) -> object:
    """The VM's base image: the user's (dltestbed_vm_image / --vm-image), else dltestbed's guest image."""
    from dltestbed.vms import userimage

    path = getattr(settings, "image", None)
    return userimage.inspect(path) if path else _guest_image()


def preflight(kinds: list[str], hosts: list[object | None]) -> None:
    """Before any target is made: each host's VM settings and image are usable, and cvm is not asked
    of a VM that runs a user's image (which has no dltestbed container image)."""
    from dltestbed.vms import lifecycle, userimage

    if not {"vm", "cvm"} & set(kinds):
        return
    for host in hosts:
        _, _, settings = lifecycle.placement(host, VM_OVERRIDES)  # type: ignore[arg-type]
        if settings.image:
            img = userimage.inspect(settings.image)
            if "cvm" in kinds:
                _refuse_cvm(host, img.name)


def _refuse_cvm(host: object | None, image_name: str) -> None:
    on = f" on {getattr(host, 'name', '')}" if host is not None else ""
    raise ConfigError(f"cvm{on}: the VM would run your image {image_name}, which has no dltestbed container image; "
                      "cvm needs dltestbed's guest image (run vm alone with your image)")  # fmt: skip


def vm_record(host: object | None) -> object:
    """The benchmark VM of this machine (host None) or of an inventory host of group libvirt_hosts:
    reused while its image and settings are current, else (re)made; this build's workload checked
    in it (installed when a user's image lacks it)."""
    from dltestbed.provision import guest, wheelhouse
    from dltestbed.vms import lifecycle

    key = getattr(host, "name", None)
    if key in _VMS:
        return _VMS[key]
    hv, name, settings = lifecycle.placement(host, VM_OVERRIDES)  # type: ignore[arg-type]
    img = _vm_image(settings)

    def notice(line: str) -> None:
        for hear in VM_NOTICES:
            hear(line)

    rec, _ = lifecycle.ensure(name, img, settings, hv, notice)  # type: ignore[arg-type]
    guest.ensure_workload(rec, wheelhouse.build(vm_flavor(settings)), via=host, on_notice=notice)  # type: ignore[arg-type]
    _VMS[key] = rec
    return rec


def vm_flavor(settings: object) -> str:
    """The TensorFlow build for a VM: dltestbed's guest image has the CPU build; a user's image with
    GPUs passed through gets the CUDA build installed."""
    gpus = getattr(settings, "gpus", None) not in (None, "", "0")
    return "gpu" if getattr(settings, "image", None) and gpus else "cpu"


def _vm_target(kind: str, host: object | None) -> Target:
    from dltestbed.targets.container import ContainerTarget
    from dltestbed.targets.vm import VMTarget

    rec = vm_record(host)
    vm = VMTarget(rec, via=host)  # type: ignore[arg-type]
    if kind == "vm":
        return vm
    if not rec.container_tag:  # type: ignore[attr-defined]  # made from a user's image (preflight says so first)
        _refuse_cvm(host, rec.image_name)  # type: ignore[attr-defined]
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
