"""Layouts: which inventory hosts a bench uses, and which target kinds on each."""

from __future__ import annotations

from dataclasses import dataclass

from dltestbed.choices import LAYOUTS
from dltestbed.errors import ConfigError
from dltestbed.inventory import Host, Inventory
from dltestbed.kinds import kinds_where


@dataclass(frozen=True)
class Placement:
    """A host and the target kinds the layout puts on it."""

    host: Host
    kinds: tuple[str, ...]


def resolve(layout: str, inventory: Inventory) -> list[Placement]:
    """The placements of a layout on an inventory, or a ConfigError saying what is missing."""
    if layout not in LAYOUTS:
        raise ConfigError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
    workers = inventory.in_role("bare_metal")
    where = f"inventory {str(inventory.path)!r}"
    in_bm = inventory.role_help("bare_metal")
    if not workers:
        groups = ", ".join(sorted(g for g in inventory.groups if g not in ("all", "ungrouped"))) or "none"
        raise ConfigError(
            f"layout {layout} needs hosts in {in_bm}; {where} has none (groups: {groups}; "
            "--group bare_metal=GROUP names yours)"
        )
    if layout == "single":
        return [Placement(workers[0], workers[0].kinds())]
    if layout == "distributed":
        if len(workers) < 2:
            raise ConfigError(f"layout distributed needs at least 2 hosts in {in_bm}; {where} has 1")
        return [Placement(h, kinds_where(h.kinds(), lambda k: not k.in_vm)) for h in workers]
    shared = [h for h in workers if len(h.kinds()) > 1]
    if not shared:
        raise ConfigError(
            f"layout shared needs a host that can hold several target kinds (in bare_metal and in "
            f"container_hosts or libvirt_hosts); no host of {where} can"
        )
    return [Placement(shared[0], shared[0].kinds())]
