"""The four kinds of benchmark target and what each one is: a kind carries its capabilities, so what
is decided by kind asks a capability (runs in a VM, runs the store's image, reads the host's data)
instead of testing names. How a kind's target is made is the registry's (`targets`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    """A kind of target and what it needs and does."""

    name: str
    about: str
    in_vm: bool = False  # runs in the host's benchmark VM (made before the bench runs)
    in_container: bool = False  # runs in a fresh container of the workload image
    store_image: bool = False  # runs the workload image from the host's own container store
    guest_image: bool = False  # needs dltestbed's guest image in the VM (its Podman holds the workload image)
    reads_host_data: bool = False  # reads the host's copy of the dataset (a VM gets its own)


BM = Kind("bm", "bare metal: the workload runs directly on the host", reads_host_data=True)
VM = Kind("vm", "a libvirt VM on the host", in_vm=True)
CBM = Kind("cbm", "a container on bare metal", in_container=True, store_image=True, reads_host_data=True)
CVM = Kind("cvm", "a container in a VM", in_vm=True, in_container=True, guest_image=True)

KINDS: dict[str, Kind] = {k.name: k for k in (BM, VM, CBM, CVM)}
BASELINE = BM.name  # every other layer is measured against it


def any_kind(names: Iterable[str], has: Callable[[Kind], bool]) -> bool:
    """Whether any of these kinds (unknown names ignored: they are refused where they are read) has it."""
    return any(has(KINDS[n]) for n in names if n in KINDS)


def kinds_where(names: Iterable[str], has: Callable[[Kind], bool]) -> tuple[str, ...]:
    """Those of these kinds that have it, in their order."""
    return tuple(n for n in names if n in KINDS and has(KINDS[n]))
