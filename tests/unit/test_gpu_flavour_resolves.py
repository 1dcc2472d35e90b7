"""The GPU flavour's requirements resolve on the package registry: a pip dry run (metadata only, no
multi-GB download) of exactly what the wheelhouse would fetch for a GPU host."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dltestbed.provision import wheelhouse
from dltestbed.workload.frameworks import REGISTRY

pytestmark = pytest.mark.registry


def test_the_gpu_flavour_resolves_with_its_cuda_libraries(tmp_path: Path) -> None:
    reqs = wheelhouse.requirements("gpu", wheelhouse.source_root())
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--quiet",
            "--disable-pip-version-check",
            "--report",
            str(report),
            *reqs,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    installs = json.loads(report.read_text())["install"]
    resolved = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in installs}
    assert resolved["tensorflow"] == wheelhouse.framework_version(
        REGISTRY["tensorflow"], wheelhouse.source_root()
    )  # the controller's version
    assert "tensorflow-cpu" not in resolved
    for lib in (
        "nvidia-cudnn-cu12",
        "nvidia-cublas-cu12",
        "nvidia-cuda-runtime-cu12",
        "nvidia-nccl-cu12",
        "nvidia-ml-py",
    ):
        assert lib in resolved, sorted(resolved)


@pytest.mark.torch
def test_the_gpu_flavour_with_pytorch_resolves_beside_a_cpu_controller(tmp_path: Path) -> None:
    """`provision --framework pytorch` for GPU hosts from this CPU controller: the controller's PyTorch release
    resolves under the controller's constraints (its +cpu torch left out of them: with it, a GPU host would get
    the CPU build, or nothing where only PyPI is reachable).
    `torch==2.13.0` is PyPI's CUDA build on a registry; this machine's pip also finds the +cpu wheel on disk,
    which the same specifier matches (PEP 440 ignores the local label), so only the release is asserted."""
    reqs = wheelhouse.requirements("gpu", wheelhouse.source_root(), ("pytorch",))
    constraints = tmp_path / "constraints.txt"
    constraints.write_text(wheelhouse.constraints_text(reqs))
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
         "--disable-pip-version-check", "--report", str(report), "-c", str(constraints), *reqs],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    installs = json.loads(report.read_text())["install"]
    resolved = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in installs}
    release = wheelhouse.framework_version(REGISTRY["pytorch"], wheelhouse.source_root()).split("+")[0]
    assert resolved["torch"].split("+")[0] == release and resolved["tensorflow"]
