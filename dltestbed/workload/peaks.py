"""Dense peak TFLOP/s of NVIDIA GPUs per math, from NVIDIA's datasheets. Pure data and one lookup.

Datasheets print tensor-core figures "with sparsity" (2:4 structured): the dense peak is half, and that
is what a GEMM of random matrices can reach. float32 is the non-tensor-core rate; tf32, bfloat16 and
float16 are tensor-core rates. The same chip differs by form factor (power and clocks): SXM and PCIe
(and NVL) boards are separate rows, matched by the name NVML gives."""

from __future__ import annotations

from dataclasses import dataclass

MATHS = ("float32", "tf32", "bfloat16", "float16")  # float32: TF32 off; tf32: float32 data on tensor cores


@dataclass(frozen=True)
class Peak:
    """One board: the substrings its NVML name has (all of them), dense TFLOP/s per math (None: no such math
    in hardware), and the datasheet it comes from."""

    match: tuple[str, ...]
    board: str
    float32: float
    tf32: float | None
    bfloat16: float | None
    float16: float
    source: str

    def of(self, math: str) -> float | None:
        """The dense TFLOP/s of one math."""
        return getattr(self, math)


# Most specific first: the first row whose substrings are all in the GPU's name wins.
TABLE: tuple[Peak, ...] = (
    Peak(("GH200",), "GH200 (Grace Hopper)", 67.0, 494.0, 989.0, 989.0, "NVIDIA GH200 datasheet (halved: sparse)"),
    Peak(("H200", "NVL"), "H200 NVL", 60.0, 417.5, 835.5, 835.5, "NVIDIA H200 NVL datasheet (halved: sparse)"),
    Peak(("H200",), "H200 SXM", 67.0, 494.5, 989.5, 989.5, "NVIDIA H200 datasheet, SXM (halved: sparse)"),
    Peak(("H100", "NVL"), "H100 NVL", 60.0, 417.5, 835.5, 835.5, "NVIDIA H100 NVL datasheet (halved: sparse)"),
    Peak(("H100", "PCIe"), "H100 PCIe", 51.0, 378.0, 756.0, 756.0, "NVIDIA H100 datasheet, PCIe (halved: sparse)"),
    Peak(("H100",), "H100 SXM", 67.0, 494.5, 989.5, 989.5, "NVIDIA H100 datasheet, SXM (halved: sparse)"),
    Peak(("B200",), "B200 (HGX)", 75.0, 1100.0, 2250.0, 2250.0, "NVIDIA HGX B200 datasheet, per GPU (halved: sparse)"),
    Peak(("A100", "PCIE"), "A100 PCIe", 19.5, 156.0, 312.0, 312.0, "NVIDIA A100 datasheet, PCIe"),
    Peak(("A100", "PCIe"), "A100 PCIe", 19.5, 156.0, 312.0, 312.0, "NVIDIA A100 datasheet, PCIe"),
    Peak(("A100",), "A100 SXM", 19.5, 156.0, 312.0, 312.0, "NVIDIA A100 datasheet, SXM"),
    Peak(("L40S",), "L40S", 91.6, 183.0, 362.05, 362.05, "NVIDIA L40S datasheet (halved: sparse)"),
    Peak(("A10",), "A10", 31.2, 62.5, 125.0, 125.0, "NVIDIA A10 datasheet"),
    Peak(("L4",), "L4", 30.3, 60.0, 121.0, 121.0, "NVIDIA L4 datasheet (halved: sparse)"),
    Peak(("V100", "PCIE"), "V100 PCIe", 14.0, None, None, 112.0, "NVIDIA V100 datasheet, PCIe"),
    Peak(("V100",), "V100 SXM2", 15.7, None, None, 125.0, "NVIDIA V100 datasheet, SXM2"),
    Peak(("T4",), "T4", 8.1, None, None, 65.0, "NVIDIA T4 datasheet"),
)


def board(name: str) -> Peak | None:
    """The table's row for a GPU's NVML name ("NVIDIA H100 80GB HBM3" is the SXM board), or None."""
    return next((p for p in TABLE if all(m in name for m in p.match)), None)


def gpu_peak(name: str, math: str) -> tuple[float | None, str]:
    """A GPU's dense peak FLOP/s for a math (float32 with TF32 off, tf32, bfloat16, float16) and where it comes
    from; None with the reason where the table has no such board or the board no such math."""
    row = board(name)
    if row is None:
        return None, f"{name!r} not in dltestbed's table of GPU peaks"
    value = row.of(math)
    if value is None:
        return None, f"{row.board} has no {math} tensor cores"
    return value * 1e12, f"{row.source}: dense {math} {value:g} TFLOP/s ({row.board})"
