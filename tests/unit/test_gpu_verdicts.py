"""A verdict per GPU (report/gpu_verdicts.py) on the H100's captured figures, healthy, and on the unhealthy cases
built from them: a link trained down to Gen3 x8, an uncorrectable ECC error, XID 79, power capped 30 % below its
default, one GPU 15 % slow among eight; a board with no file, judged against its peers alone; evidence that was
not read, which cannot be judged. The H100 SXM's measured values are a site's here (its captured figures as the
board holds them: the shipped file has datasheet values only); every check made is among the reasons, passes
too."""

from __future__ import annotations

import dataclasses

import pytest

from dltestbed import expected
from dltestbed.report.gpu_evidence import MEASURES, GpuEvidence, GpuVerdict, Reason
from dltestbed.report.gpu_verdicts import exit_code, judge
from dltestbed.report.verdicts import FAIL, PASS, UNDECIDED, WARN
from dltestbed.workload.peaks import gpu_peak
from dltestbed.workload.probes import pcie_rate
from tests.h100data import H100_NAME, captured


def _h100(node: str = "gpu-a1", index: int = 0, scale: float = 1.0, **facts: float) -> GpuEvidence:
    """The captured H100 as acceptance would see it (its measures × scale)."""
    c = captured()
    seen = {
        "pcie_gen": c["pcie_gen_now"],
        "pcie_width": c["pcie_width_now"],
        "power_limit_w": c["power_now"],
        "power_default_w": c["power"],
        "memory_total_bytes": c["memory_mib"] * 2**20,
        "ecc_uncorrected": c["ecc_uncorrected"],
    }
    measures = {f"gemm_{m}": c[f"gemm_{m}"] * 1e12 for m in ("float32", "tf32", "bfloat16", "float16")}
    measures |= {"h2d_pinned": c["h2d"] * 1e9, "d2h_pinned": c["d2h"] * 1e9, "memory_copy": c["d2d"] * 1e12}
    measures["resnet50_gpu_preset_ips"] = c["resnet50"]
    made = {k: ("tensorflow", 1) for k in measures}  # as the test board's values were measured (_boards)
    scaled = {k: v * scale for k, v in measures.items()}
    return GpuEvidence(node, index, H100_NAME, seen | facts, (), scaled, made, health_read=True)


def _boards() -> tuple[expected.Board, ...]:
    """The shipped boards, the H100 SXM's given the captured figures as its measured values (a site's file would)."""
    c = captured()
    made = expected.Measured("tests/data/gpu/h100/ceilings-measured-outside-tensorflow.txt", "tensorflow", 1)
    link, _ = pcie_rate(int(c["pcie_gen"]), int(c["pcie_width"]))
    assert link is not None
    fractions = {f"gemm_{m}": c[f"gemm_{m}"] * 1e12 / (gpu_peak(H100_NAME, m)[0] or 1) for m in ("float32", "tf32",
                 "bfloat16", "float16")}  # fmt: skip
    fractions |= {"h2d_pinned_fraction": c["h2d"] * 1e9 / link, "d2h_pinned_fraction": c["d2h"] * 1e9 / link}
    fractions |= {"memory_copy_fraction": c["d2d"] / 3.35, "resnet50_gpu_preset_ips": c["resnet50"]}
    src = "measured: the captured H100 (tests/data/gpu/h100), as a site's values"
    out = []
    for b in expected.shipped():
        if b.key == "h100-sxm":
            values = {k: expected.Value(k, v, src, made) for k, v in fractions.items()}
            b = dataclasses.replace(b, values={**b.values, **values})
        out.append(b)
    return tuple(out)


BOARDS = _boards()


def _one(ev: GpuEvidence) -> GpuVerdict:
    (verdict,) = judge([ev], BOARDS)
    return verdict


def _not_passed(v: GpuVerdict) -> tuple[Reason, ...]:
    return tuple(r for r in v.reasons if r.verdict != PASS)


def test_the_captured_h100_passes_every_check_against_its_board() -> None:
    v = _one(_h100())
    assert (v.verdict, v.board) == (PASS, "h100-sxm") and _not_passed(v) == ()
    checks = [r.check for r in v.reasons]  # every check made is listed: the facts and each measure
    assert checks == ["xid", "ecc", "pcie", "power", "memory", *[m for m in MEASURES if m != "kernel_launches_per_s"]]
    unrecorded = _one(dataclasses.replace(_h100(), measured_by={}))  # who measured it unknown: never judged
    assert {r.check for r in unrecorded.reasons if r.verdict == UNDECIDED} == set(checks[5:])
    assert exit_code([v]) == 0


def test_a_link_trained_down_to_gen3_x8_fails_with_reseat() -> None:
    v = _one(_h100(pcie_gen=3, pcie_width=8))
    (reason,) = _not_passed(v)
    assert (v.verdict, reason.check) == (FAIL, "pcie")
    assert reason.why == "PCIe link at Gen3 x8 under load; the board's is Gen5 x16" and "reseat" in reason.action


def test_an_uncorrectable_ecc_error_fails() -> None:
    (reason,) = _not_passed(_one(_h100(ecc_uncorrected=1)))
    assert (reason.verdict, reason.why) == (
        FAIL,
        "1 uncorrectable ECC error(s)",
    ) and "return the board" in reason.action


def test_xid_79_fails_with_the_catalogues_action_and_an_applications_xid_warns() -> None:
    v = _one(dataclasses.replace(_h100(), xids=(79,)))
    (reason,) = _not_passed(v)
    assert v.verdict == FAIL and reason.why.startswith("XID 79 (ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS")
    assert "power-cycle" in reason.action
    warned = _one(dataclasses.replace(_h100(), xids=(13,)))
    assert warned.verdict == WARN and exit_code([warned]) == 0


def test_power_capped_30_percent_below_its_default_fails() -> None:
    (reason,) = _not_passed(_one(_h100(power_limit_w=490)))
    assert (reason.verdict, reason.why) == (FAIL, "power limit 490 W, 30 % below the expected 700 W")
    assert "nvidia-smi -pl 700" in reason.action


def test_one_gpu_15_percent_slow_among_eight_fails_against_its_peers_alone() -> None:
    """Noise of ±1 % among the eight; the slow one is still above the board's floor (0.85 > 0.75), so only the
    peer comparison catches it, in every measure."""
    wobble = [1.0, 1.01, 0.99, 1.005, 0.995, 1.0, 1.008]
    gpus = [_h100("gpu-a1", i, w) for i, w in enumerate(wobble)] + [_h100("gpu-a1", 7, 0.85)]
    verdicts = judge(gpus, BOARDS)
    assert [v.verdict for v in verdicts] == [PASS] * 7 + [FAIL]
    slow = _not_passed(verdicts[-1])
    assert {r.check for r in slow} == {
        f"{m} peers" for m in ("gemm_float32", "gemm_tf32", "gemm_bfloat16", "gemm_float16", "h2d_pinned",
                               "d2h_pinned", "memory_copy", "resnet50_gpu_preset_ips")
    }  # fmt: skip
    assert all(r.verdict == FAIL and "% below its 7 peers' median (modified z " in r.why for r in slow)
    assert "15 % below its 7 peers' median" in slow[0].why and "second pass" in slow[0].action
    assert exit_code(verdicts) == 1


def test_a_gpu_far_below_its_boards_figures_fails_even_alone() -> None:
    (reason, *_) = _not_passed(_one(_h100(scale=0.6)))
    assert reason.verdict == FAIL and reason.why.startswith("float32 GEMM at 0.60 of what a healthy H100 SXM reaches")


def test_a_board_with_no_file_is_judged_against_its_peers_alone() -> None:
    gpus = [dataclasses.replace(_h100("n", i, 1 + i / 1000), name="NVIDIA H200 NVL") for i in range(4)]
    verdicts = judge(gpus, BOARDS)
    for v in verdicts:  # no file: no link, power or floor to hold it to; the peers still compare its measures
        assert v.board == "" and v.verdict == UNDECIDED
        assert {(r.check, r.verdict) for r in _not_passed(v)} == {("pcie", UNDECIDED)}
        assert any(r.why.endswith("judged against its peers alone") for r in v.reasons)
        assert sum(r.check.endswith(" peers") and r.verdict == PASS for r in v.reasons) == 8
    lone = judge(gpus[:1], BOARDS)[0]  # and one alone has nothing to compare its measures with
    assert sum(r.verdict == UNDECIDED for r in lone.reasons) == 1 + 8


def test_evidence_not_read_cannot_be_judged_never_passes() -> None:
    ev = _h100()
    v = _one(dataclasses.replace(ev, facts={k: x for k, x in ev.facts.items() if k != "ecc_uncorrected"}))
    assert v.verdict == UNDECIDED and [r.why for r in _not_passed(v)] == ["its uncorrectable ECC errors were not read"]
    assert exit_code([v, _one(_h100())]) == 3 and exit_code([v, _one(_h100(ecc_uncorrected=2))]) == 1


@pytest.mark.parametrize(("gen", "width", "gbs"), [(5, 16, 63.02), (4, 16, 31.51), (3, 8, 7.88), (2, 16, 8.0)])
def test_a_pcie_links_bandwidth(gen: int, width: int, gbs: float) -> None:
    rate, _ = pcie_rate(gen, width)  # the rate the verdicts hold pinned copies to (probes.pcie_rate)
    assert rate is not None and rate / 1e9 == pytest.approx(gbs, abs=0.01)
