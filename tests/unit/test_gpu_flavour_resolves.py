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
