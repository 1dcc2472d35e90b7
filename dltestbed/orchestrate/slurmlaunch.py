"""`bench --launcher slurm`: the options checked, the allocation held, a site per node."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dltestbed import inventory as inventory_mod
from dltestbed.errors import ConfigError
from dltestbed.inventory import DEFAULT_VENV, Host, Inventory
from dltestbed.kinds import any_kind, kinds_where
from dltestbed.orchestrate import scenarios


@dataclass(frozen=True)
class SlurmOptions:
    """What `bench` was given for Slurm (each documented in `bench --help`)."""

    partition: str | None = None
    nodes: int | None = None
    account: str | None = None
    time: str | None = None
    venv: str | None = None


def given(opts: SlurmOptions) -> list[str]:
    """The Slurm options the user gave (each goes with --launcher slurm only)."""
    return [
        flag
        for flag, v in (
            ("--partition", opts.partition),
            ("--nodes", opts.nodes),
            ("--account", opts.account),
            ("--slurm-time", opts.time),
            ("--venv", opts.venv),
        )
        if v is not None
    ]


def check(
    opts: SlurmOptions,
    scenario: str,
    workers: int | None,
    kinds: Sequence[str],
    data_real: bool,
    data_shared: bool,
    limit: str | None,
    inventory: Path | None = None,
) -> int:
    """With --launcher slurm: the node count the bench asks for; one line for a bad combination."""
    if opts.nodes is not None and opts.nodes < 1:
        raise ConfigError(f"--nodes: at least 1 (got {opts.nodes})")
    if opts.venv is not None and not opts.venv.startswith("/"):
        raise ConfigError(f"--venv {opts.venv}: an absolute path on the nodes")
    if limit:
        raise ConfigError(
            "--limit picks inventory hosts; with --launcher slurm the scheduler picks the nodes (--nodes, --partition)"
        )
    on_nodes = kinds_where(kinds, lambda k: not k.in_vm)  # VMs are not Slurm's
    other = [k for k in kinds if k != "auto" and k not in on_nodes]
    if other:
        raise ConfigError(f"--launcher slurm runs bm and cbm on the nodes (VMs are not Slurm's), not {other[0]}")
    if any_kind(kinds, lambda k: k.in_container) and inventory is None:
        raise ConfigError(
            "--launcher slurm --targets cbm: the nodes' container runtime, options and image come "
            "from --inventory (its container_hosts, where `provision` loaded the image)"
        )
    if data_real and not data_shared:
        raise ConfigError(
            "--launcher slurm with --data real reads --data-dir on the nodes: give --data-shared "
            "(the same folder on every node, e.g. a shared filesystem)"
        )
    sc = scenarios.scenario(scenario)
    if sc.one_host and (opts.nodes or 1) > 1:
        raise ConfigError(f"scenario {scenario} runs on one node; --nodes {opts.nodes} given")
    if opts.nodes is not None:
        return opts.nodes
    return sc.slurm_nodes(workers)


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
    found: dict[str, Any] = {}
    for field, var in INVENTORY_VARS.items():
        if getattr(opts, field) is not None:
            continue
        values = {str(h.vars[var]) for h in inv.hosts.values() if h.vars.get(var) not in (None, "")}
        if len(values) > 1:
            raise ConfigError(
                f"inventory {str(inv.path)!r}: {var} differs between hosts ({', '.join(sorted(values))});"
                f" set it once, for group all, or give --{field}"
            )
        if values:
            found[field] = values.pop()
    return replace(opts, **found)


def container_hosts(inv: Inventory) -> list[Host]:
    """The inventory's container hosts: the nodes cbm may run on under Slurm."""
    hosts = inv.in_role("container_hosts")
    if not hosts:
        raise ConfigError(
            f"--launcher slurm --targets cbm: inventory {str(inv.path)!r} has no hosts in "
            f"{inv.role_help('container_hosts')}"
        )
    return hosts


def interpreters(opts: SlurmOptions, inv: Inventory | None) -> Callable[[str], str]:
    """Node name → the interpreter that has dltestbed there: --venv, else the inventory host of that
    name's dltestbed_venv, else the default venv."""
    if opts.venv:
        return lambda _node: f"{opts.venv}/bin/python"
    known = {h.name: h.python for h in inv.hosts.values()} if inv is not None else {}
    return lambda node: known.get(node, f"{DEFAULT_VENV}/bin/python")
