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
import tempfile
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from dltestbed import locks, paths
from dltestbed.choices import DEFAULT_FRAMEWORK, FLAVORS, or_list
from dltestbed.errors import ConfigError, DltestbedError
from dltestbed.provision.cache import prune
from dltestbed.workload.frameworks import REGISTRY, Framework

WORKLOAD_REQUIREMENTS = ("pydantic", "psutil")  # what `python -m dltestbed.workload` imports, besides a framework
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


def carried(frameworks: Sequence[str] = ()) -> tuple[str, ...]:
    """The frameworks a wheelhouse carries: the default one (always: the screen's checks run on it) and those
    asked for, in choices' order; an unknown name is a ConfigError."""
    unknown = [f for f in frameworks if f not in REGISTRY]
    if unknown:
        raise ConfigError(f"--framework: unknown framework {unknown[0]!r}; known: {or_list(REGISTRY)}")
    return tuple(f for f in REGISTRY if f == DEFAULT_FRAMEWORK or f in frameworks)


def holding(frameworks: Sequence[str] = ()) -> list[tuple[str, ...]]:
    """Every set of frameworks a wheelhouse can carry (`carried`) that holds these, the fewest first."""
    wanted = set(carried(frameworks))
    every = {carried(c) for n in range(len(REGISTRY) + 1) for c in combinations(REGISTRY, n)}
    order = [*REGISTRY]
    return sorted((c for c in every if wanted <= set(c)), key=lambda c: (len(c), [order.index(f) for f in c]))


def beside_default(frameworks: Sequence[str] = ()) -> list[str]:
    """The frameworks carried beside the default one: each a `--framework` of the command that builds them."""
    return [f for f in carried(frameworks) if f != DEFAULT_FRAMEWORK]


def framework_version(fw: type[Framework], root: Path) -> str:
    """The version of a framework to install: the controller's, else the one pyproject's extra names."""
    for dist in fw.distributions:
        v = _installed(dist)
        if v:
            return v
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = "|".join(re.escape(d) for d in fw.distributions)
    m = re.search(rf"(?:{names})\s*[>=]=\s*([\w.+]+)", " ".join(extras.get(fw.extra, [])))
    if not m:
        raise WheelhouseError(f"cannot tell which {fw.label} to install (none here, none in pyproject.toml)")
    return m.group(1)


def requirements(flavor: str, root: Path, frameworks: Sequence[str] = ()) -> list[str]:
    """Top-level requirements of the workload for a flavour (cpu or gpu) and the frameworks it carries (see
    `carried`), pinned to the controller."""
    if flavor not in FLAVORS:
        raise ConfigError(f"unknown flavour {flavor!r}; known: {', '.join(FLAVORS)}")
    chosen = [REGISTRY[f] for f in carried(frameworks)]
    reqs = [fw.pinned(flavor, framework_version(fw, root)) for fw in chosen]
    needs = dict.fromkeys([*WORKLOAD_REQUIREMENTS, *(n for fw in chosen for n in fw.requires)], "")
    for name, wanted in [*needs.items(), *(GPU_EXTRA.items() if flavor == "gpu" else ())]:
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
    frameworks: tuple[str, ...] = (DEFAULT_FRAMEWORK,)  # those it carries (`carried`)

    @property
    def imports(self) -> str:
        """What an install of it imports to check that it works, as a Python import statement."""
        modules = [m for f in self.frameworks for m in REGISTRY[f].imports]
        return "import " + ", ".join(["dltestbed.workload.loop", *modules])

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


def _pip(args: list[str], what: str, hint: str = "") -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args], capture_output=True, text=True
    )
    if proc.returncode != 0:
        last = [line for line in proc.stderr.splitlines() if line.strip() and "WARNING: Location" not in line]
        raise WheelhouseError(f"{what} failed: {last[-1] if last else f'pip exited {proc.returncode}'}{hint}")


# What dltestbed's wheel is built from: the project file, the readme it names, and the package.
WHEEL_SOURCES = ("pyproject.toml", "README.md", "dltestbed")


def build_wheel(root: Path, dest: Path) -> None:
    """dltestbed's wheel into `dest`, built from a clean copy of WHEEL_SOURCES: the wheel holds exactly the
    checkout's files (setuptools reuses the checkout's build/ folder, where a module since removed or made a
    package would linger), and nothing is written into the checkout."""
    with tempfile.TemporaryDirectory(prefix="dltestbed-wheel-") as scratch:
        src = Path(scratch) / "src"
        src.mkdir()
        for name in WHEEL_SOURCES:
            if (root / name).is_dir():
                shutil.copytree(root / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy2(root / name, src / name)
        _pip(["wheel", "--no-deps", "-q", "-w", str(dest), str(src)], "building the dltestbed wheel")


def constraints_text(reqs: list[str]) -> str:
    """pip's constraints: every distribution of the controller at its version (the hosts run what it measured
    with), but those the requirements pin themselves (a GPU host's torch is not the controller's +cpu build)."""
    named = {_canonical(re.split(r"[\[=<>!~ ]", r, maxsplit=1)[0]) for r in reqs}
    return "".join(
        f"{d.metadata['Name']}=={d.version}\n"
        for d in md.distributions()
        if d.metadata["Name"] and _canonical(d.metadata["Name"]) not in {"dltestbed", *named}
    )


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _manifest(path: Path) -> str:
    h = hashlib.sha256()
    for whl in sorted(path.glob("*.whl")):
        h.update(whl.name.encode() + b"\0" + hashlib.sha256(whl.read_bytes()).digest())
    return h.hexdigest()


def _name(flavor: str, frameworks: tuple[str, ...]) -> str:
    """A wheelhouse's name before its key: `cpu-py3.11`, or `cpu+pytorch-py3.11` with another framework."""
    return flavor + "".join(f"+{f}" for f in frameworks if f != DEFAULT_FRAMEWORK) + f"-py{_py()}"


def _path(flavor: str, frameworks: tuple[str, ...], root: Path, reqs: list[str]) -> Path:
    """Where the wheelhouse of these inputs lives (named by their hash)."""
    key = hashlib.sha256("\n".join([source_hash(root), *reqs, _py(), os.uname().machine]).encode()).hexdigest()[:16]
    return paths.wheelhouse_root() / f"{_name(flavor, frameworks)}-{key}"


def _py() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def cached(flavor: str = "cpu", frameworks: Sequence[str] = ()) -> Wheelhouse | None:
    """The wheelhouse of this build if it was built already; None otherwise (nothing is built)."""
    root, chosen = source_root(), carried(frameworks)
    return _finished(flavor, chosen, _path(flavor, chosen, root, requirements(flavor, root, chosen)))


def _finished(flavor: str, frameworks: tuple[str, ...], path: Path) -> Wheelhouse | None:
    """The wheelhouse at path when its build completed (manifest and archive both there)."""
    done = path / "manifest.txt"
    if done.exists() and _archive_path(path).exists():
        return Wheelhouse(path, flavor, done.read_text().strip(), frameworks)
    return None


def build(flavor: str = "cpu", frameworks: Sequence[str] = ()) -> Wheelhouse:
    """The wheelhouse for a flavour and the frameworks it carries, from the cache when its inputs are unchanged
    (built by one process at a time: a second one waits, then finds it)."""
    root, chosen = source_root(), carried(frameworks)
    reqs = requirements(flavor, root, chosen)
    path = _path(flavor, chosen, root, reqs)
    found = _finished(flavor, chosen, path)
    if found is not None:
        return found
    with locks.beside(path, "the wheelhouse"):
        return _finished(flavor, chosen, path) or _build(flavor, chosen, root, reqs, path)


def _build(flavor: str, frameworks: tuple[str, ...], root: Path, reqs: list[str], path: Path) -> Wheelhouse:
    tmp = path.with_name(path.name + ".partial")
    for stale in (path, tmp):  # an older layout, or a crash between the renames below: rebuild
        if stale.exists():
            shutil.rmtree(stale)
    tmp.mkdir(parents=True)
    constraints = tmp / "constraints.txt"
    constraints.write_text(constraints_text(reqs))
    build_wheel(root, tmp)
    cpu_torch = " (PyTorch's CPU build is on its own index: PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu)"
    _pip(
        ["download", "-q", "-d", str(tmp), "--only-binary=:all:", "-c", str(constraints), *reqs],
        f"downloading {', '.join(reqs)}",
        cpu_torch if any("+cpu" in r for r in reqs) else "",
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
    house = Wheelhouse(path, flavor, manifest, frameworks)
    partial_tar = house.archive.with_name(house.archive.name + ".partial")
    with tarfile.open(partial_tar, "w") as tar:
        for f in sorted(tmp.iterdir()):
            tar.add(f, arcname=f.name)
    partial_tar.rename(house.archive)
    tmp.rename(path)
    olds = [
        p
        for p in paths.wheelhouse_root().glob(f"{_name(flavor, frameworks)}-*")
        if p.is_dir() and not p.name.endswith(".partial")
    ]
    for removed in prune(olds, current=path):
        _archive_path(removed).unlink(missing_ok=True)
    return house
