"""This machine's GPU facts, read as the facts role reads a host's (NVIDIA devices on the PCI bus, then
nvidia-smi), so that the TensorFlow flavour it gets is chosen by the same rule (`facts.choose_flavor`)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from dltestbed.errors import ConfigError
from dltestbed.provision.facts import choose_flavor

PCI = Path("/sys/bus/pci/devices")
NVIDIA_VENDOR = "0x10de"
NVIDIA_SMI = ["nvidia-smi", "--query-gpu=index,name,driver_version,memory.total,pci.bus_id", "--format=csv,noheader"]


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def pci_gpus(root: Path | None = None) -> list[str]:
    """PCI addresses of NVIDIA display controllers (vendor 0x10de, class 0x03xxxx) under root (PCI)."""
    root = root or PCI
    if not root.is_dir():
        return []
    return sorted(
        d.name for d in root.iterdir() if _read(d / "vendor") == NVIDIA_VENDOR and _read(d / "class").startswith("0x03")
    )


def gpu_facts(root: Path | None = None) -> dict[str, Any]:
    """pci_gpus, nvidia_smi_rc, nvidia_smi (lines) and nvidia_smi_error, as the facts role reports them."""
    try:
        proc = subprocess.run(NVIDIA_SMI, capture_output=True, text=True, timeout=60)
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    except FileNotFoundError:
        rc, out, err = 127, "", "nvidia-smi: not found"
    except subprocess.TimeoutExpired:
        rc, out, err = 124, "", "nvidia-smi did not answer in 60 s"
    return {"pci_gpus": pci_gpus(root), "nvidia_smi_rc": rc, "nvidia_smi": out.splitlines(), "nvidia_smi_error": err}


def flavor(root: Path | None = None) -> str:
    """`gpu` when this machine's NVIDIA driver answers with GPUs, else `cpu`; a ConfigError line when it
    has NVIDIA GPUs and no working driver (a CPU build there would hide the GPUs from every layer)."""
    chosen, problem = choose_flavor(gpu_facts(root))
    if chosen is None:
        raise ConfigError(f"this machine: {problem} (or say --flavor cpu)")
    return chosen
