"""XIDs to verdicts and actions, as NVIDIA's XID catalogue buckets them (report/xids.py)."""

from __future__ import annotations

import pytest

from dltestbed.report import xids
from dltestbed.report.verdicts import FAIL, PASS, WARN


@pytest.mark.parametrize(
    ("xid", "verdict", "action"),
    [
        (79, FAIL, "power-cycle it; when it comes back, reseat or service the GPU's PCIe link"),  # fallen off the bus
        (48, FAIL, "the row is remapped (or the page retired); return the board if"),  # double-bit ECC
        (74, FAIL, "reseat or service the link"),  # NVLink
        (95, FAIL, "reset the GPU (nvidia-smi -r)"),  # uncontained ECC
        (119, FAIL, "reset the GPU"),  # GSP RPC timeout
        (54, FAIL, "check its cooling and power delivery"),
        (13, WARN, "the second pass reruns it"),  # graphics engine exception: the application's
        (31, WARN, "rerun the application"),  # MMU fault
        (63, PASS, "informational"),  # a row marked for remapping
        (92, PASS, "informational"),  # many single-bit errors, corrected
    ],
)
def test_known_xids_get_the_catalogues_action(xid: int, verdict: str, action: str) -> None:
    call = xids.call(xid)
    assert call.verdict == verdict and action in call.action
    assert call.reason.startswith(f"XID {xid} (") and xids.TABLE[xid].bucket in call.reason


def test_an_xid_the_table_lacks_fails_and_says_so() -> None:
    call = xids.call(9999)
    assert (call.verdict, call.reason) == (FAIL, "XID 9999, which dltestbed's table does not hold")
    assert "NVIDIA's XID catalogue" in call.action


def test_every_xid_has_a_bucket_and_every_bucket_a_verdict_and_an_action() -> None:
    assert {x.bucket for x in xids.TABLE.values()} <= set(xids.BUCKETS)
    assert all(b.verdict in (PASS, WARN, FAIL) and b.action for b in xids.BUCKETS.values())
    assert all(n == x.number and x.mnemonic.isupper() for n, x in xids.TABLE.items())
    assert [n for n in range(144, 151) if xids.TABLE[n].bucket != "WORKFLOW_NVLINK5_ERR"] == []
