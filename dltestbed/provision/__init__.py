"""`dltestbed provision`: facts, then the workload installed offline on each host of a layout."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dltestbed import inventory as inventory_mod
from dltestbed import layout as layout_mod
from dltestbed import locks, paths
from dltestbed.errors import DltestbedError
from dltestbed.kinds import any_kind
from dltestbed.provision import facts as facts_mod
from dltestbed.provision import image, imagearchive, vmready, wheelhouse
from dltestbed.provision.ansible import Play, PlaybookResult, run_playbook, site_vars
from dltestbed.provision.events import HostOutcome
from dltestbed.provision.guestimage import GuestImage
from dltestbed.requests.provision import ProvisionRequest
from dltestbed.results.records import new_id
from dltestbed.runtimes import HOST_RUNTIME
from dltestbed.users import check_name
from dltestbed.workload.frameworks import REGISTRY

EventHook = Callable[[str, HostOutcome | None, dict[str, Any]], None]


@dataclass
class HostReport:
    """One host's provisioning: what was found, what was done, how it ended."""

    name: str
    address: str
    kinds: list[str]
    status: str = "pending"  # provisioned, unchanged, failed, checked
    reason: str | None = None
    flavor: str | None = None
    python: str | None = None
    os: str | None = None
    gpus: list[dict[str, Any]] = field(default_factory=list)
    runtime: str | None = None  # container runtime, for container hosts
    vm: str | None = None  # libvirt hosts: the VM made (or found) there
    image: str | None = None  # the workload image loaded there
    ok: int = 0
    changed: int = 0


@dataclass
class ProvisionReport:
    """The whole provisioning run."""

    id: str
    layout: str
    inventory: str
    check: bool
    hosts: list[HostReport]
    artifacts: str
    wheelhouses: dict[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> list[HostReport]:
        """Hosts that were not provisioned."""
        return [h for h in self.hosts if h.status == "failed"]

    @property
    def changed(self) -> int:
        """Changed tasks over all hosts."""
        return sum(h.changed for h in self.hosts)


def _record_host_keys(inv: inventory_mod.Inventory, reports: dict[str, dict[str, Any]]) -> None:
    """Record the hosts' keys in dltestbed's known_hosts (read, changed and replaced under its lock, so
    two provisioning runs at once keep both sets)."""
    path = paths.known_hosts_file()
    with locks.beside(path, "the recorded host keys"):
        lines = path.read_text().splitlines() if path.exists() else []
        for name, facts in reports.items():
            h = inv.hosts[name]
            if h.local:  # reached with no SSH: its key is never asked for
                continue
            new = facts_mod.known_hosts_lines(h.address, h.port, h.name, facts.get("host_keys") or {})
            if not new:
                continue
            who = new[0].split()[0]
            lines = [line for line in lines if line.split(" ", 1)[0] != who] + new
        tmp = path.with_name(path.name + ".partial")
        tmp.write_text("\n".join(lines) + ("\n" if lines else ""))
        tmp.replace(path)  # a reader (bench's ssh) never sees half a file


def local_host_vars(inv: inventory_mod.Inventory, frameworks: Sequence[str] = ()) -> dict[str, dict[str, Any]]:
    """What the playbooks are told of the inventory's local hosts (ansible_connection: local), beside the
    inventory: the interpreter that has dltestbed there (the roles check it), Ansible's interpreter (this one,
    as for Ansible's implicit localhost, unless the inventory names one), and for a host whose workload is this
    dltestbed (Host.this_install) its venv, checked as a shared one: dltestbed runs from it, nothing is
    installed into it, and it must import only the `frameworks` asked for by name (a machine with PyTorch alone
    is provisioned so: acceptance then runs what the node has)."""
    out: dict[str, dict[str, Any]] = {}
    for h in inv.hosts.values():
        if not h.local:
            continue
        given: dict[str, Any] = {"dltestbed_python": h.python}
        if "ansible_python_interpreter" not in h.vars:
            given["ansible_python_interpreter"] = sys.executable
        if h.this_install:
            imports = [m for f in frameworks for m in REGISTRY[f].imports]
            given |= {"dltestbed_venv": h.venv, "dltestbed_venv_shared": True, "dltestbed_shared_imports": imports}
        out[h.name] = given
    return out


def provision(
    request: ProvisionRequest,
    on_event: EventHook | None = None,
    on_phase: Callable[[str], None] | None = None,
    on_notice: Callable[[str], None] | None = None,
) -> ProvisionReport:
    """Run the facts and site phases on the hosts of the request's layout, then make the VMs of its libvirt hosts;
    never raises for a host's failure. Its frameworks: those installed beside the default one (and carried by
    the container images made for the hosts); its run user: the unprivileged user `bench --as-user` runs the
    workloads as, made on every host (the run_user role)."""
    where, install = request.hosts, request.install
    layout, check, frameworks, run_user = where.layout, install.check, install.frameworks, install.run_user
    chosen = wheelhouse.carried(frameworks)  # an unknown name: one line before any host is contacted
    if run_user is not None:
        check_name(run_user)
    inv = inventory_mod.load(where.inventory, where.limit, inventory_mod.parse_group_options(where.groups))
    placements = layout_mod.resolve(layout, inv)
    root = wheelhouse.source_root()
    run_id = new_id("p")
    private = paths.state_dir() / "provision" / run_id
    report = ProvisionReport(
        run_id,
        layout,
        str(inv.path),
        check,
        [HostReport(p.host.name, p.host.address, list(p.kinds)) for p in placements],
        str(private / "artifacts"),
    )
    by_name = {h.name: h for h in report.hosts}
    pattern = ",".join(by_name)
    forks = max(1, min(len(by_name), 16))
    common: dict[str, Any] = {"dltestbed_hosts": pattern, "dltestbed_run_user": run_user or ""}

    if on_phase:
        on_phase("facts")
    facts = Play(root / "playbooks", "facts.yml", inv.path, common, local_host_vars(inv, frameworks))
    facts_run = run_playbook(facts, private, "facts", on_event, forks)
    reported, flavors = _read_facts(report.hosts, facts_run)
    _record_host_keys(inv, reported)

    targets = [h for h in report.hosts if h.status != "failed"]
    if targets:
        if on_phase:
            on_phase("wheelhouse")
        houses = {f: wheelhouse.build(f, chosen) for f in sorted({h.flavor for h in targets if h.flavor})}
        run = _Run(request, inv, private, forks, on_event, on_phase, on_notice)
        _install(run, targets, flavors, houses)
        report.wheelhouses = {f: str(w.path) for f, w in houses.items()}
    (private / "report.json").write_text(json.dumps(asdict(report), indent=2))
    return report


def _read_facts(hosts: list[HostReport], facts_run: PlaybookResult) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Each host's facts onto its report (a host without them, or with no TensorFlow flavour to run,
    failed with why); the facts reported and each good host's flavour."""
    reported: dict[str, dict[str, Any]] = {}
    flavors: dict[str, str] = {}
    for h in hosts:
        out = facts_run.hosts.get(h.name)
        facts = (out.reported.get("dltestbed_facts") if out else None) or {}
        if not out or not out.succeeded or not facts:
            why = (
                out.message
                if out and out.message
                else (
                    f"ansible-playbook {facts_run.status} (rc {facts_run.rc}) before reaching it; "
                    f"see {facts_run.artifacts}/stdout"
                )
            )
            h.status, h.reason = "failed", why
            continue
        reported[h.name] = facts
        h.python, h.os = facts.get("python"), facts.get("os")
        h.gpus = [asdict(g) for g in facts_mod.parse_nvidia_smi(facts.get("nvidia_smi") or [])]
        flavor, problem = facts_mod.choose_flavor(facts)
        problem = problem or facts_mod.python_mismatch(facts, f"{sys.version_info.major}.{sys.version_info.minor}")
        if problem:
            h.status, h.reason = "failed", problem
            continue
        assert flavor is not None
        h.flavor = flavor
        flavors[h.name] = flavor
        _note(h, out)
    return reported, flavors


@dataclass(frozen=True)
class _Run:
    """A provisioning under way: what it was asked, its inventory, its private folder and forks, and who hears
    of it."""

    request: ProvisionRequest
    inv: inventory_mod.Inventory
    private: Path
    forks: int
    on_event: EventHook | None
    on_phase: Callable[[str], None] | None
    on_notice: Callable[[str], None] | None


def _install(
    run: _Run, targets: list[HostReport], flavors: dict[str, str], houses: dict[str, wheelhouse.Wheelhouse]
) -> None:
    """The container images built from the wheelhouses (one a flavour), the site playbook run, then the VMs
    made on the libvirt hosts that took it."""
    inv, on_phase, install = run.inv, run.on_phase, run.request.install
    check, run_user = install.check, install.run_user
    containers = _container_images(inv, targets, houses, on_phase)
    libvirt_hosts = [h for h in targets if any_kind(h.kinds, lambda k: k.in_vm)]
    extravars = {
        **site_vars([h.name for h in targets], flavors, houses),
        **containers,
        "dltestbed_libvirt_targets": ",".join(h.name for h in libvirt_hosts),
        "dltestbed_run_user": run_user or "",
    }
    if on_phase:
        on_phase("install")
    root = wheelhouse.source_root()
    play = Play(root / "playbooks", "site.yml", inv.path, extravars, local_host_vars(inv, install.frameworks), check)
    site = run_playbook(play, run.private, "site", run.on_event, run.forks)
    _finish(targets, site, check)
    ready = [h for h in libvirt_hosts if h.status != "failed"]
    if ready and not check:
        carried = next((w.frameworks for w in houses.values()), wheelhouse.carried())
        _vms(inv, ready, carried, on_phase, run.on_notice)


def image_key(runtime: str, flavor: str) -> str:
    """How the container_host role finds a host's image: its runtime and its flavour."""
    return f"{runtime}/{flavor}"


def _container_images(
    inv: inventory_mod.Inventory,
    targets: list[HostReport],
    houses: dict[str, wheelhouse.Wheelhouse],
    on_phase: Callable[[str], None] | None,
) -> dict[str, Any]:
    """Build (or find) the workload image for each (runtime, flavour) the container hosts use, saved as
    an archive to load on them; the extravars the container_host role reads (images keyed
    "runtime/flavour": a GPU host gets the image with TensorFlow's CUDA build, a CPU host the CPU one)."""
    hosts = [h for h in targets if any_kind(h.kinds, lambda k: k.store_image)]
    if not hosts:
        return {"dltestbed_container_targets": ""}
    if on_phase:
        on_phase("image")
    runtimes: dict[str, str] = {}
    images: dict[str, dict[str, str]] = {}
    for h in hosts:
        rt = str(inv.hosts[h.name].vars.get("dltestbed_container_runtime") or HOST_RUNTIME)
        key = image_key(rt, h.flavor or "cpu")
        if key not in images:
            img = image.build(rt, houses[h.flavor or "cpu"])
            images[key] = {"tag": img.tag, "digest": img.digest, "archive": str(imagearchive.archive(img))}
        runtimes[h.name] = rt
        h.runtime, h.image = rt, images[key]["tag"]
    return {
        "dltestbed_container_targets": ",".join(runtimes),
        "dltestbed_runtimes": runtimes,
        "dltestbed_images": images,
    }


def _vms(
    inv: inventory_mod.Inventory,
    hosts: list[HostReport],
    frameworks: tuple[str, ...],
    on_phase: Callable[[str], None] | None,
    on_notice: Callable[[str], None] | None,
) -> None:
    """Each libvirt host's benchmark VM, from the host's own image (dltestbed_vm_image) or this build's
    guest image (built here when missing): reused when current, else made, with this build's workload
    in it; bench finds it by the host's name."""
    if on_phase:
        on_phase("vms")
    ours: GuestImage | None = None
    for h in hosts:
        host = inv.hosts[h.name]
        try:
            p = vmready.plan(host, build=True, guest=ours, frameworks=frameworks)
            if isinstance(p.image, GuestImage):
                ours = p.image  # built (or found) once for every host
            rec, made, installed = vmready.ready(p, on_notice)
        except DltestbedError as exc:
            h.status, h.reason = "failed", f"VM: {exc}"
            continue
        state = f"made: SSH in {rec.ready_seconds} s" if made else "running"
        image_note = f", image {rec.image_name}" if rec.image_name else ""
        h.vm = f"{rec.name} at {rec.address} ({rec.virt_type}{image_note}), {state}" + (
            ", workload installed" if installed else ""
        )
        if made or installed:
            h.status, h.changed = "provisioned", h.changed + 1


def _note(h: HostReport, out: HostOutcome | None) -> None:
    if out:
        h.ok += out.ok
        h.changed += out.changed


def _finish(targets: list[HostReport], site: PlaybookResult, check: bool) -> None:
    for h in targets:
        out = site.hosts.get(h.name)
        if out is None:
            h.status, h.reason = "failed", f"ansible did not run on it ({site.status}, rc {site.rc})"
            continue
        _note(h, out)
        if not out.succeeded:
            h.status, h.reason = "failed", out.message
        elif site.status != "successful":  # its tasks went well, the playbook did not (an error after them)
            h.status, h.reason = "failed", f"ansible-playbook {site.status} (rc {site.rc}); see {site.artifacts}/stdout"
        elif check:
            h.status = "checked"
        else:
            h.status = "provisioned" if out.changed else "unchanged"


__all__ = ["HostReport", "ProvisionReport", "provision", "site_vars"]
