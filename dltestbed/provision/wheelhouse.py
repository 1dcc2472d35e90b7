"""An offline wheelhouse of the workload and its dependencies, built on the controller.

HPC compute nodes often have no internet: the controller downloads every wheel once (cached by
the hash of its inputs), the hosts install from the copy they are given, with `--no-index`.
Versions follow the controller's own environment where it has the package, so bare metal and
containers run the same TensorFlow build as the controller measured with.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from dltestbed import locks, paths
from dltestbed.errors import ConfigError, DltestbedError
from dltestbed.provision.cache import prune

WORKLOAD_REQUIREMENTS = ("pydantic", "psutil")  # what `python -m dltestbed.workload` imports, besides TF
TF_PACKAGES = {"cpu": "tensorflow-cpu", "gpu": "tensorflow[and-cuda]"}
GPU_EXTRA = {"nvidia-ml-py": ">=12.560", "cuda-bindings": ">=12.6,<13"}  # name: the range when the controller has none


class WheelhouseError(DltestbedError):
    """The wheelhouse could not be built."""


def source_root() -> Path:
    """The dltestbed source checkout (provisioning builds its wheel from it)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").exists() or not (root / "playbooks").is_dir():
        raise ConfigError(
            f"provisioning needs a source checkout of dltestbed (pyproject.toml and playbooks/ next to the "
            f"package); {root} has none: install with `pip install -e` from a clone"
        )
    return root


def _installed(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def tf_version(root: Path) -> str:
    """The TensorFlow version to install: the controller's, else the minimum of pyproject's extra."""
    for dist in ("tensorflow-cpu", "tensorflow"):
        v = _installed(dist)
        if v:
            return v
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    m = re.search(r"tensorflow-cpu\s*[>=]=\s*([\w.]+)", " ".join(extras.get("cpu", [])))
    if not m:
        raise WheelhouseError("cannot tell which TensorFlow to install (no TensorFlow here, none in pyproject.toml)")
    return m.group(1)


def requirements(flavor: str, root: Path) -> list[str]:
    """Top-level requirements of the workload for a TF flavor (cpu or gpu), pinned to the controller."""
    if flavor not in TF_PACKAGES:
        raise ConfigError(f"unknown TensorFlow flavor {flavor!r}; known: {', '.join(TF_PACKAGES)}")
    reqs = [f"{TF_PACKAGES[flavor]}=={tf_version(root)}"]
    for name, wanted in [*((n, "") for n in WORKLOAD_REQUIREMENTS), *(GPU_EXTRA.items() if flavor == "gpu" else ())]:
        v = _installed(name)
        reqs.append(f"{name}=={v}" if v else name + wanted)
    return reqs


def source_hash(root: Path) -> str:
    """sha256 over the package's source files and pyproject.toml."""
    h = hashlib.sha256()
    files = sorted(p for p in (root / "dltestbed").rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for p in [root / "pyproject.toml", *files]:
        h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def _archive_path(path: Path) -> Path:
    return path.with_name(path.name + ".tar")


@dataclass(frozen=True)
class Wheelhouse:
    """A folder of wheels plus requirements.txt and a manifest (its identity on hosts)."""

    path: Path
    flavor: str
    manifest: str  # sha256 of the wheels' names and contents

    @property
    def requirements(self) -> Path:
        """Exact pins of every wheel in it."""
        return self.path / "requirements.txt"

    @property
    def archive(self) -> Path:
        """The wheelhouse as one uncompressed tar (wheels are compressed already): one file to
        copy per host instead of dozens, which is what makes the transfer fast."""
        return _archive_path(self.path)

    @property
    def wheel(self) -> str:
        """File name of dltestbed's own wheel."""
        return next(p.name for p in self.path.glob("dltestbed-*.whl"))


def _pip(args: list[str], what: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args], capture_output=True, text=True
    )
    if proc.returncode != 0:
        last = [line for line in proc.stderr.splitlines() if line.strip() and "WARNING: Location" not in line]
        raise WheelhouseError(f"{what} failed: {last[-1] if last else f'pip exited {proc.returncode}'}")


def _manifest(path: Path) -> str:
    h = hashlib.sha256()
    for whl in sorted(path.glob("*.whl")):
        h.update(whl.name.encode() + b"\0" + hashlib.sha256(whl.read_bytes()).digest())
    return h.hexdigest()


def _path(flavor: str, root: Path, reqs: list[str]) -> Path:
    """Where the wheelhouse of these inputs lives (named by their hash)."""
    key = hashlib.sha256("\n".join([source_hash(root), *reqs, _py(), os.uname().machine]).encode()).hexdigest()[:16]
    return paths.wheelhouse_root() / f"{flavor}-py{_py()}-{key}"


def _py() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def cached(flavor: str = "cpu") -> Wheelhouse | None:
    """The wheelhouse of this build if it was built already; None otherwise (nothing is built)."""
    root = source_root()
    return _finished(flavor, _path(flavor, root, requirements(flavor, root)))


def _finished(flavor: str, path: Path) -> Wheelhouse | None:
    """The wheelhouse at path when its build completed (manifest and archive both there)."""
    done = path / "manifest.txt"
    if done.exists() and _archive_path(path).exists():
        return Wheelhouse(path, flavor, done.read_text().strip())
    return None


def build(flavor: str = "cpu") -> Wheelhouse:
    """The wheelhouse for a flavor, from the cache when its inputs are unchanged (built by one process
    at a time: a second one waits, then finds it)."""
    root = source_root()
    reqs = requirements(flavor, root)
    path = _path(flavor, root, reqs)
    found = _finished(flavor, path)
    if found is not None:
        return found
    with locks.beside(path, "the wheelhouse"):
        return _finished(flavor, path) or _build(flavor, root, reqs, path)


def _build(flavor: str, root: Path, reqs: list[str], path: Path) -> Wheelhouse:
    py = _py()
    tmp = path.with_name(path.name + ".partial")
    for stale in (path, tmp):  # an older layout, or a crash between the renames below: rebuild
        if stale.exists():
            shutil.rmtree(stale)
    tmp.mkdir(parents=True)
    constraints = tmp / "constraints.txt"
    constraints.write_text(
        "".join(
            f"{d.metadata['Name']}=={d.version}\n"
            for d in md.distributions()
            if d.metadata["Name"] and d.metadata["Name"].lower() != "dltestbed"
        )
    )
    _pip(["wheel", "--no-deps", "-q", "-w", str(tmp), str(root)], "building the dltestbed wheel")
    _pip(
        ["download", "-q", "-d", str(tmp), "--only-binary=:all:", "-c", str(constraints), *reqs],
        f"downloading {', '.join(reqs)}",
    )
    constraints.unlink()
    pins = []
    for whl in sorted(tmp.glob("*.whl")):
        name, version = whl.name.split("-")[:2]
        if name != "dltestbed":
            pins.append(f"{name}=={version}")
    (tmp / "requirements.txt").write_text("\n".join(pins) + "\n")
    manifest = _manifest(tmp)
    (tmp / "manifest.txt").write_text(manifest + "\n")
    house = Wheelhouse(path, flavor, manifest)
    partial_tar = house.archive.with_name(house.archive.name + ".partial")
    with tarfile.open(partial_tar, "w") as tar:
        for f in sorted(tmp.iterdir()):
            tar.add(f, arcname=f.name)
    partial_tar.rename(house.archive)
    tmp.rename(path)
    olds = [
        p for p in paths.wheelhouse_root().glob(f"{flavor}-py{py}-*") if p.is_dir() and not p.name.endswith(".partial")
    ]
    for removed in prune(olds, current=path):
        _archive_path(removed).unlink(missing_ok=True)
    return house
