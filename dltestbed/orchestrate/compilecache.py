"""A bench's compile caches: where a framework that keeps them (PyTorch's Inductor) compiles a run's step, the
bench's later runs of the same machine and kind reuse what the first compiled. Each machine gets a folder per kind
when the bench starts (`mktemp -d` there, as the user its runs run as; a rootful runtime's container user is given
it), mounted into containers (whose /tmp is new at each run), and removed when the bench ends, whatever happened.
A bench starts cold: its first compiled run on each machine and kind compiles, as the one before it did; kinds
never share a folder, so no layer's start-up borrows another's compilation."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

from dltestbed.config import Spec, WorkloadSpec
from dltestbed.errors import TargetError
from dltestbed.shield import shielded
from dltestbed.targets import Site, make
from dltestbed.targets.base import Target, machine_under
from dltestbed.targets.container import ContainerTarget
from dltestbed.workload.frameworks import REGISTRY

PARALLEL = 32  # machines prepared at once
TIMEOUT = 60.0  # seconds a folder's command may take on its machine
Say = Callable[[str], None]


def wanted(specs: Sequence[Spec]) -> bool:
    """Whether a spec compiles its step with a framework that keeps compile caches."""
    return any(
        isinstance(s, WorkloadSpec) and s.xla and s.framework in REGISTRY and REGISTRY[s.framework].compile_cache
        for s in specs
    )


@dataclasses.dataclass
class _Folder:
    """A folder made on a machine, and the target that made it there (and removes it)."""

    maker: Target
    path: str


@contextlib.contextmanager
def shared(sites: Sequence[Site], kinds: Sequence[str], specs: Sequence[Spec], say: Say) -> Iterator[list[Site]]:
    """The sites, each given a compile-cache folder per kind (Site.caches) when a spec wants one; every folder
    removed on the way out. A folder that cannot be made is one line, and that kind's runs there compile as
    PyTorch would alone."""
    if not wanted(specs):
        yield list(sites)
        return
    made: list[_Folder] = []
    try:
        with ThreadPoolExecutor(max_workers=min(PARALLEL, max(1, len(sites)))) as pool:
            placed = list(pool.map(lambda s: _place(s, kinds, made, say), sites))
        if made:
            where = made[0].path if len(made) == 1 else f"{len(made)} folders, one per machine and kind"
            say(f"torch.compile's caches shared by the runs of each machine and kind ({where}); removed at the end")
        yield placed
    finally:
        with shielded(), ThreadPoolExecutor(max_workers=min(PARALLEL, max(1, len(made)))) as pool:
            list(pool.map(_remove, made))


def _place(site: Site, kinds: Sequence[str], made: list[_Folder], say: Say) -> Site:
    """The site with a folder per kind on the machine that holds the kind's process (a machine that was down
    when the bench began gets none)."""
    if site.down is not None:
        return site
    caches: dict[str, str] = {}
    for kind in dict.fromkeys(kinds):
        target = make(kind, site)
        maker = machine_under(target)  # a container's folder is its host's (or VM's), made as its runtime's CLI runs
        try:
            path = _mktemp(maker)
        except TargetError as exc:
            say(f"{site.label}: no compile cache for {kind} ({exc}): each of its compiled runs compiles afresh")
            continue
        made.append(_Folder(maker, path))
        if isinstance(target, ContainerTarget):
            why = _give(target, maker, path)
            if why:
                say(f"{site.label}: no compile cache for {kind} ({why}): each of its compiled runs compiles afresh")
                continue
        caches[kind] = path
    return dataclasses.replace(site, caches=caches)


def _run(target: Target, argv: list[str]) -> list[str]:
    """argv's stdout lines on the target, or a TargetError with its stderr's last line."""
    lines: list[str] = []
    res = target.run(argv, timeout=TIMEOUT, on_line=lines.append)
    if res.returncode != 0:
        tail = res.stderr_tail[-1] if res.stderr_tail else f"exit {res.returncode}"
        raise TargetError(f"`{' '.join(argv[:2])}` failed on {target.host}: {tail}")
    return lines


def _mktemp(maker: Target) -> str:
    """A new private folder in the machine's temp folder, owned by the user the maker runs as."""
    lines = _run(maker, ["mktemp", "-d", "-t", "dltestbed-compile.XXXXXXXX"])
    if not lines or not lines[0].startswith("/"):
        raise TargetError(f"mktemp on {maker.host} gave no folder")
    return lines[0].strip()


def _give(target: ContainerTarget, maker: Target, path: str) -> str | None:
    """The folder given to the user a rootful runtime's container writes as (None: done, or nothing to do); why
    not, in words."""
    try:
        writer = target.writer()
        if writer is not None:
            _run(maker, ["chown", writer, path])
    except TargetError as exc:
        return str(exc)
    return None


def _remove(folder: _Folder) -> None:
    """The folder and what the runs wrote in it, gone; a machine that no longer answers keeps it (its temp
    folder's own cleaning takes it)."""
    with contextlib.suppress(TargetError):
        folder.maker.run(["rm", "-rf", "--", folder.path], timeout=TIMEOUT)
