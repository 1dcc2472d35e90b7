"""The workload image saved as one compressed archive, cached by its tag and digest: what provisioning copies to
container hosts, the guest image and a user's own Podman store load, so each runs the same image, digest
included.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from dltestbed import locks, paths, runtimes
from dltestbed.provision.cache import prune
from dltestbed.provision.image import Image, ImageError, last_line, run_step, runtime_env


def archive(img: Image) -> Path:
    """The image saved as one compressed archive (cached by tag and digest): what provisioning copies to container hosts
    and loads there, so every host runs the same image, digest included. Each runtime's `save` writes its layers
    uncompressed and the archive goes through the runtime's compressor on the way (Podman's OCI archive zstd,
    Docker's gzip -1: a third of the size; each `load` reads its own); without that compressor, uncompressed."""
    name = f"{img.tag.replace(':', '-').replace('/', '_')}-{img.digest.removeprefix('sha256:')[:12]}"
    path = paths.cache_dir() / "images" / f"{name}.{img.runtime}.tar"  # by digest: two stores build a tag apart
    if path.exists():
        return path
    with locks.beside(path, f"the archive of {img.tag}"):
        return path if path.exists() else _save(img, path)


def _save(img: Image, path: Path) -> Path:
    partial = path.with_name(path.name + ".partial")
    partial.unlink(missing_ok=True)
    rt = runtimes.runtime(img.runtime)
    compress = list(rt.archive_compressor)
    try:
        if compress and shutil.which(compress[0]):
            _piped(rt.save_argv(img.tag, None), compress, partial, f"{img.runtime} save", runtime_env(img.runtime))
        else:
            run_step(rt.save_argv(img.tag, partial), f"{img.runtime} save", runtime_env(img.runtime), timeout=1800)
    except ImageError:
        partial.unlink(missing_ok=True)  # a save that broke off leaves no gigabytes behind
        raise
    partial.rename(path)
    prune(path.parent.glob(f"*.{img.runtime}.tar"), current=path)
    return path


def _piped(
    first: list[str], second: list[str], out: Path, what: str, env: Mapping[str, str], timeout: float = 1800
) -> None:
    """`first | second > out`, each checked: an ImageError naming `what` and the last line of error of the one
    that failed (the first's before the second's: a filter fails when its input breaks off)."""
    with tempfile.TemporaryFile() as err1, tempfile.TemporaryFile() as err2, out.open("wb") as sink:
        src = subprocess.Popen(first, stdout=subprocess.PIPE, stderr=err1, env=dict(env))
        try:
            dst = subprocess.Popen(second, stdin=src.stdout, stdout=sink, stderr=err2, env=dict(env))
            if src.stdout:
                src.stdout.close()  # the second process holds the pipe alone: it sees the first one end
            try:
                rc2 = dst.wait(timeout=timeout)
            finally:
                if dst.poll() is None:
                    dst.kill()
                    dst.wait()
            rc1 = src.wait(timeout=60)
        finally:
            if src.poll() is None:
                src.kill()
                src.wait()
        for rc, err, name in ((rc1, err1, first[0]), (rc2, err2, second[0])):
            if rc != 0:
                err.seek(0)
                raise ImageError(f"{what} failed ({name}): {last_line(err.read().decode(errors='replace'), rc)}")
