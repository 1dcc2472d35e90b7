"""Before a bench runs anything: every cheap check first (target kinds, container runtimes and images
present, each host's VM settings and base image), then the expensive part (VMs made or reused, with
this build's workload in them). The result is one Site per machine; targets are made from it without
further work, once per run."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dltestbed.errors import ConfigError
from dltestbed.inventory import Host
from dltestbed.provision import image, vmready, wheelhouse
from dltestbed.provision.guestimage import GuestImage
from dltestbed.targets import GUEST_IMAGE_KINDS, STORE_IMAGE_KINDS, VM_KINDS, ContainerImage, Site, check_kind
from dltestbed.targets.container import ContainerOptions, options_from_vars

REMOTE_CONTAINERS_CONF = "/etc/dltestbed/containers.conf"  # written by the container_host role


@dataclass(frozen=True)
class Setup:
    """What a bench asks of its machines: the target kinds, the hosts (None: this machine), the
    container runtime for cbm (None: the host's or the detected one), and the --vm-* options over
    the inventory's dltestbed_vm_* variables."""

    kinds: tuple[str, ...]
    hosts: tuple[Host | None, ...] = (None,)
    runtime: str | None = None
    vm_overrides: Mapping[str, Any] = field(default_factory=dict)

    @property
    def uses_vms(self) -> bool:
        """Whether any kind runs in a VM."""
        return bool(VM_KINDS & set(self.kinds))


@dataclass(frozen=True)
class Checked:
    """A setup whose cheap checks passed: its sites (VMs not made yet) and each host's VM plan."""

    setup: Setup
    sites: list[Site]
    vms: list[vmready.VMPlan | None]


def check(setup: Setup) -> Checked:
    """Everything that costs no build, boot or install: a ConfigError line for the first problem."""
    for kind in setup.kinds:
        check_kind(kind)
    found: dict[str, image.Image | None] = {}

    def built(runtime: str) -> image.Image | None:  # looked up once per runtime: it hashes the source tree
        if runtime not in found:
            found[runtime] = image.find(runtime, wheelhouse.build("cpu")) if shutil.which(runtime) else None
        return found[runtime]

    guest: list[GuestImage] = []
    sites, vms = [], []
    for host in setup.hosts:
        container = _container(host, setup.runtime, built) if STORE_IMAGE_KINDS & set(setup.kinds) else None
        vm = None
        if setup.uses_vms:
            vm = vmready.plan(host, setup.vm_overrides, cvm=bool(GUEST_IMAGE_KINDS & set(setup.kinds)),
                              guest=guest[0] if guest else None)  # fmt: skip
            if not vm.settings.image and not guest:
                guest.append(vm.image)  # type: ignore[arg-type]  # the guest image, found once
        sites.append(Site(host=host, container=container))
        vms.append(vm)
    return Checked(setup, sites, vms)


def ready(checked: Checked, on_notice: Callable[[str], None] | None = None) -> list[Site]:
    """The sites with their VMs running and holding this build's workload (made or reused)."""
    out = []
    for site, vm in zip(checked.sites, checked.vms, strict=True):
        if vm is not None:
            rec, _, _ = vmready.ready(vm, on_notice)
            site = dataclasses.replace(site, vm=rec)
        out.append(site)
    return out


def _container(host: Host | None, runtime: str | None, built: Callable[[str], image.Image | None]) -> ContainerImage:
    """This build's workload image for cbm on a host, found in the controller's store."""
    if host is None:
        try:
            rt = runtime or image.detect_runtime()
            image.check_runtime(rt)
        except image.ImageError as exc:
            raise ConfigError(f"cbm: {exc}") from None
        img = built(rt)
        if img is None:
            raise ConfigError(f"cbm: no {rt} image for this dltestbed build; "
                              f"run `dltestbed image build --runtime {rt}`")  # fmt: skip
        return ContainerImage(rt, img.tag, img.digest, image.runtime_env(rt), ContainerOptions(gpus="auto"))
    opts = options_from_vars(host.vars)
    if "container_hosts" not in host.groups:
        raise ConfigError(f"cbm on {host.name}: the host is not in group container_hosts of the inventory")
    rt = runtime or str(host.vars.get("dltestbed_container_runtime") or "podman")
    img = built(rt)
    if img is None:
        raise ConfigError(f"cbm on {host.name}: no {rt} image for this dltestbed build here; run `dltestbed provision`")
    env = {"CONTAINERS_CONF": REMOTE_CONTAINERS_CONF} if rt == "podman" else {}
    return ContainerImage(rt, img.tag, img.digest, env, opts)


def hosts_of(sites: Sequence[Site]) -> list[Host | None]:
    """The hosts of some sites (None: this machine)."""
    return [s.host for s in sites]
