"""The Slurm launcher (`bench --launcher slurm`): this machine is a submit host; the options checked, one
allocation of whole nodes held for the bench, a site per node."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

from dltestbed import inventory as inventory_mod
from dltestbed import slurm
from dltestbed.errors import ConfigError
from dltestbed.inventory import DEFAULT_VENV, Host, Inventory
from dltestbed.kinds import BASELINE, any_kind, kinds_where
from dltestbed.orchestrate import gpus, prepare, scenarios, unprivileged
from dltestbed.orchestrate.launchers.base import Say, site_options
from dltestbed.owner import installation_id
from dltestbed.requests.bench import BenchRequest
from dltestbed.requests.launch import SlurmOptions
from dltestbed.runtimes import RUNTIMES
from dltestbed.shield import shielded
from dltestbed.targets import ContainerImage, Site
from dltestbed.targets.slurm import SlurmPlace


@dataclass
class Slurm:
    """This machine is a Slurm submit host: one allocation of whole nodes for the bench, a site per node."""

    name: ClassVar[str] = "slurm"
    request: BenchRequest
    count: int
    _opts: SlurmOptions = field(default_factory=SlurmOptions)
    _inventory: Inventory | None = None
    _images: dict[str, ContainerImage | None] = field(default_factory=dict)
    _shared: ContainerImage | None = None  # a rootless runtime's image here, at the same path on every node

    @classmethod
    def chosen(cls, request: BenchRequest) -> Slurm:
        """The launcher for a request that chose it, its options checked first (the node count among them)."""
        return cls(request, check_options(request))

    @staticmethod
    def given(request: BenchRequest) -> list[str]:
        """The Slurm options the request gave (each goes with --launcher slurm only)."""
        return request.slurm.given()

    @staticmethod
    def on_this_machine(request: BenchRequest) -> bool:
        """The nodes are Slurm's: never this machine."""
        return False

    def hosts(self) -> list[Host | None]:
        return [None] * self.count

    def auto_kinds(self, scenario: str, runtime: str | None, frameworks: Sequence[str] = ()) -> prepare.AutoKinds:
        return prepare.AutoKinds((BASELINE,), False, "--launcher slurm: bare metal (bm) on the nodes Slurm gives")

    def check(self, setup: prepare.Setup) -> None:
        inv = load(self.request.where.inventory, self.request.where.groups)
        self._inventory = inv
        self._opts = from_inventory(self.request.slurm, inv) if inv is not None else self.request.slurm
        store = kinds_where(setup.kinds, lambda k: k.store_image)
        unprivileged.check(setup.as_user, setup.kinds, setup.runtime, setup.hosts)
        rt = RUNTIMES.get(setup.runtime or "")
        if store and rt is not None and rt.rootless:  # this machine's image, read by the nodes on a shared filesystem
            if rt.name != "charliecloud":
                raise ConfigError(f"--launcher slurm --runtime {rt.name}: not yet; charliecloud runs under Slurm")
            ready = prepare.check(replace(setup, kinds=store, dataset=None))
            self._shared = ready.sites[0].container
        elif inv is not None and store:  # each container host's image, by name
            hosts = tuple(container_hosts(inv))
            ready = prepare.check(
                prepare.Setup(
                    store, hosts, setup.runtime, {}, setup.container_limits, None, setup.inventory, setup.frameworks
                )
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
        python = interpreters(self.request.launch.venv, self._inventory)
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
        user = self.request.container.as_user
        sites = [Site(placed=p, container=images.get(p.node.name) or self._shared, as_user=user) for p in places]
        return alloc, sites


def check_options(request: BenchRequest) -> int:
    """With --launcher slurm: the node count the bench asks for; one line for a bad combination."""
    where, scenario = request.where, request.scenario.scenario
    kinds, runtime, nodes = where.targets, request.container.runtime, request.launch.nodes
    if nodes is not None and nodes < 1:
        raise ConfigError(f"--nodes: at least 1 (got {nodes})")
    if request.launch.venv is not None and not request.launch.venv.startswith("/"):
        raise ConfigError(f"--venv {request.launch.venv}: an absolute path on the nodes")
    if where.limit:
        raise ConfigError(
            "--limit picks inventory hosts; with --launcher slurm the scheduler picks the nodes (--nodes, --partition)"
        )
    on_nodes = kinds_where(kinds, lambda k: not k.in_vm)  # VMs are not Slurm's
    other = [k for k in kinds if k != "auto" and k not in on_nodes]
    if other:
        raise ConfigError(f"--launcher slurm runs bm and cbm on the nodes (VMs are not Slurm's), not {other[0]}")
    if any_kind(kinds, lambda k: k.in_container) and where.inventory is None and runtime != "charliecloud":
        raise ConfigError(
            "--launcher slurm --targets cbm: the nodes' container runtime, options and image come "
            "from --inventory (its container_hosts, where `provision` loaded the image), or --runtime charliecloud "
            "runs this machine's image folder on them (a shared filesystem)"
        )
    if request.workloads.data == "real" and not where.data_shared:
        raise ConfigError(
            "--launcher slurm with --data real reads --data-dir on the nodes: give --data-shared "
            "(the same folder on every node, e.g. a shared filesystem)"
        )
    sc = scenarios.scenario(scenario)
    if sc.one_host and (nodes or 1) > 1:
        raise ConfigError(f"scenario {scenario} runs on one node; --nodes {nodes} given")
    if nodes is not None:
        return nodes
    return sc.machines(request.scenario.workers)


def load(inventory: Path | None, groups: Sequence[str]) -> Inventory | None:
    """The --inventory that describes the nodes (--group applied), read once for the bench; None without one."""
    if inventory is None:
        return None
    return inventory_mod.load(inventory, None, inventory_mod.parse_group_options(list(groups)))


INVENTORY_VARS = {
    "partition": "dltestbed_slurm_partition",
    "account": "dltestbed_slurm_account",
    "time": "dltestbed_slurm_time",
}


def from_inventory(opts: SlurmOptions, inv: Inventory) -> SlurmOptions:
    """The options the command line left out, from the inventory's dltestbed_slurm_* variables (a site's
    setting: group `all`, so every host has the same value; hosts that disagree are one line)."""
    return site_options(opts, inv, INVENTORY_VARS)


def container_hosts(inv: Inventory) -> list[Host]:
    """The inventory's container hosts: the nodes cbm may run on under Slurm."""
    hosts = inv.in_role("container_hosts")
    if not hosts:
        raise ConfigError(
            f"--launcher slurm --targets cbm: inventory {str(inv.path)!r} has no hosts in "
            f"{inv.role_help('container_hosts')}"
        )
    return hosts


def interpreters(venv: str | None, inv: Inventory | None) -> Callable[[str], str]:
    """Node name → the interpreter that has dltestbed there: --venv, else the inventory host of that
    name's dltestbed_venv, else the default venv."""
    if venv:
        return lambda _node: f"{venv}/bin/python"
    known = {h.name: h.python for h in inv.hosts.values()} if inv is not None else {}
    return lambda node: known.get(node, f"{DEFAULT_VENV}/bin/python")
