"""Wheelhouse inputs: what is pinned, and what makes it rebuild."""

from __future__ import annotations

import importlib.metadata as md
import shutil
from pathlib import Path

import pytest

from dltestbed.errors import ConfigError
from dltestbed.provision import wheelhouse


def test_requirements_follow_the_controller() -> None:
    root = wheelhouse.source_root()
    cpu = wheelhouse.requirements("cpu", root)
    assert cpu[0] == f"tensorflow-cpu=={md.version('tensorflow-cpu')}"
    assert f"pydantic=={md.version('pydantic')}" in cpu and f"psutil=={md.version('psutil')}" in cpu
    gpu = wheelhouse.requirements("gpu", root)
    assert gpu[0].startswith("tensorflow[and-cuda]==") and any(r.startswith("nvidia-ml-py") for r in gpu)
    with pytest.raises(ConfigError, match="unknown flavour 'rocm'"):
        wheelhouse.requirements("rocm", root)


@pytest.mark.torch
def test_another_framework_rides_beside_the_default() -> None:
    """--framework pytorch: the wheelhouse carries TensorFlow (the probes' framework) and PyTorch's CPU build at
    the controller's version, is named and keyed apart, and its install check imports both."""
    root = wheelhouse.source_root()
    assert (
        wheelhouse.carried(("pytorch",)) == wheelhouse.carried(("pytorch", "tensorflow")) == ("tensorflow", "pytorch")
    )
    assert wheelhouse.carried() == ("tensorflow",)
    both = wheelhouse.requirements("cpu", root, ("pytorch",))
    assert both[:2] == [f"tensorflow-cpu=={md.version('tensorflow-cpu')}", f"torch=={md.version('torch')}"]
    assert both[2:] == [*wheelhouse.requirements("cpu", root)[1:], f"pillow=={md.version('pillow')}"]  # real data
    assert wheelhouse._name("cpu", ("tensorflow", "pytorch")) != wheelhouse._name("cpu", ("tensorflow",))
    house = wheelhouse.Wheelhouse(root, "cpu", "m", ("tensorflow", "pytorch"))
    assert house.imports == "import dltestbed.workload.loop, tensorflow, keras, torch, PIL"
    with pytest.raises(ConfigError, match=r"^--framework: unknown framework 'jax'; known: tensorflow or pytorch$"):
        wheelhouse.carried(("jax",))
    # what may serve a bench (a VM's guest image): its own set first, then the sets that carry more
    assert wheelhouse.holding() == [("tensorflow",), ("tensorflow", "pytorch")]
    assert wheelhouse.holding(("pytorch",)) == [("tensorflow", "pytorch")]


def test_the_source_hash_changes_with_the_source(tmp_path: Path) -> None:
    root = wheelhouse.source_root()
    copy = tmp_path / "src"
    shutil.copytree(root / "dltestbed", copy / "dltestbed", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(root / "pyproject.toml", copy / "pyproject.toml")
    before = wheelhouse.source_hash(copy)
    assert before == wheelhouse.source_hash(copy)
    (copy / "dltestbed" / "workload" / "loop.py").write_text("# changed\n", encoding="utf-8")
    assert wheelhouse.source_hash(copy) != before
    (copy / "dltestbed" / "__pycache__").mkdir(exist_ok=True)
    after = wheelhouse.source_hash(copy)
    (copy / "dltestbed" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert wheelhouse.source_hash(copy) == after  # bytecode is not source


def test_prune_keeps_the_newest_and_the_current(tmp_path: Path) -> None:
    import os

    from dltestbed.provision.cache import prune

    entries = []
    for i in range(5):
        p = tmp_path / f"e{i}"
        (p.mkdir() if i % 2 else p.write_text("x"))
        os.utime(p, (1000 + i, 1000 + i))
        entries.append(p)
    removed = prune(entries, keep=2, current=entries[0])  # the oldest is the current one: it stays
    assert sorted(p.name for p in removed) == ["e1", "e2", "e3"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e0", "e4"]


@pytest.mark.torch
def test_the_pinned_requirements_are_not_constrained_again() -> None:
    """A GPU host's torch (PyPI's CUDA build) is pinned by the requirements: the controller's +cpu build must not
    be a constraint beside it (pip would find no release that is both); every other distribution is."""
    gpu = wheelhouse.requirements("gpu", wheelhouse.source_root(), ("pytorch",))
    text = wheelhouse.constraints_text(gpu)
    pinned = {line.split("==")[0].lower().replace("_", "-") for line in text.splitlines()}
    assert "torch" not in pinned and "tensorflow-cpu" in pinned and "numpy" in pinned
    assert "tensorflow" not in pinned  # tensorflow[and-cuda]: named by the requirements
    assert "torch" in {line.split("==")[0].lower() for line in wheelhouse.constraints_text(["numpy"]).splitlines()}


def test_the_wheel_holds_the_checkouts_files_alone(tmp_path: Path) -> None:
    """A checkout whose build/ folder holds a module since removed (setuptools would copy it into the wheel) and a
    compiled file: dltestbed's wheel holds the package as it is, and the checkout gets nothing written."""
    import zipfile

    root = tmp_path / "checkout"
    root.mkdir()
    for name in wheelhouse.WHEEL_SOURCES:
        src = wheelhouse.source_root() / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, root / name)
    stale = root / "build" / "lib" / "dltestbed" / "workload" / "frameworks" / "pytorch.py"
    stale.parent.mkdir(parents=True)
    stale.write_text("raise ImportError('a module that became a package')\n")
    (root / "dltestbed" / "__pycache__").mkdir(exist_ok=True)
    (root / "dltestbed" / "__pycache__" / "stale.cpython-311.pyc").write_bytes(b"\0")
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    wheelhouse.build_wheel(root, tmp_path / "out")
    (wheel,) = (tmp_path / "out").glob("dltestbed-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "dltestbed/workload/frameworks/pytorch/__init__.py" in names and "dltestbed/boards/h200-sxm.toml" in names
    assert "dltestbed/workload/frameworks/pytorch.py" not in names and not any(".pyc" in n for n in names)
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before  # no build/, no egg-info written
