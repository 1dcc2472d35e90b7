"""Where the lab's Kubernetes is: the binaries scripts/kubernetes.sh built from Debian's source into dltestbed's
cache (`current` names the build), checked against the checksums it recorded before anything runs them."""

from __future__ import annotations

import hashlib
from pathlib import Path

from dltestbed import paths
from dltestbed.lab.net import LabError

BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "etcd", "pause")
BUILD = "bash scripts/install.sh --kubernetes"  # what builds them (about 5 minutes on 2 cores)


def root() -> Path:
    """The build in use: cache_dir()/kubernetes/current (a link to its version's folder)."""
    return paths.cache_dir() / "kubernetes" / "current"


def binary(name: str) -> str:
    """A built binary's path (one of BINARIES)."""
    assert name in BINARIES, name
    return str(root() / "bin" / name)


def version() -> str:
    """The Debian source version built (the name of the folder `current` names)."""
    return root().resolve().name


def sums(text: str) -> dict[str, str]:
    """`sha256sum` lines → path → digest. Pure."""
    out = {}
    for line in text.splitlines():
        digest, sep, path = line.partition("  ")
        if sep and len(digest) == 64:
            out[path.removeprefix("./")] = digest
    return out


def check() -> None:
    """Every binary built and as recorded; one LabError line that says how to build them otherwise."""
    where = root()
    listed = where / "SHA256SUMS"
    if not listed.is_file():
        raise LabError(f"--kubernetes: Kubernetes is not built here ({where}); build it once with: {BUILD}")
    want = sums(listed.read_text())
    for name in BINARIES:
        rel = f"bin/{name}"
        if rel not in want:
            raise LabError(f"--kubernetes: {listed} lists no {rel}; build again with: {BUILD}")
        digest = hashlib.sha256()
        try:
            with (where / rel).open("rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
        except OSError as exc:
            raise LabError(f"--kubernetes: {where / rel}: {exc.strerror}; build again with: {BUILD}") from None
        if digest.hexdigest() != want[rel]:
            raise LabError(f"--kubernetes: {where / rel} is not what was built (its checksum differs); {BUILD}")
