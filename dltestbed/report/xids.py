"""What an XID calls for, as NVIDIA's XID catalogue says (docs.nvidia.com/deploy/xid-errors, "Analyzing Xid Errors
with the Xid Catalog": each XID's resolution bucket, its immediate action), for the XIDs a data-center GPU
(A100, H100, H200, B200) reports, and the verdict and action acceptance gives for each bucket. Pure data and
one lookup."""

from __future__ import annotations

from dataclasses import dataclass

from dltestbed.report.verdicts import FAIL, PASS, WARN


@dataclass(frozen=True)
class Bucket:
    """One of the catalogue's resolution buckets (immediate action): the verdict it gives and what to do."""

    name: str
    verdict: str
    action: str


BUCKETS: dict[str, Bucket] = {
    b.name: b
    for b in (
        Bucket("IGNORE", PASS, "nothing: the catalogue calls it informational"),
        Bucket(
            "RESTART_APP",
            WARN,
            "rerun the application: the catalogue puts it on the application (a bad address, an illegal "
            "instruction); the second pass reruns it, and the same XID again fails the GPU",
        ),
        Bucket("RESET_GPU", FAIL, "drain the node and reset the GPU (nvidia-smi -r), then accept it again"),
        Bucket(
            "RESTART_BM",
            FAIL,
            "drain the node and power-cycle it; when it comes back, reseat or service the GPU's PCIe link, and "
            "return the board if it happens again",
        ),
        Bucket(
            "WORKFLOW_XID_48",
            FAIL,
            "drain the node and reset the GPU, so the row is remapped (or the page retired); return the board if "
            "remapping fails or errors recur",
        ),
        Bucket(
            "WORKFLOW_NVLINK_ERR",
            FAIL,
            "drain the node and reset the GPU; if the NVLink errors recur, reseat or service the link (the "
            "baseboard or NVSwitch tray)",
        ),
        Bucket(
            "WORKFLOW_NVLINK5_ERR",
            FAIL,
            "drain the node and reset the GPU; if the NVLink 5 errors recur, service the link (the NVLink switch "
            "tray or cable cartridge)",
        ),
        Bucket("WORKFLOW_XID_45", WARN, "look at the XID before it: the driver removed the GPU's work because of it"),
        Bucket("CHECK_MECHANICALS", FAIL, "drain the node and check its cooling and power delivery"),
        Bucket("UPDATE_SWFW", FAIL, "drain the node and update the driver and the GPU's firmware"),
        Bucket("CONTACT_SUPPORT", FAIL, "drain the node and open a case with NVIDIA: the catalogue expects none"),
    )
}


@dataclass(frozen=True)
class Xid:
    """One XID: its mnemonic and its bucket."""

    number: int
    mnemonic: str
    bucket: str


# The catalogue's immediate action for each XID a data-center GPU reports (a selection: the rest are display,
# video and engine errors of other GPUs, or unused).
TABLE: dict[int, Xid] = {
    x.number: x
    for x in (
        Xid(8, "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "RESTART_APP"),
        Xid(13, "ROBUST_CHANNEL_GR_EXCEPTION", "RESTART_APP"),
        Xid(31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "RESTART_APP"),
        Xid(32, "ROBUST_CHANNEL_PBDMA_ERROR", "RESTART_APP"),
        Xid(38, "ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "IGNORE"),
        Xid(43, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "IGNORE"),
        Xid(45, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "WORKFLOW_XID_45"),
        Xid(46, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "RESET_GPU"),
        Xid(48, "ROBUST_CHANNEL_GPU_ECC_DBE", "WORKFLOW_XID_48"),
        Xid(54, "SILENT_RUNNING_PWR_REDUCED_CLOCKING", "CHECK_MECHANICALS"),
        Xid(61, "PMU_BREAKPOINT", "CONTACT_SUPPORT"),
        Xid(62, "PMU_HALT_ERROR", "RESET_GPU"),
        Xid(63, "INFOROM_DRAM_RETIREMENT_EVENT", "IGNORE"),
        Xid(64, "INFOROM_DRAM_RETIREMENT_FAILURE", "RESET_GPU"),
        Xid(69, "ROBUST_CHANNEL_GR_CLASS_ERROR", "RESTART_APP"),
        Xid(74, "NVLINK_ERROR", "WORKFLOW_NVLINK_ERR"),
        Xid(78, "VGPU_START_ERROR", "UPDATE_SWFW"),
        Xid(79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "RESTART_BM"),
        Xid(92, "EXCESSIVE_SBE_INTERRUPTS", "IGNORE"),
        Xid(94, "ROBUST_CHANNEL_CONTAINED_ERROR", "RESTART_APP"),
        Xid(95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "RESET_GPU"),
        Xid(109, "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "RESET_GPU"),
        Xid(110, "SEC_FAULT_ERROR", "RESET_GPU"),
        Xid(119, "GSP_RPC_TIMEOUT", "RESET_GPU"),
        Xid(120, "GSP_ERROR", "RESET_GPU"),
        Xid(121, "C2C_ERROR", "IGNORE"),
        Xid(136, "ALI_TRAINING_FAIL", "RESET_GPU"),
        Xid(140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "RESET_GPU"),
        Xid(143, "GPU_INIT_ERROR", "RESET_GPU"),
        *(
            Xid(n, f"NVLINK_{part}_ERROR", "WORKFLOW_NVLINK5_ERR")
            for n, part in zip(
                range(144, 151), ("SAW", "RLW", "TLW", "TREX", "NVLPW_CTRL", "NETIR", "MSE"), strict=True
            )
        ),
        Xid(155, "NVLINK_SW_DEFINED_ERROR", "RESET_GPU"),
        Xid(156, "RESOURCE_RETIREMENT_EVENT", "RESET_GPU"),
        Xid(158, "GPU_FATAL_TIMEOUT", "RESET_GPU"),
    )
}


@dataclass(frozen=True)
class Call:
    """What one XID seen on a GPU calls for."""

    xid: int
    verdict: str
    reason: str
    action: str


def call(xid: int) -> Call:
    """An XID's verdict, in words, with its action; one not in the table fails the GPU (look it up)."""
    entry = TABLE.get(xid)
    if entry is None:
        return Call(
            xid,
            FAIL,
            f"XID {xid}, which dltestbed's table does not hold",
            "drain the node and look the XID up in NVIDIA's XID catalogue",
        )
    bucket = BUCKETS[entry.bucket]
    return Call(xid, bucket.verdict, f"XID {xid} ({entry.mnemonic}; the catalogue: {entry.bucket})", bucket.action)
