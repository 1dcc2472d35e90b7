"""A bench's unprivileged side: --as-user checked before anything runs, the rootless runtimes' refusals, where
their image is (Charliecloud's folder, a user's Podman store) and its placing into the user's store."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from dltestbed import dataset
from dltestbed.errors import ConfigError
from dltestbed.inventory import Host, this_machine
from dltestbed.kinds import any_kind
from dltestbed.provision import image, userstore
from dltestbed.runtimes import RUNTIMES
from dltestbed.targets import Site
from dltestbed.users import check_name, drop_here, invoking_user, local_uid


def _root() -> bool:
    return os.geteuid() == 0


def check(as_user: str | None, kinds: Sequence[str], runtime: str | None, hosts: Sequence[Host | None]) -> None:
    """A ConfigError line for --as-user or a rootless runtime this bench cannot honour; nothing is run."""
    if as_user is not None:
        check_name(as_user)
        if any_kind(kinds, lambda k: k.in_vm):
            raise ConfigError("--as-user: bm and cbm only in this version (a VM's workload runs as its guest's user)")
        if not _root() and as_user != invoking_user():
            raise ConfigError(f"--as-user {as_user}: changing user needs root (dltestbed runs as {invoking_user()})")
        here = [h for h in hosts if this_machine(h)]  # no inventory host, or a local one
        if here:
            local_uid(as_user)
            if "bm" in kinds and _root():
                for python in dict.fromkeys(sys.executable if h is None else h.python for h in here):
                    _check_reaches(as_user, python)
    rt = RUNTIMES.get(runtime or "")
    if rt is None or not rt.rootless or not any_kind(kinds, lambda k: k.store_image):
        return
    if any(h is not None for h in hosts):
        raise ConfigError(f"--runtime {rt.name}: on this machine only in this version (not on inventory hosts)")
    if _root() and as_user is None:
        raise ConfigError(
            f"--runtime {rt.name} runs containers as an unprivileged user, and dltestbed runs as root: "
            "name the user with --as-user NAME"
        )


def _check_reaches(user: str, python: str) -> None:
    """A ConfigError line when the user cannot start this machine's dltestbed with `python` (an interpreter under
    root's home): the check runs the run's own command line (users.drop_here, variables handed over by `env`)."""
    argv = drop_here(user, [python, "-c", "import dltestbed.workload"])
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"--as-user {user}: could not start dltestbed as that user ({exc})") from None
    if proc.returncode != 0:
        lines = [x.strip() for x in proc.stderr.splitlines() if x.strip()] or [f"exit code {proc.returncode}"]
        raise ConfigError(
            f"--as-user {user}: that user cannot run this machine's dltestbed: {lines[-1]}; {_advice(python)}"
        )


def _advice(python: str) -> str:
    """What mends it: the folder that keeps the user from the interpreter, or the files it cannot read."""
    real = Path(python).resolve()
    seen = [*reversed(Path(python).absolute().parents), *reversed(real.parents)]  # the venv's folders, then the real
    closed = next((p for p in seen if not os.stat(p).st_mode & 0o001), None)
    if closed is not None:
        return (
            f"{python} is {real}, under {closed}, which others cannot enter: make a venv from a Python the user can "
            f"reach (e.g. /usr/bin/python3 -m venv /opt/dltestbed), or `chmod o+x {shlex.quote(str(closed))}`"
        )
    return f"dltestbed's venv ({Path(python).parent.parent}) must be readable by that user: chmod -R o+rX it"


def check_data(as_user: str | None, source: Path, hosts: Sequence[Host | None]) -> None:
    """A ConfigError line when --as-user's user cannot read the real data on this machine (a folder above it
    closed to others, or one of its files), where it is read as it is (no inventory host, or a local one)."""
    if as_user is None or not any(this_machine(h) for h in hosts) or not _root():
        return
    bad = dataset.unreadable_by_others(source)
    proc = subprocess.run(drop_here(as_user, ["test", "-r", str(source), "-a", "-x", str(source)]), timeout=60)
    if bad is not None or proc.returncode != 0:
        raise ConfigError(
            f"--as-user {as_user}: that user cannot read --data-dir {bad or source} (every folder above it must "
            f"be open to others too); `chmod -R a+rX {shlex.quote(str(source))}`"
        )


def local_tag(runtime: str, img: image.Image | None) -> str | None:
    """What a runtime's container is started from on this machine: the image's tag, Charliecloud's image folder
    (None until converted: `image build --runtime charliecloud`); None without the image."""
    if img is None:
        return None
    if runtime != "charliecloud":
        return img.tag
    folder = userstore.converted(img)
    return str(folder) if folder is not None else None


def place(site: Site, on_notice: Callable[[str], None] | None) -> None:
    """Rootless Podman started by root for --as-user: the image loaded into that user's own store, once."""
    c = site.container
    if c is None or c.runtime != "podman-rootless" or site.host is not None or not _root() or not site.as_user:
        return
    say = on_notice or (lambda line: None)
    img = image.Image(image.store_of(c.runtime), c.tag, c.digest)
    if userstore.user_image_id(site.as_user, img.tag) != img.digest:
        say(f"loading {img.tag} into {site.as_user}'s own Podman store (rootless Podman; once per image)")
        userstore.load_for(site.as_user, img)
    if userstore.user_driver(site.as_user) == "vfs":
        say(
            f"{site.as_user}'s Podman store uses the vfs driver: each container copies the whole image, which its "
            "launch-to-finish time includes (overlay, native or through fuse-overlayfs, does not: "
            f"~{site.as_user}/.config/containers/storage.conf)"
        )
