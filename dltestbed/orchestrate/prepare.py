"""Before a bench runs anything: every cheap check first (target kinds, container runtimes and images
present, each host's VM settings and base image), then the expensive part (VMs made or reused, with
this build's workload in them). The result is one Site per machine; targets are made from it without
further work, once per run."""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dltestbed import hints
from dltestbed.errors import ConfigError, DltestbedError
from dltestbed.inventory import Host, over_ssh, this_machine
from dltestbed.kinds import any_kind
from dltestbed.orchestrate import dataplace, scenarios, unprivileged
from dltestbed.provision import facts, image, localfacts, userstore, vmready, wheelhouse
from dltestbed.provision.guestimage import GuestImage
from dltestbed.runtimes import HOST_RUNTIME, RUNTIMES, ContainerOptions
from dltestbed.targets import ContainerImage, Site, check_kind, make
from dltestbed.targets.container import check_limits, options_from_vars
from dltestbed.transport.ssh import SSH
from dltestbed.vms.settings import VMSettings
from dltestbed.workload.frameworks import REGISTRY

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
    container_limits: Mapping[str, str | None] = field(default_factory=dict)  # cpuset, memory: over the inventory's
    dataset: dataplace.Dataset | None = None  # real data: placed where each kind reads it
    inventory: Path | None = None  # the hosts' inventory (the dataset role runs on it)
    frameworks: tuple[str, ...] = ()  # those the bench runs: a container image must carry each
    as_user: str | None = None  # --as-user: every workload runs as this unprivileged user

    @property
    def uses_vms(self) -> bool:
        """Whether any kind runs in a VM."""
        return any_kind(self.kinds, lambda k: k.in_vm)


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
    unprivileged.check(setup.as_user, setup.kinds, setup.runtime, setup.hosts)
    if setup.dataset is not None:
        dataplace.check(setup.dataset, setup.kinds, setup.hosts)
        unprivileged.check_data(setup.as_user, setup.dataset.source, setup.hosts)
    limits: dict[str, Any] = {k: v for k, v in setup.container_limits.items() if v is not None}
    here = all(this_machine(h) for h in setup.hosts)  # its CPUs are this machine's
    check_limits(limits.get("cpuset"), limits.get("memory"), set(os.sched_getaffinity(0)) if here else None)
    found: dict[tuple[str, str], image.Image | None] = {}

    def built(runtime: str, flavor: str) -> image.Image | None:  # once per runtime and flavour: it hashes the tree
        if (runtime, flavor) not in found:
            house = wheelhouse.cached(flavor, setup.frameworks)  # never built by a check: none, no image of this build
            rt = RUNTIMES.get(runtime)
            usable = house is not None and rt is not None and shutil.which(rt.command) is not None
            found[runtime, flavor] = find_image(runtime, house) if usable and house is not None else None
        return found[runtime, flavor]

    for host in setup.hosts:  # every host's values first: no host is contacted while another's are wrong
        if host is not None:
            check_host_values(host, setup)
    down = check_host_keys(setup.hosts)  # before the first command on a host (its flavour, for cbm)
    if down and len(down) == len(setup.hosts):
        raise ConfigError(f"no host answers: {'; '.join(down.values())}")
    guest: list[GuestImage] = []
    sites: list[Site] = []
    vms: list[vmready.VMPlan | None] = []
    for host in setup.hosts:
        if host is not None and host.name in down:
            sites.append(Site(host=host, down=down[host.name]))
            vms.append(None)
            continue
        container = _container(host, setup, built) if any_kind(setup.kinds, lambda k: k.store_image) else None
        if container is not None and limits:
            container = dataclasses.replace(container, options=dataclasses.replace(container.options, **limits))
        vm = None
        if setup.uses_vms:
            vm = vmready.plan(
                host,
                setup.vm_overrides,
                cvm=any_kind(setup.kinds, lambda k: k.guest_image),
                guest=guest[0] if guest else None,
                frameworks=setup.frameworks,
            )
            if isinstance(vm.image, GuestImage) and not guest:
                guest.append(vm.image)  # dltestbed's guest image (no user image), found once
        sites.append(Site(host=host, container=container, as_user=setup.as_user))
        vms.append(vm)
    return Checked(setup, sites, vms)


def check_host_values(host: Host, setup: Setup) -> None:
    """The inventory values a bench reads of a host, checked without contacting it: a ConfigError line
    naming the host, the variable and what is allowed."""

    def need_absolute(var: str) -> None:
        value = host.vars.get(var)
        if value not in (None, "") and not str(value).startswith("/"):
            raise ConfigError(f"host {host.name}: {var} must be an absolute path (got {value!r})")

    need_absolute("dltestbed_venv")
    if setup.dataset is not None:
        need_absolute("dltestbed_data_root")
    if any_kind(setup.kinds, lambda k: k.store_image) and host.plays("container_hosts"):
        runtime = host_runtime(host, setup.runtime)
        if runtime not in RUNTIMES or RUNTIMES[runtime].rootless:  # the rootless ones: this machine only, for now
            rootful = [r for r, rt in RUNTIMES.items() if r != HOST_RUNTIME and not rt.rootless]
            choices = " or ".join([HOST_RUNTIME, *rootful])  # the default first
            raise ConfigError(f"host {host.name}: dltestbed_container_runtime: {choices} (got {runtime!r})")
        try:
            options_from_vars(host.vars)
        except ConfigError as exc:
            raise ConfigError(f"host {host.name}: {exc}") from None
    if any_kind(setup.kinds, lambda k: k.store_image) and not host.plays("container_hosts"):
        raise ConfigError(f"cbm on {host.name}: the host is not in group container_hosts of the inventory")
    if setup.uses_vms:
        if not host.plays("libvirt_hosts"):
            raise ConfigError(f"vm on {host.name}: the host is not in group libvirt_hosts of the inventory")
        # its dltestbed_vm_* values, checked (not its hypervisor: that needs the host's recorded key)
        VMSettings.from_vars(host.vars, host.name, setup.vm_overrides)


def check_host_keys(hosts: Sequence[Host | None]) -> dict[str, str]:
    """Every inventory host's SSH key against the recorded ones (at most 16 at once), before anything runs:
    a key that changed since provisioning (or was never recorded) is one line, not a run that fails later.
    The hosts that do not answer, with why (host name → reason). A local host is not reached over SSH."""

    remote = [h for h in map(over_ssh, hosts) if h is not None]
    if not remote:
        return {}
    checks = [SSH(h, connect_timeout=10) for h in remote]
    down: dict[str, str] = {}
    with ThreadPoolExecutor(max_workers=min(16, len(remote))) as pool:
        try:
            for host, done in zip(remote, [pool.submit(c.check_key) for c in checks], strict=True):
                why = done.result()  # the first refused key, in inventory order
                if why is not None:
                    down[host.name] = why
        except BaseException:  # Ctrl-C, or a refused key: the connections still being opened are cut
            for c in checks:
                c.abort()
            raise
    return down


@dataclass(frozen=True)
class AutoKinds:
    """What `--targets auto` chose, and why (one line for the user)."""

    kinds: tuple[str, ...]
    aa: bool
    why: str
    runtime: str | None = None  # the container runtime it found working (cbm): prepare need not probe again


def auto_kinds(
    scenario: str, hosts: Sequence[Host | None], runtime: str | None = None, frameworks: Sequence[str] = ()
) -> AutoKinds:
    """`--targets auto`: on this machine in scenario single, bare metal and a container when a runtime
    answers and holds this build's image, else bare metal twice (A and A′: the noise floor); with an
    inventory or in another scenario, bare metal. Nothing is built here."""
    if list(hosts) != [None]:
        return AutoKinds(("bm",), False, "--targets auto: bm on the inventory's hosts")
    if not scenarios.scenario(scenario).alone_per_target:
        return AutoKinds(("bm",), False, f"--targets auto: bm (scenario {scenario})")
    absent = image.not_installed(runtime)
    if absent is not None:
        return _aa_only(absent)
    house = wheelhouse.cached(localfacts.flavor(), frameworks)  # an image that carries the bench's frameworks
    if house is None:  # no image can be of this build: no runtime is asked
        return _aa_only(f"no image of this dltestbed build; `{image_build_command(runtime, frameworks)}` makes it")
    try:
        rt = image.usable_runtime(runtime)
    except image.ImageError as exc:
        return _aa_only(str(exc))
    img = find_image(rt, house)
    if img is None or unprivileged.local_tag(rt, img) is None:
        return _aa_only(f"{rt} has no image of this dltestbed build; `{image_build_command(rt, frameworks)}` makes it")
    return AutoKinds(("bm", "cbm"), False, f"--targets auto: bm and cbm ({rt} image {img.tag})", rt)


def find_image(runtime: str, house: wheelhouse.Wheelhouse) -> image.Image | None:
    """This build's image for a runtime, found without building (Charliecloud's: without asking Podman)."""
    return userstore.find(house) if runtime == "charliecloud" else image.find(runtime, house)


def image_build_command(runtime: str | None, frameworks: Sequence[str]) -> str:
    """The command that makes this build's image for a runtime (None: the one `image build` detects)."""
    return hints.image_build(runtime, wheelhouse.beside_default(frameworks))


def _aa_only(why: str) -> AutoKinds:
    return AutoKinds(("bm",), True, f"--targets auto: bm twice, as A and A′ (no container: {why})")


def ready(checked: Checked, on_notice: Callable[[str], None] | None = None) -> list[Site]:
    """The sites with their VMs running and holding this build's workload (made or reused), and the
    bench's dataset where each kind reads it (copied once per digest)."""
    out = []
    for site, vm in zip(checked.sites, checked.vms, strict=True):
        unprivileged.place(site, on_notice)
        if vm is not None:
            rec, _, _ = vmready.ready(vm, on_notice)
            site = dataclasses.replace(site, vm=rec)
        out.append(site)
    setup = checked.setup
    if setup.dataset is not None:  # placed on the hosts that answered; the others keep their place in the list
        up = iter(
            dataplace.place(setup.dataset, [s for s in out if s.down is None], setup.kinds, setup.inventory, on_notice)
        )
        out = [s if s.down is not None else next(up) for s in out]
    return out


Built = Callable[[str, str], "image.Image | None"]


def host_gpus(host: Host) -> tuple[dict[str, Any] | None, str]:
    """An inventory host's GPU facts, read on the host by the same code and rule as this machine's (NVIDIA
    GPUs on its PCI bus, its nvidia-smi), as the facts role reports them; (None, why) when they could not be
    read."""
    lines: list[str] = []
    try:
        res = make("bm", Site(host=host)).run(["sh", "-c", facts.GPU_PROBE], timeout=120, on_line=lines.append)
    except DltestbedError as exc:
        return None, str(exc)
    if not res.ok:
        why = next((x.strip() for x in reversed(res.stderr_tail) if x.strip()), res.describe())
        return None, f"its GPUs could not be read: {why}"
    return facts.parse_gpu_probe(lines), ""


def host_flavor(host: Host) -> str:
    """An inventory host's flavour, from its GPU facts (host_gpus): the image its containers need."""
    found, why = host_gpus(host)
    if found is None:
        raise ConfigError(f"cbm on {host.name}: {why}")
    flavor, problem = facts.choose_flavor(found)
    if flavor is None:
        raise ConfigError(f"cbm on {host.name}: {problem}")
    return flavor


def host_runtime(host: Host, runtime: str | None) -> str:
    """The container runtime cbm uses on an inventory host: --runtime, else its dltestbed_container_runtime."""
    return runtime or str(host.vars.get("dltestbed_container_runtime") or HOST_RUNTIME)


def _container(host: Host | None, setup: Setup, built: Built) -> ContainerImage:
    """This build's workload image for cbm on a host, of the host's flavour and carrying the bench's frameworks,
    found in the controller's store. On this machine (no host, or a local one) the image is in this machine's
    store already, and its runtime's CLI runs here."""
    runtime = setup.runtime
    extra = wheelhouse.beside_default(setup.frameworks)  # what the command that makes it needs
    carrying = f" with {' and '.join(REGISTRY[f].label for f in extra)}" if extra else ""
    remote = over_ssh(host)
    if remote is None:
        on = "cbm" if host is None else f"cbm on {host.name}"
        asked = runtime if host is None else host_runtime(host, runtime)
        flavor = localfacts.flavor()  # this machine's (image build --flavor auto)

        def missing(rt: str | None) -> ConfigError:
            build = image_build_command(rt, setup.frameworks)
            return ConfigError(f"{on}: no {rt or 'container'} image{carrying} for this dltestbed build; run `{build}`")

        absent = image.not_installed(asked)
        if absent is not None:
            raise ConfigError(f"{on}: {absent}")
        if wheelhouse.cached(flavor, setup.frameworks) is None:  # no image can be of this build: no runtime is asked
            raise missing(asked)
        try:
            rt = image.usable_runtime(asked)
        except image.ImageError as exc:
            raise ConfigError(f"{on}: {exc}") from None
        img = built(rt, flavor)
        tag = unprivileged.local_tag(rt, img)
        if img is None or tag is None:
            raise missing(rt)
        opts = ContainerOptions(gpus="auto") if host is None else options_from_vars(host.vars)
        return ContainerImage(rt, tag, img.digest, image.runtime_env(rt), opts)
    opts = options_from_vars(remote.vars)  # a host outside container_hosts was refused by check_host_values
    rt = host_runtime(remote, runtime)
    flavor = host_flavor(remote)
    img = built(rt, flavor)
    if img is None:
        raise ConfigError(
            f"cbm on {remote.name}: no {rt} image of the {flavor} flavour{carrying} for this dltestbed build here; "
            f"run `{hints.provision(setup.inventory, remote.name, extra)}`"
        )
    env = {"CONTAINERS_CONF": REMOTE_CONTAINERS_CONF} if rt == "podman" else {}
    return ContainerImage(rt, img.tag, img.digest, env, opts)
