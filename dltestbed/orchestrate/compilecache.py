"""A bench's compile caches: where a framework that keeps them (PyTorch's Inductor) compiles a run's step, the
bench's later runs of the same machine and kind reuse what the first compiled. Each machine gets a folder per kind
when the bench starts (`mktemp -d` in its /var/tmp, or $TMPDIR, as the user its runs run as; a rootful runtime's
container user is given it), mounted into containers (whose /tmp is new at each run), and removed when the bench
ends, whatever happened. A bench starts cold: its first compiled run on each machine and kind compiles. Kinds
never share a folder, and A/A's second bare-metal arm keeps its own inside bm's (runner.execute), so no layer's
start-up borrows another's compilation."""

from __future__ import annotations

import contextlib
import dataclasses
import re
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
PREFIX = "dltestbed-compile."
# /var/tmp, as Inductor's own fbcode default: on disk, and not the noexec /tmp of hardened hosts (the compiled
# kernels are loaded from the folder)
MKTEMP = ["sh", "-c", f'exec mktemp -d -p "${{TMPDIR:-/var/tmp}}" {PREFIX}XXXXXXXX']
FOLDER_RE = re.compile(rf"/\S*/{re.escape(PREFIX)}[A-Za-z0-9]{{8}}")  # what mktemp answers; nothing else is removed
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
    removed on the way out, once every machine's preparation has ended (Ctrl-C included). A folder that cannot be
    made is one line, and that kind's runs there use PyTorch's own cache."""
    if not wanted(specs):
        yield list(sites)
        return
    made: list[_Folder] = []
    try:
        pool = ThreadPoolExecutor(max_workers=min(PARALLEL, max(1, len(sites))))
        try:
            futures = [pool.submit(_place, s, kinds, made, say) for s in sites]
            placed = [f.result() for f in futures]
        finally:
            with shielded():  # a second Ctrl-C waits too: every folder made is in `made` before any is removed
                pool.shutdown(wait=True, cancel_futures=True)
        used = sum(len(s.caches) for s in placed)
        if used:
            where = next(p for s in placed for p in s.caches.values()) if used == 1 else f"{used} folders"
            say(f"torch.compile's caches shared by the runs of each machine and kind ({where}); removed at the end")
        yield placed
    finally:
        with shielded(), ThreadPoolExecutor(max_workers=min(PARALLEL, max(1, len(made)))) as pool:
            for left in pool.map(_remove, made):
                if left:
                    say(left)


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
            made.append(_Folder(maker, path))
            if isinstance(target, ContainerTarget):
                writer = target.writer()
                if writer is not None:
                    _run(maker, ["chown", writer, path], "chown")
        except TargetError as exc:
            say(
                f"{site.label}: no compile cache for {kind} ({exc}): its compiled runs use PyTorch's own "
                "(/tmp/torchinductor_USER, which a container loses at each run)"
            )
            continue
        caches[kind] = path
    return dataclasses.replace(site, caches=caches)


def _run(target: Target, argv: list[str], name: str) -> list[str]:
    """argv's stdout lines on the target, or a TargetError naming it with its stderr's last line."""
    lines: list[str] = []
    res = target.run(argv, timeout=TIMEOUT, on_line=lines.append)
    if res.returncode != 0:
        tail = res.stderr_tail[-1] if res.stderr_tail else f"exit {res.returncode}"
        raise TargetError(f"`{name}` failed on {target.host}: {tail}")
    return lines


def _mktemp(maker: Target) -> str:
    """A new private folder in the machine's /var/tmp (or $TMPDIR), owned by the user the maker runs as: the last
    line mktemp printed (a login shell's banner may come first), checked to be one."""
    lines = [line.strip() for line in _run(maker, MKTEMP, "mktemp -d") if line.strip()]
    if not lines or not FOLDER_RE.fullmatch(lines[-1]):
        raise TargetError(f"mktemp on {maker.host} gave no folder ({lines[-1] if lines else 'nothing'!r})")
    return lines[-1]


def _remove(folder: _Folder) -> str | None:
    """The folder and what the runs wrote in it, gone; None, or the line that says it was left (a machine that
    no longer answers keeps it, to its temp folder's own cleaning)."""
    if not FOLDER_RE.fullmatch(folder.path):  # never: _mktemp checked it
        return f"{folder.maker.host}: compile cache {folder.path!r} left: not a folder mktemp made"
    try:
        res = folder.maker.run(["rm", "-rf", "--", folder.path], timeout=TIMEOUT)
    except TargetError as exc:
        return f"{folder.maker.host}: compile cache {folder.path} left ({exc})"
    if res.returncode != 0:
        tail = res.stderr_tail[-1] if res.stderr_tail else f"exit {res.returncode}"
        return f"{folder.maker.host}: compile cache {folder.path} left ({tail})"
    return None
