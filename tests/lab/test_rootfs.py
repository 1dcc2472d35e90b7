"""The root filesystem every container image and guest image starts from, built for real where nothing is
cached (a new user's first `image build`): debootstrap runs, the tar is kept under its recipe's name, and
the next call takes it from the cache without running anything."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from dltestbed import paths
from dltestbed.provision import image

pytestmark = pytest.mark.timeout(1200)


def test_rootfs_is_built_when_nothing_is_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # nothing cached: the path a new user takes
    assert not paths.cache_dir().exists()
    tar = image.rootfs(packages=())  # the smallest set: debootstrap's minbase alone
    assert tar.parent == paths.cache_dir() / "rootfs" and tar.name.endswith(".tar")
    members = subprocess.run(["tar", "-tf", str(tar)], capture_output=True, text=True, check=True).stdout.split()
    assert {"./etc/debian_version", "./usr/bin/dpkg"} <= set(members)
    assert not list(tar.parent.glob("*.partial"))
    stamp = tar.stat().st_mtime_ns
    # cached: found again with debootstrap out of reach, so nothing was run to find it
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert image.rootfs(packages=()) == tar and tar.stat().st_mtime_ns == stamp
    with pytest.raises(image.ImageError, match="debootstrap is not installed"):
        image.rootfs(packages=("python3",))  # another recipe is another tar: not taken from this one
