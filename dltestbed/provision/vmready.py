"""One service: "this host's benchmark VM exists, is current and has this build's workload".

`provision` calls it for each libvirt host (building the guest image when missing); `bench` calls it
for the hosts of a vm/cvm bench before any target is made (finding the guest image, never building
it). Both agree on a host's VM through `lifecycle.placement`."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dltestbed import hints
from dltestbed.errors import ConfigError
from dltestbed.inventory import Host
from dltestbed.provision import guest, guestimage, wheelhouse
from dltestbed.provision import image as ctr_image
from dltestbed.vms import lifecycle, userimage
from dltestbed.vms.hypervisor import Hypervisor
from dltestbed.vms.images import BaseImage
from dltestbed.vms.record import VMRecord
from dltestbed.vms.settings import VMSettings
from dltestbed.workload.frameworks import REGISTRY

Notice = Callable[[str], None]


def flavor(settings: VMSettings) -> str:
    """The TensorFlow build for a VM: dltestbed's guest image has the CPU build; a user's image with
    GPUs passed through gets the CUDA build installed."""
    return "gpu" if settings.image and settings.passthrough else "cpu"


def guest_image(build: bool, frameworks: Sequence[str] = ()) -> guestimage.GuestImage:
    """dltestbed's guest image of this build that carries these frameworks (`wheelhouse.carried`), or the one
    that carries the fewest more (a guest with PyTorch beside TensorFlow serves a TensorFlow bench: no second
    image of gigabytes); built when none is there and `build`, else a ConfigError saying how to build it."""
    img = next(filter(None, map(_found, wheelhouse.holding(frameworks))), None)
    if img is not None:
        return img
    if build:  # the guest image holds the CPU builds (see vm-images/README.md)
        house = wheelhouse.build("cpu", frameworks)
        return guestimage.build(house, ctr_image.build("podman", house))
    extra = wheelhouse.beside_default(frameworks)
    how = hints.image_build(None, extra)
    with_ = f" with {' and '.join(REGISTRY[f].label for f in extra)}" if extra else ""
    raise ConfigError(f"vm: no VM guest image{with_} for this dltestbed build; run `{how}`")


def _found(frameworks: Sequence[str]) -> guestimage.GuestImage | None:
    """The guest image of this build that carries exactly these frameworks, if it was built (nothing is built
    to look)."""
    house = wheelhouse.cached("cpu", frameworks)
    pod = ctr_image.find("podman", house) if house is not None and shutil.which("podman") else None
    return guestimage.find(house, pod) if house is not None and pod else None


@dataclass(frozen=True)
class VMPlan:
    """A host's VM as it will be: where, under which name, with which settings and base image."""

    host: Host | None  # None: this machine
    hv: Hypervisor
    name: str
    settings: VMSettings
    image: BaseImage
    frameworks: tuple[str, ...]  # those its workload carries (`wheelhouse.carried`)


def plan(
    host: Host | None,
    overrides: Mapping[str, Any] | None = None,
    *,
    build: bool = False,
    cvm: bool = False,
    guest: guestimage.GuestImage | None = None,
    frameworks: Sequence[str] = (),
) -> VMPlan:
    """Everything cheap about a host's VM, checked before anything is made: the host may hold one, its
    settings are valid, its base image is there (a user's, inspected; or the guest image, `guest` when
    the caller found it already), and cvm is not asked of a user's image."""
    hv, name, settings = lifecycle.placement(host, dict(overrides or {}))
    if settings.image:
        img: BaseImage = userimage.inspect(settings.image)
        if cvm:
            raise userimage.refuse_cvm(host.name if host else None, img.recorded_name)
    else:
        if settings.passthrough:
            where = f"VM on {host.name}" if host else "VM local"
            raise ConfigError(
                f"{where}: --vm-gpus needs a guest with the NVIDIA driver and TensorFlow's CUDA build; "
                "dltestbed's guest image is the CPU flavour (no driver), so its runs would use the CPU: "
                "give --vm-image a cloud image with the driver (vm-images/README.md); cvm needs "
                "dltestbed's guest image, so it has no GPU in this version"
            )
        img = guest or guest_image(build, frameworks)
    # the workload the VM gets: the guest image's own (it may carry more), or these frameworks' on a user's image
    carried = img.frameworks if isinstance(img, guestimage.GuestImage) else wheelhouse.carried(frameworks)
    return VMPlan(host, hv, name, settings, img, carried)


def ready(p: VMPlan, on_notice: Notice | None = None) -> tuple[VMRecord, bool, bool]:
    """The planned VM, running, with this build's workload: reused while current, else (re)made, the
    workload installed when missing or older. (record, made, workload installed)."""
    rec, made = lifecycle.ensure(p.name, p.image, p.settings, p.hv, on_notice)
    installed = guest.ensure_workload(
        rec, wheelhouse.build(flavor(p.settings), p.frameworks), via=p.hv.via, on_notice=on_notice
    )
    return rec, made, installed
