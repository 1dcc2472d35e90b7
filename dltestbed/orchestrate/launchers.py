"""Launchers: how a bench reaches its machines. Each checks what is cheap first, then holds what it took
(VMs made or reused; Slurm's allocation) in a context that gives it back whatever happens. The next one
(Kubernetes, PBS) is a new class here, not new branches in the bench."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from dltestbed import inventory as inventory_mod
from dltestbed import slurm
from dltestbed.choices import or_list
from dltestbed.errors import ConfigError
from dltestbed.inventory import Host, Inventory
from dltestbed.kinds import BASELINE, KINDS, kinds_where
from dltestbed.orchestrate import gpus, prepare, slurmlaunch
from dltestbed.orchestrate.request import Machines
from dltestbed.owner import installation_id
from dltestbed.shield import shielded
from dltestbed.targets import ContainerImage, Site, SlurmPlace

Say = Callable[[str], None]


class Launcher(Protocol):
    """How a bench reaches its machines."""

    def hosts(self) -> list[Host | None]:
        """The machines the bench plans for (None: this machine, or a node not given yet)."""
        ...

    def auto_kinds(self, scenario: str, runtime: str | None) -> prepare.AutoKinds:
        """`--targets auto` where this launcher runs, with the line that says why."""
        ...

    def check(self, setup: prepare.Setup) -> None:
        """Everything cheap about the machines, before anything is made or allocated."""
        ...

    def seen_gpus(self, kinds: Sequence[str], local: gpus.Local) -> list[gpus.Seen]:
        """After check: what each target (kind and machine) has of GPUs, as far as it is known before any
        run (a host's are read over SSH: only when an option needs a GPU)."""
        ...

    def sites(self, bench_id: str, say: Say) -> AbstractContextManager[list[Site]]:
        """A context: the prepared sites, held until it ends (then given back, Ctrl-C included)."""
        ...

    @property
    def waiting_for(self) -> str:
        """What a Ctrl-C during `sites` interrupted, in words."""
        ...


@dataclass
class Direct:
    """This machine, or an inventory's bare_metal hosts over SSH; VMs made or reused and kept."""

    name: ClassVar[str] = "direct"
    machines: Machines
    _checked: prepare.Checked | None = None
    _hosts: list[Host | None] | None = None

    @classmethod
    def chosen(cls, m: Machines, scenario: str, workers: int | None, data_real: bool, data_shared: bool) -> Direct:
        """The launcher for a request that chose it (every combination it cannot run is checked by `check`)."""
        return cls(m)

    @staticmethod
    def given(m: Machines) -> list[str]:
        """The options of this launcher the request gave (none of its own)."""
        return []

    @staticmethod
    def on_this_machine(m: Machines) -> bool:
        """Whether the bench runs on this machine (`--preset auto` asks this machine's GPUs): without an inventory."""
        return m.inventory is None

    def hosts(self) -> list[Host | None]:
        if self._hosts is None:
            self._hosts = bare_metal_hosts(self.machines.inventory, self.machines.limit, self.machines.groups)
        return self._hosts

    def auto_kinds(self, scenario: str, runtime: str | None) -> prepare.AutoKinds:
        return prepare.auto_kinds(scenario, self.hosts(), runtime)

    def check(self, setup: prepare.Setup) -> None:
        self._checked = prepare.check(setup)

    def seen_gpus(self, kinds: Sequence[str], local: gpus.Local) -> list[gpus.Seen]:
        assert self._checked is not None, "check() comes first"
        sites = [(s, vm) for s, vm in zip(self._checked.sites, self._checked.vms, strict=True) if s.down is None]
        unique = [KINDS[k] for k in dict.fromkeys(kinds)]
        remote = [s.host for s, _ in sites if s.host is not None] if any(not k.in_vm for k in unique) else []
        read = _read_gpus(remote)
        out = []
        for site, vm in sites:
            where = site.host.name if site.host is not None else "local"
            for kind in unique:
                target = f"{kind.name}:{where}"
                if kind.in_vm:
                    assert vm is not None, "check() plans every answering host's VM"
                    out.append(gpus.of_vm(target, vm.settings, kind.in_container))
                elif site.host is None:
                    out.append(local.seen(kind.name))
                elif kind.in_container and site.container is not None and site.container.options.gpus is None:
                    out.append(gpus.Seen(target, False, f"dltestbed_container_gpus of {where} is none"))
                else:
                    found, why = read[where]
                    out.append(gpus.Seen(target, None, why) if found is None else gpus.from_probe(target, found, where))
        return out

    @contextmanager
    def sites(self, bench_id: str, say: Say) -> Iterator[list[Site]]:
        assert self._checked is not None, "check() comes first"
        if self._checked.setup.uses_vms:
            where = "each host's" if self.machines.inventory is not None else "this machine's"
            say(f"vm/cvm: using {where} benchmark VM (started if needed: under TCG, ~30 s to SSH)")
        yield prepare.ready(self._checked, lambda line: say(f"notice: {line}"))

    @property
    def waiting_for(self) -> str:
        return "preparing the targets: nothing was run; a VM being created was removed"


@dataclass
class Slurm:
    """This machine is a Slurm submit host: one allocation of whole nodes for the bench, a site per node."""

    name: ClassVar[str] = "slurm"
    machines: Machines
    count: int
    _opts: slurmlaunch.SlurmOptions = field(default_factory=slurmlaunch.SlurmOptions)
    _inventory: Inventory | None = None
    _images: dict[str, ContainerImage | None] = field(default_factory=dict)

    @classmethod
    def chosen(cls, m: Machines, scenario: str, workers: int | None, data_real: bool, data_shared: bool) -> Slurm:
        """The launcher for a request that chose it, its options checked first (the node count among them)."""
        count = slurmlaunch.check(m.slurm, scenario, workers, m.targets, data_real, data_shared, m.limit, m.inventory)
        return cls(m, count)

    @staticmethod
    def given(m: Machines) -> list[str]:
        """The Slurm options the request gave."""
        return slurmlaunch.given(m.slurm)

    @staticmethod
    def on_this_machine(m: Machines) -> bool:
        """The nodes are Slurm's: never this machine."""
        return False

    def hosts(self) -> list[Host | None]:
        return [None] * self.count

    def auto_kinds(self, scenario: str, runtime: str | None) -> prepare.AutoKinds:
        return prepare.AutoKinds((BASELINE,), False, "--launcher slurm: bare metal (bm) on the nodes Slurm gives")

    def check(self, setup: prepare.Setup) -> None:
        inv = slurmlaunch.load(self.machines.inventory, self.machines.groups)
        self._inventory = inv
        self._opts = slurmlaunch.from_inventory(self.machines.slurm, inv) if inv is not None else self.machines.slurm
        store = kinds_where(setup.kinds, lambda k: k.store_image)
        if inv is not None and store:  # each container host's image, by name
            hosts = tuple(slurmlaunch.container_hosts(inv))
            ready = prepare.check(
                prepare.Setup(store, hosts, setup.runtime, {}, setup.container_limits, None, setup.inventory)
            )
            self._images = {s.host.name: s.container for s in ready.sites if s.host is not None}

    def seen_gpus(self, kinds: Sequence[str], local: gpus.Local) -> list[gpus.Seen]:
        why = "Slurm's nodes are known once it allocates them"
        return [gpus.Seen(f"{k} on Slurm's nodes", None, why) for k in dict.fromkeys(kinds)]

    @contextmanager
    def sites(self, bench_id: str, say: Say) -> Iterator[list[Site]]:
        alloc, sites = self._allocate(bench_id, say)
        try:
            yield sites
        finally:
            with shielded():  # a second Ctrl-C does not keep the nodes
                alloc.release()

    @property
    def waiting_for(self) -> str:
        return "waiting for Slurm's allocation: the request was revoked"

    def _allocate(self, bench_id: str, say: Say) -> tuple[slurm.Allocation, list[Site]]:
        """Hold the allocation (salloc's own lines said as it waits); a site per node, with its container
        image when cbm runs (a node that is no container host is one line)."""
        python = slurmlaunch.interpreters(self._opts, self._inventory)
        cluster = slurm.check_cluster()
        opts = self._opts
        req = slurm.Request(
            self.count,
            opts.partition,
            opts.account,
            opts.time,
            job_name=f"dltestbed-{bench_id}",
            comment=f"dltestbed bench {bench_id} of installation {installation_id()}",
        )
        slurm.check_request(req)
        alloc = slurm.Allocation.get(req, say)
        say(
            f"Slurm job {alloc.job_id} on cluster {cluster or '?'}, partition {alloc.partition or '?'}: "
            f"{', '.join(n.name for n in alloc.nodes)} (given back when the bench ends)"
        )
        images = self._images
        missing = [n.name for n in alloc.nodes if images and images.get(n.name) is None]
        if missing:
            alloc.release()
            raise ConfigError(
                f"cbm on Slurm node {missing[0]}: not a container host of --inventory (container_hosts, "
                "where `provision` loads the image)"
            )
        places = [SlurmPlace(alloc, n, python(n.name)) for n in alloc.nodes]
        return alloc, [Site(slurm=p, container=images.get(p.node.name)) for p in places]


LAUNCHERS: dict[str, type[Direct] | type[Slurm]] = {c.name: c for c in (Direct, Slurm)}  # keyed by choices.LAUNCHERS


def launcher_for(m: Machines, scenario: str, workers: int | None, data_real: bool, data_shared: bool) -> Launcher:
    """The request's launcher, its options checked (one line for a bad combination): another launcher's
    option given is refused first."""
    chosen = launcher_class(m.launcher)
    for other in LAUNCHERS.values():
        if other is not chosen and (flags := other.given(m)):
            raise ConfigError(f"{flags[0]} goes with --launcher {other.name}")
    return chosen.chosen(m, scenario, workers, data_real, data_shared)


def launcher_class(name: str) -> type[Direct] | type[Slurm]:
    """The launcher's class of that name (choices.LAUNCHERS), or one line that lists the known ones."""
    if name not in LAUNCHERS:
        raise ConfigError(f"unknown launcher {name!r}; known: {or_list(LAUNCHERS)}")
    return LAUNCHERS[name]


def _read_gpus(hosts: Sequence[Host]) -> dict[str, tuple[dict[str, Any] | None, str]]:
    """Each host's GPU facts (prepare.host_gpus), at most 16 hosts at once: host name → (facts, why not)."""
    if not hosts:
        return {}
    with ThreadPoolExecutor(max_workers=min(16, len(hosts))) as pool:
        return dict(zip([h.name for h in hosts], pool.map(prepare.host_gpus, hosts), strict=True))


def bare_metal_hosts(inventory: Path | None, limit: str | None, groups: tuple[str, ...]) -> list[Host | None]:
    """The inventory's bare_metal hosts (--limit and --group applied), or [None]: this machine."""
    if inventory is None:
        if limit or groups:
            raise ConfigError(f"{'--limit' if limit else '--group'} needs --inventory")
        return [None]
    inv = inventory_mod.load(inventory, limit, inventory_mod.parse_group_options(list(groups)))
    hosts = inv.in_role("bare_metal")
    if not hosts:
        raise ConfigError(
            f"inventory {str(inventory)!r} has no hosts in {inv.role_help('bare_metal')}"
            + (f" matching --limit {limit!r}" if limit else "")
            + ("" if groups else "; --group bare_metal=GROUP names yours")
        )
    return list(hosts)
