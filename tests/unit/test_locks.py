"""What two dltestbed processes may build or change at once, done by several real processes at once:
VM addresses never handed out twice, host keys never lost from known_hosts, a held lock one line."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from dltestbed import locks
from dltestbed.errors import DltestbedError

N = 8
VMS = 25  # reserved by each process: 200 in all, from the 240 addresses there are


def _reserve(vm_dir: str, i: int, barrier: object) -> list[str]:
    os.environ["DLTESTBED_VM_DIR"] = vm_dir
    from dltestbed.vms.lifecycle import reserve
    from dltestbed.vms.record import VMRecord

    def make(name: str) -> object:
        return lambda address: VMRecord(
            name=name,
            uri="qemu:///system",
            address=address,
            mac="52:54:00:00:00:01",
            bridge="br",
            virt_type="qemu",
            vcpus=1,
            memory_mib=512,
            image_key="k",
            container_tag="t",
            container_digest="d",
            created_at=0.0,
        )

    barrier.wait()  # type: ignore[attr-defined]
    return [reserve(f"vm{i}-{j}", make(f"vm{i}-{j}")).address for j in range(VMS)]  # type: ignore[arg-type]


def _record(state: str, i: int, barrier: object) -> None:
    os.environ["XDG_STATE_HOME"] = state
    from dltestbed.provision import _record_host_keys

    host = SimpleNamespace(address=f"10.0.0.{i}", port=22, name=f"h{i}", local=False)
    inv = SimpleNamespace(hosts={f"h{i}": host})
    barrier.wait()  # type: ignore[attr-defined]
    for _ in range(20):  # provisioning runs recording their hosts, over and over
        _record_host_keys(inv, {f"h{i}": {"host_keys": {"ssh-ed25519": f"KEY{i}"}}})  # type: ignore[arg-type]


def _at_once(fn: object, args: list[tuple]) -> list:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Manager().Barrier(len(args))
    with ctx.Pool(len(args)) as pool:
        return pool.starmap(fn, [(*a, barrier) for a in args])  # type: ignore[arg-type]


def test_vms_made_at_once_get_distinct_addresses(tmp_path: Path) -> None:
    addresses = [a for each in _at_once(_reserve, [(str(tmp_path), i) for i in range(N)]) for a in each]
    assert len(addresses) == N * VMS and len(set(addresses)) == N * VMS, len(set(addresses))
    assert len(list(tmp_path.glob("*/vm.json"))) == N * VMS


def test_host_keys_recorded_at_once_are_all_kept(tmp_path: Path) -> None:
    _at_once(_record, [(str(tmp_path), i) for i in range(N)])
    lines = (tmp_path / "dltestbed" / "known_hosts").read_text().splitlines()
    assert sorted(lines) == sorted(f"10.0.0.{i},h{i} ssh-ed25519 KEY{i}" for i in range(N))


def test_a_lock_held_too_long_is_one_error(tmp_path: Path) -> None:
    from filelock import FileLock

    target = tmp_path / "wheelhouse"
    held = r"another dltestbed process has held x for 0 s"
    # another holder: a separate lock object (flock is per open file)
    with FileLock(f"{target}.lock"), pytest.raises(DltestbedError, match=held), locks.beside(target, "x", 0.2):
        pass
    with locks.beside(target, "the wheelhouse", timeout=0.2):  # free again
        pass
