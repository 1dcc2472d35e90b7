"""The workload image where an unprivileged runtime reads it on this machine: Charliecloud's image folder,
converted from Podman's store (exported, unpacked by ch-convert, then ch-fromhost --nvidia where the machine has
GPUs), and a user's own Podman store for rootless Podman (the image's archive loaded into it as that user). Both
are the image Podman built, digest for digest."""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from dltestbed import locks, paths
from dltestbed.provision import image, imagearchive
from dltestbed.provision.cache import KEEP
from dltestbed.provision.wheelhouse import Wheelhouse
from dltestbed.runtimes.charliecloud import MOUNT_POINTS
from dltestbed.runtimes.podman_rootless import PodmanRootless
from dltestbed.users import drop_here

SOURCE_FILE = "ch/dltestbed-source"  # in an image folder: the Podman image's digest it was converted from


def folder(img: image.Image) -> Path:
    """Where Charliecloud's copy of a Podman image lies (whether it is there or not)."""
    return paths.charliecloud_root() / img.tag.replace(":", "-").replace("/", "_")


def find(house: Wheelhouse, base: str | None = None) -> image.Image | None:
    """Podman's image for these inputs as Charliecloud has it converted, found without asking Podman (a bench
    under Charliecloud starts no root process); None until `image build --runtime charliecloud`."""
    tag = image.tag_of(house, base)
    try:
        digest = (folder(image.Image("podman", tag, "")) / SOURCE_FILE).read_text().strip()
    except OSError:
        return None
    return image.Image("podman", tag, digest) if digest else None


def converted(img: image.Image) -> Path | None:
    """Charliecloud's image folder of this Podman image, when it was converted already."""
    path = folder(img)
    try:
        return path if (path / SOURCE_FILE).read_text().strip() == img.digest else None
    except OSError:
        return None


def convert(img: image.Image, gpus: bool) -> Path:
    """Charliecloud's image folder of a Podman image, converted once (under a lock): the mount points the
    workload's binds need are made in it, and with `gpus` the host's NVIDIA driver libraries are injected
    (ch-fromhost --nvidia). Readable by every user; older conversions beyond the newest KEEP are removed."""
    done = converted(img)
    if done is not None:
        return done
    path = folder(img)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o755)  # the users who run ch-run must reach it
    with locks.beside(path, f"the Charliecloud conversion of {img.tag}"):
        if converted(img) is None:
            _convert(img, path, gpus)
    _prune(path)
    return path


def _convert(img: image.Image, path: Path, gpus: bool) -> None:
    partial = path.with_name(path.name + ".partial")
    for stale in (partial, path):
        shutil.rmtree(stale, ignore_errors=True)
    podman_env = image.runtime_env("podman")  # the store dltestbed's Podman builds in
    try:
        with tempfile.TemporaryDirectory(prefix="dltestbed-export-", dir=path.parent) as tmp:
            tar = Path(tmp) / "image.tar"
            _export(img, tar, podman_env)
            image.run_step(["ch-convert", "-i", "tar", str(tar), str(partial)], "ch-convert", podman_env)
        for point in MOUNT_POINTS:
            (partial / point.lstrip("/")).mkdir(parents=True, exist_ok=True)
        if gpus:
            image.run_step(["ch-fromhost", "--nvidia", str(partial)], "ch-fromhost --nvidia", podman_env)
        (partial / SOURCE_FILE).write_text(img.digest + "\n")
        partial.chmod(0o755)
        partial.rename(path)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _export(img: image.Image, tar: Path, env: Mapping[str, str]) -> None:
    """A Podman image as the tar Charliecloud unpacks: its filesystem (`podman export` of a container made from it
    and never started) and its environment as ch/environment, as `ch-convert -i podman` writes it, but never
    compressed (that gzips gigabytes on one core, only to unpack them again at once)."""
    cid = image.run_step(["podman", "create", "--read-only", img.tag, "/bin/true"], "podman create", env)
    try:
        image.run_step(["podman", "export", "-o", str(tar), cid], "podman export", env)
    finally:
        subprocess.run(["podman", "rm", cid], capture_output=True, env=dict(env), timeout=120)
    said = image.run_step(
        ["podman", "image", "inspect", "--format", "{{range .Config.Env}}{{println .}}{{end}}", img.tag],
        "podman image inspect",
        env,
    )
    environment = (said + "\n").encode() if said else b""
    with tarfile.open(tar, "a") as archive:
        member = tarfile.TarInfo("ch/environment")
        member.size, member.mode, member.mtime = len(environment), 0o644, int(time.time())
        archive.addfile(member, io.BytesIO(environment))


def _prune(current: Path) -> None:
    folders = [p for p in current.parent.iterdir() if p.is_dir() and (p / SOURCE_FILE).exists()]
    folders.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    for old in (p for p in folders[KEEP:] if p != current):
        shutil.rmtree(old, ignore_errors=True)


def user_image_id(user: str, tag: str) -> str | None:
    """The id of an image in a user's own Podman store, or None when it is not there."""
    argv = [PodmanRootless.command, *PodmanRootless.global_flags, "image", "inspect", "--format", "{{.Id}}", tag]
    proc = subprocess.run(drop_here(user, argv), capture_output=True, text=True, timeout=120)
    out = proc.stdout.strip()
    return (out if out.startswith("sha256:") else f"sha256:{out}") if proc.returncode == 0 and out else None


def user_driver(user: str) -> str | None:
    """The storage driver of a user's own Podman store (overlay, vfs, …), or None when Podman does not say."""
    argv = [PodmanRootless.command, *PodmanRootless.global_flags, "info", "--format", "{{.Store.GraphDriverName}}"]
    proc = subprocess.run(drop_here(user, argv), capture_output=True, text=True, timeout=120)
    subprocess.run(drop_here(user, PodmanRootless().after_argv()), capture_output=True, timeout=60)
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def load_for(user: str, img: image.Image) -> None:
    """A Podman image in a user's own store (rootless Podman): its archive loaded as that user, from a file this
    process opens (the user need not reach root's cache); the caller loads it only when missing (user_image_id).
    An ImageError when it cannot be loaded, or is there under another digest after."""
    archive = imagearchive.archive(img)
    with archive.open("rb") as stdin:
        argv = drop_here(user, [PodmanRootless.command, *PodmanRootless.global_flags, "load", "--quiet"])
        proc = subprocess.run(argv, stdin=stdin, capture_output=True, text=True, timeout=1800)
    subprocess.run(drop_here(user, PodmanRootless().after_argv()), capture_output=True, timeout=60)
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.splitlines() if line.strip()] or [f"exit code {proc.returncode}"]
        raise image.ImageError(f"loading {img.tag} into {user}'s Podman store failed: {lines[-1]}")
    if user_image_id(user, img.tag) != img.digest:
        raise image.ImageError(f"{user}'s Podman store holds {img.tag} under another digest than {img.digest}")
