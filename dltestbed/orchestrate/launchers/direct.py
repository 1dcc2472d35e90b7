"""The direct launcher: this machine, or an inventory's bare_metal hosts (over SSH, or here when local); VMs made
or reused."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from dltestbed import inventory as inventory_mod
from dltestbed.errors import ConfigError
from dltestbed.inventory import Host, this_machine
from dltestbed.kinds import KINDS
from dltestbed.orchestrate import gpus, prepare
from dltestbed.orchestrate.launchers.base import Say
from dltestbed.requests.bench import BenchRequest
from dltestbed.targets import Site


@dataclass
class Direct:
    """This machine, or an inventory's bare_metal hosts (over SSH, or here when local); VMs made or reused and kept."""

    name: ClassVar[str] = "direct"
    request: BenchRequest
    _checked: prepare.Checked | None = None
    _hosts: list[Host | None] | None = None

    @classmethod
    def chosen(cls, request: BenchRequest) -> Direct:
        """The launcher for a request that chose it (every other combination it cannot run is checked by `check`)."""
        if request.launch.nodes is not None:
            raise ConfigError(
                "--nodes: how many machines a scheduler gives (--launcher slurm or kubernetes); the direct launcher "
                "runs on this machine or --inventory's hosts (--limit picks them)"
            )
        if request.launch.venv is not None:
            raise ConfigError(
                "--venv: dltestbed's venv on a scheduler's nodes; the direct launcher runs on --inventory's hosts, "
                "each with its dltestbed_venv"
            )
        return cls(request)

    @staticmethod
    def given(request: BenchRequest) -> list[str]:
        """The options of this launcher the request gave (none of its own)."""
        return []

    @staticmethod
    def on_this_machine(request: BenchRequest) -> bool:
        """Whether the bench runs on this machine (`--preset auto` asks this machine's GPUs): without an inventory,
        or on inventory hosts that all are (ansible_connection: local)."""
        return all(
            this_machine(h)
            for h in bare_metal_hosts(request.where.inventory, request.where.limit, request.where.groups)
        )

    def hosts(self) -> list[Host | None]:
        if self._hosts is None:
            self._hosts = bare_metal_hosts(
                self.request.where.inventory, self.request.where.limit, self.request.where.groups
            )
        return self._hosts

    def auto_kinds(self, scenario: str, runtime: str | None, frameworks: Sequence[str] = ()) -> prepare.AutoKinds:
        return prepare.auto_kinds(scenario, self.hosts(), runtime, frameworks)

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
            where = "each host's" if self.request.where.inventory is not None else "this machine's"
            say(f"vm/cvm: using {where} benchmark VM (started if needed: under TCG, ~30 s to SSH)")
        yield prepare.ready(self._checked, lambda line: say(f"notice: {line}"))

    @property
    def waiting_for(self) -> str:
        return "preparing the targets: nothing was run; a VM being created was removed"


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
