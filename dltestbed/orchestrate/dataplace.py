"""Real data where every target reads it, as the CLOSER'18 study did ("replicate the dataset and place it on
every node"): this machine's bare metal (a local inventory host's too) reads the folder given; its containers
get it mounted read-only; other inventory hosts and VMs get a copy in a folder named by the dataset's content
digest, placed once per digest by the dataset role (one tar, unpacked) and kept for the next bench — or, with a
shared path (NFS), hosts read the folder given, checked to hold the same files. Containers mount their
machine's copy."""

from __future__ import annotations

import dataclasses
import shlex
import tarfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from dltestbed import dataset, paths
from dltestbed.config import Spec
from dltestbed.errors import ConfigError, DataError, TargetError
from dltestbed.inventory import Host, over_ssh, this_machine
from dltestbed.kinds import any_kind
from dltestbed.provision.ansible import Play, run_playbook
from dltestbed.provision.guest import inventory_text
from dltestbed.provision.wheelhouse import source_root
from dltestbed.results.records import new_id
from dltestbed.runtimes import CONTAINER_USER
from dltestbed.targets import DataPlace, Site, make
from dltestbed.targets.base import Target
from dltestbed.vms.record import VMRecord

DATA_ROOT = "/var/lib/dltestbed/datasets"  # on inventory hosts (dltestbed_data_root overrides it) and in VMs
MARKER = ".dltestbed-dataset"  # written last, before the copy gets its final name
Notice = Callable[[str], None]


@dataclass(frozen=True)
class Dataset:
    """The bench's dataset: its folder on the controller and its identity (digest, files, bytes)."""

    source: Path
    ident: dataset.DatasetId
    shared: bool = False  # the same path on every inventory host (NFS): read there, not copied

    @classmethod
    def of(cls, spec: Spec, shared: bool = False) -> Dataset | None:
        """The dataset a plan's spec reads (None for synthetic data)."""
        if spec.data != "real" or spec.data_dir is None or spec.data_digest is None:
            return None
        ident = dataset.DatasetId(spec.data_digest, spec.data_files or 0, spec.data_bytes or 0)
        return cls(Path(spec.data_dir), ident, shared)


def host_copy(host: Host, ident: dataset.DatasetId) -> str:
    """Where an inventory host keeps its copy."""
    return f"{host.vars.get('dltestbed_data_root') or DATA_ROOT}/{ident.digest}"


def vm_copy(ident: dataset.DatasetId) -> str:
    """Where a VM keeps its copy."""
    return f"{DATA_ROOT}/{ident.digest}"


def check(ds: Dataset, kinds: Sequence[str], hosts: Sequence[Host | None]) -> None:
    """Before anything is made: a ConfigError line for a kind that could not read the data."""
    if ds.shared and list(hosts) == [None]:
        raise ConfigError(
            "--data-shared is for --inventory hosts that mount the same path (this machine reads --data-dir as it is)"
        )
    here = any(this_machine(h) for h in hosts)  # reads --data-dir as it is
    if here and any_kind(kinds, lambda k: k.in_container and k.reads_host_data):
        if ":" in str(ds.source):
            raise ConfigError(f"cbm: --data-dir {str(ds.source)!r} has a ':', which a container's volume cannot mount")
        bad = dataset.unreadable_by_others(ds.source)
        if bad is not None:
            fix = f"chmod -R a+rX {shlex.quote(str(ds.source))}"
            raise ConfigError(
                f"cbm reads the dataset as the container's unprivileged user ({CONTAINER_USER}) and "
                f"{bad!r} is not readable by others; `{fix}`"
            )


def place(
    ds: Dataset, sites: Sequence[Site], kinds: Sequence[str], inventory: Path | None, on_notice: Notice | None = None
) -> list[Site]:
    """The sites with their DataPlace: each host's and VM's copy made where it is missing (one playbook
    run for the hosts, one for the VMs), a shared path checked on each host. Raises DataError naming
    the machine that could not get it."""
    say = on_notice or (lambda line: None)
    reads = any_kind(kinds, lambda k: k.reads_host_data)
    host_sites = [(s, h) for s in sites if reads and (h := over_ssh(s.host)) is not None]  # this machine: no copy
    vm_sites = [(s, s.vm) for s in sites if s.vm is not None and any_kind(kinds, lambda k: k.in_vm)]
    if ds.shared:
        for s, _ in host_sites:
            _check_shared(make("bm", s), ds)
    missing_hosts = [
        (s, h) for s, h in host_sites if not ds.shared and not _present(make("bm", s), host_copy(h, ds.ident))
    ]
    missing_vms = [(s, vm) for s, vm in vm_sites if not _present(make("vm", s), vm_copy(ds.ident))]
    if missing_hosts or missing_vms:
        names = [h.name for _, h in missing_hosts] + [f"VM {vm.name}" for _, vm in missing_vms]
        say(f"dataset {ds.ident.describe()}: copying to {', '.join(names)} (once; kept for the next bench)")
        started = time.monotonic()
        archive = _archive(ds)
        try:
            if missing_hosts:
                if inventory is None:
                    raise ConfigError("placing the dataset on inventory hosts needs the inventory")
                _playbook(ds, archive, inventory, {h.name: host_copy(h, ds.ident) for _, h in missing_hosts})
            if missing_vms:
                recs = [vm for _, vm in missing_vms]
                vias = [over_ssh(s.host) for s, _ in missing_vms]
                _playbook(ds, archive, _vm_inventory(recs, vias), {r.name: vm_copy(ds.ident) for r in recs})
        finally:
            archive.unlink(missing_ok=True)
        say(f"dataset {ds.ident.short}: placed in {time.monotonic() - started:.0f} s")
    out = []
    for s in sites:
        remote = over_ssh(s.host)
        here = str(ds.source) if remote is None or ds.shared else host_copy(remote, ds.ident)
        in_vm = vm_copy(ds.ident) if s.vm is not None else None
        out.append(dataclasses.replace(s, data=DataPlace(host=here, vm=in_vm)))
    return out


def _present(target: Target, folder: str) -> bool:
    """Whether a complete copy is there (its marker, written before the final rename)."""
    try:
        return target.run(["test", "-f", f"{folder}/{MARKER}"], timeout=60).ok
    except TargetError as exc:
        raise DataError(f"dataset: cannot reach {target.host} to look for its copy: {exc}") from None


def _check_shared(target: Target, ds: Dataset) -> None:
    """A shared path holds the same files and bytes on this host as on the controller (a stat each)."""
    code = "import sys; from dltestbed import dataset; i = dataset.scan(sys.argv[1]); print(*dataset.shape(i))"
    lines: list[str] = []
    try:
        res = target.run([target.python, "-c", code, str(ds.source)], timeout=600, on_line=lines.append)
    except TargetError as exc:
        raise DataError(f"--data-shared: cannot reach {target.host}: {exc}") from None
    if not res.ok or not lines:
        why = (res.stderr_tail or [res.describe()])[-1].strip()
        raise DataError(f"--data-shared: {target.host} cannot read {str(ds.source)!r}: {why}")
    found = tuple(int(x) for x in lines[-1].split())
    if found != (ds.ident.files, ds.ident.bytes):
        raise DataError(
            f"--data-shared: {str(ds.source)!r} on {target.host} has {found[0]} files, {found[1]} bytes; "
            f"the controller's has {ds.ident.files} files, {ds.ident.bytes} bytes"
        )


def _archive(ds: Dataset) -> Path:
    """A tar of exactly the files the digest covers (relative paths, no owners), in the controller's cache."""
    index = dataset.scan(ds.source)
    if dataset.shape(index) != (ds.ident.files, ds.ident.bytes):
        raise DataError(f"data dir {str(ds.source)!r} changed since the bench digested it; run the bench again")
    folder = paths.cache_dir() / "datasets"
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{ds.ident.digest}.tar"
    tmp = out.with_suffix(f".{new_id('t')}.tmp")
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        for f in index.files:
            info = tar.gettarinfo(f, arcname=str(Path(f).relative_to(index.root)))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode = 0o644
            with open(f, "rb") as fh:
                tar.addfile(info, fh)
    tmp.replace(out)
    return out


def _vm_inventory(recs: Sequence[VMRecord], vias: Sequence[Host | None]) -> Path:
    """One ansible inventory for several VMs (each through its host when that is remote)."""

    hosts: dict[str, object] = {}
    for rec, via in zip(recs, vias, strict=True):
        hosts.update(yaml.safe_load(inventory_text(rec, via))["all"]["hosts"])
    private = paths.state_dir() / "provision" / new_id("d")
    private.mkdir(parents=True)
    inv = private / "vm-inventory.yml"
    inv.write_text(yaml.safe_dump({"all": {"hosts": hosts}}, sort_keys=False))
    inv.chmod(0o600)
    return inv


def _playbook(ds: Dataset, archive: Path, inventory: Path, dests: dict[str, str]) -> None:
    """Run the dataset role on each host of `dests`, into its folder there (host_copy, vm_copy: the one
    place these paths are decided); a DataError line naming the first host that failed."""
    names = list(dests)
    private = paths.state_dir() / "provision" / new_id("d")
    extravars = {
        "dltestbed_hosts": ",".join(names),
        "dltestbed_data_dests": dests,
        "dltestbed_data_marker": MARKER,
        "dltestbed_dataset": {
            "digest": ds.ident.digest,
            "files": ds.ident.files,
            "bytes": ds.ident.bytes,
            "archive": str(archive),
        },
    }
    play = Play(source_root() / "playbooks", "data.yml", inventory, extravars)
    result = run_playbook(play, private, "dataset", forks=max(1, min(len(names), 16)))
    if result.status == "canceled":
        raise KeyboardInterrupt
    for name in names:
        out = result.hosts.get(name)
        if out is None or not out.succeeded:
            why = out.message if out and out.message else f"ansible-playbook {result.status} (rc {result.rc})"
            raise DataError(f"dataset {ds.ident.short} on {name}: {why} (see {result.artifacts}/stdout)")
