"""The H100's captured figures (tests/data/gpu/h100), read as it printed them: the known answers of the expected
values and the healthy case of the GPU verdicts."""

from __future__ import annotations

import re
from pathlib import Path

H100 = Path(__file__).parent / "data" / "gpu" / "h100"
H100_NAME = "NVIDIA H100 80GB HBM3"


def captured() -> dict[str, float]:
    """The H100's figures as it printed them (ceilings measured outside TensorFlow, nvidia-smi -q, ResNet-50)."""
    text = (H100 / "ceilings-measured-outside-tensorflow.txt").read_text()
    out = {}
    for math, label in (
        ("float32", "float32"),
        ("tf32", "float32 tf32"),
        ("bfloat16", "bfloat16"),
        ("float16", "float16"),
    ):
        out[f"gemm_{math}"] = float(re.search(rf"^gemm {label} n=8192: ([\d.]+) TFLOP/s", text, re.M)[1])  # type: ignore[index]
    out["h2d"] = float(re.search(r"^h2d pinned 256MiB: ([\d.]+) GB/s", text, re.M)[1])  # type: ignore[index]
    out["d2h"] = float(re.search(r"^d2h pinned 256MiB: ([\d.]+) GB/s", text, re.M)[1])  # type: ignore[index]
    out["d2d"] = float(re.search(r"^d2d 1GiB: ([\d.]+) TB/s", text, re.M)[1])  # type: ignore[index]
    smi = (H100 / "nvidia-smi-q.txt").read_text()
    out["pcie_gen"] = float(re.search(r"PCIe Generation\s+Max\s+: (\d+)", smi)[1])  # type: ignore[index]
    out["pcie_width"] = float(re.search(r"Link Width\s+Max\s+: (\d+)x", smi)[1])  # type: ignore[index]
    out["power"] = float(re.search(r"Default Power Limit\s+: ([\d.]+) W", smi)[1])  # type: ignore[index]
    out["memory_mib"] = float(re.search(r"FB Memory Usage\s+Total\s+: (\d+) MiB", smi)[1])  # type: ignore[index]
    r50 = (H100 / "resnet50-math-modes.txt").read_text()
    out["resnet50"] = float(re.search(r"mixed_bfloat16.*, XLA:\s+(\d+) img/s", r50)[1])  # type: ignore[index]
    out["pcie_gen_now"] = float(re.search(r"PCIe Generation\s+Max\s+: \d+\s+Current\s+: (\d+)", smi)[1])  # type: ignore[index]
    out["pcie_width_now"] = float(re.search(r"Link Width\s+Max\s+: \d+x\s+Current\s+: (\d+)x", smi)[1])  # type: ignore[index]
    out["power_now"] = float(re.search(r"Current Power Limit\s+: ([\d.]+) W", smi)[1])  # type: ignore[index]
    volatile = smi.split("ECC Errors", 1)[1].split("Aggregate", 1)[0]
    out["ecc_uncorrected"] = float(sum(int(n) for n in re.findall(r"Uncorrectable[\w -]*: (\d+)", volatile)))
    return out
