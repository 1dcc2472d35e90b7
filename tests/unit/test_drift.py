"""Preflight drift (report/drift.py): each node's facts against a golden spec or the fleet's majority."""

from __future__ import annotations

from dltestbed.report.drift import drift
from dltestbed.report.verdicts import FAIL, UNDECIDED

H100_NODE = {  # the captured H100's facts (tests/data/gpu/h100/host-facts.txt and nvidia-smi -q)
    "driver": "580.159.04",
    "cuda": "13.0",
    "pcie_max": "Gen5 x16",
    "ecc_mode": "Enabled",
    "mig_mode": "Disabled",
    "power_limit_w": "700",
    "dltestbed": "0.9.0",
    "torch": "2.11.0+cu130",
}


def _fleet(n: int = 8) -> dict[str, dict[str, str]]:
    return {f"gpu-a{i}": dict(H100_NODE) for i in range(1, n + 1)}


def test_a_uniform_fleet_has_no_drift() -> None:
    assert drift(_fleet()) == []


def test_one_drifted_package_and_one_driver_are_named_against_the_majority() -> None:
    fleet = _fleet()
    fleet["gpu-a3"]["torch"] = "2.10.0+cu128"
    fleet["gpu-a6"]["driver"] = "570.86.15"
    found = drift(fleet)
    assert [(d.node, d.fact, d.verdict) for d in found] == [("gpu-a3", "torch", FAIL), ("gpu-a6", "driver", FAIL)]
    assert found[0].why == "PyTorch 2.10.0+cu128, where 7 of 8 nodes have 2.11.0+cu130"
    assert found[1].why == "NVIDIA driver 570.86.15, where 7 of 8 nodes have 580.159.04"


def test_a_golden_spec_wins_over_the_majority() -> None:
    """Half the fleet on an older driver than the golden node: those four drift, whatever the vote says."""
    fleet = _fleet()
    for node in ("gpu-a1", "gpu-a2", "gpu-a3", "gpu-a4", "gpu-a5"):
        fleet[node]["driver"] = "570.86.15"
    found = drift(fleet, golden={"driver": "580.159.04"})
    assert [d.node for d in found] == ["gpu-a1", "gpu-a2", "gpu-a3", "gpu-a4", "gpu-a5"]
    assert found[0].why == "NVIDIA driver 570.86.15, where the golden spec says 580.159.04"


def test_a_tie_cannot_be_judged_and_a_missing_fact_drifts() -> None:
    fleet = _fleet(4)
    fleet["gpu-a1"]["mig_mode"] = fleet["gpu-a2"]["mig_mode"] = "Enabled"
    del fleet["gpu-a4"]["ecc_mode"]
    found = drift(fleet)
    ties = [d for d in found if d.fact == "mig_mode"]
    assert {d.verdict for d in ties} == {UNDECIDED} and len(ties) == 4
    assert ties[0].why == "MIG mode: Enabled; the fleet has no majority (Enabled: 2, Disabled: 2)"
    (missing,) = [d for d in found if d.fact == "ecc_mode"]
    assert (missing.node, missing.verdict, missing.why) == ("gpu-a4", FAIL, "ECC mode not reported, where 3 of 3 "
                                                            "nodes have Enabled")  # fmt: skip
