"""This machine's TensorFlow flavour, from the same facts provisioning reads on a host: NVIDIA devices on
the PCI bus (a fake /sys tree) and nvidia-smi (a fake that answers only the query dltestbed makes, with
output captured from a real H100 host, and fails closed on anything else)."""

from __future__ import annotations

import os
import shlex
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path

import pytest

from dltestbed.errors import ConfigError
from dltestbed.orchestrate import prepare
from dltestbed.provision import localfacts, wheelhouse

H100 = ["0, NVIDIA H100 80GB HBM3, 550.54.15, 81559 MiB, 00000000:1B:00.0"]
NO_DRIVER = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."


def _pci(root: Path, devices: dict[str, tuple[str, str]]) -> Path:
    for addr, (vendor, cls) in devices.items():
        (root / addr).mkdir(parents=True)
        (root / addr / "vendor").write_text(vendor + "\n")
        (root / addr / "class").write_text(cls + "\n")
    return root


def _smi(bin_dir: Path, lines: list[str], rc: int = 0, err: str = "") -> None:
    """A fake nvidia-smi on PATH: the query dltestbed makes gets `lines` and `rc`; anything else exits 99."""
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "nvidia-smi"
    query = " ".join(localfacts.NVIDIA_SMI[1:])
    body = "\n".join(f"echo {shlex.quote(line)}" for line in lines)
    script.write_text(
        f'#!/bin/sh\nif [ "$*" != "{query}" ]; then echo "fake nvidia-smi: unknown: $*" >&2; exit 99\n'
        f"fi\n{body}\necho {shlex.quote(err)} >&2\nexit {rc}\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


GPU_BUS = {"0000:1b:00.0": ("0x10de", "0x030200"), "0000:00:1f.0": ("0x8086", "0x060100")}
NO_GPU_BUS = {"0000:00:02.0": ("0x1af4", "0x020000"), "0000:00:1f.6": ("0x10de", "0x040300")}  # NVIDIA audio


def test_a_machine_with_gpus_and_their_driver_gets_the_gpu_flavour(tmp_path: Path, monkeypatch) -> None:
    _smi(tmp_path / "bin", H100)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    facts = localfacts.gpu_facts(_pci(tmp_path / "pci", GPU_BUS))
    assert facts["pci_gpus"] == ["0000:1b:00.0"] and facts["nvidia_smi"] == H100 and facts["nvidia_smi_rc"] == 0
    assert localfacts.flavor(tmp_path / "pci") == "gpu"


def test_a_machine_without_gpus_gets_the_cpu_flavour(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi at all
    root = _pci(tmp_path / "pci", NO_GPU_BUS)
    assert localfacts.pci_gpus(root) == []  # an NVIDIA audio function is not a GPU
    assert localfacts.gpu_facts(root)["nvidia_smi_rc"] == 127
    assert localfacts.flavor(root) == "cpu"
    assert localfacts.flavor(tmp_path / "no-pci-here") == "cpu"


def test_gpus_without_a_working_driver_are_one_line(tmp_path: Path, monkeypatch) -> None:
    _smi(tmp_path / "bin", [], rc=9, err=NO_DRIVER)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    root = _pci(tmp_path / "pci", GPU_BUS)
    with pytest.raises(
        ConfigError,
        match=r"^this machine: 1 NVIDIA GPU\(s\) on the PCI bus but nvidia-smi fails: "
        "NVIDIA-SMI has failed because it couldn't communicate",
    ):
        localfacts.flavor(root)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    with pytest.raises(ConfigError, match="no nvidia-smi: is the NVIDIA driver installed"):
        localfacts.flavor(root)


def test_the_bench_looks_up_the_image_of_this_machines_flavour(tmp_path: Path, monkeypatch) -> None:
    assert shutil.which("podman"), "podman missing (scripts/install.sh --test installs it)"
    _smi(tmp_path / "bin", H100)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setattr(localfacts, "PCI", tmp_path / "no-pci")  # nvidia-smi answering with GPUs is enough
    asked: list[str] = []
    real = wheelhouse.cached

    def cached(flavor: str = "cpu", frameworks: Sequence[str] = ()) -> wheelhouse.Wheelhouse | None:
        asked.append(flavor)
        return real(flavor, frameworks)

    monkeypatch.setattr(wheelhouse, "cached", cached)
    auto = prepare.auto_kinds("single", [None], "podman")
    assert asked == ["gpu"]  # never this build's CPU image on a GPU machine
    assert auto.kinds == ("bm",) and auto.aa and "no image of this dltestbed build" in auto.why
