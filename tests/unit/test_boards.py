"""The shipped boards' measured values, held to the stores they name: each is computed again from its store, with
the framework and revision it names; the H200 of `tests/data/gpu/h200` judged against its own board file (the
known answer: a pass on every measure, from `accept --init`'s store and from the quick acceptance made before it,
and a fail on one cut to 70 % of itself); a figure of another revision (the H200's first store, GEMM revision 1)
or framework cannot be judged; `accept --init`'s launch rate in launches a second."""

from __future__ import annotations

import dataclasses
import shutil
import sqlite3
from pathlib import Path
from statistics import median

import pytest

from dltestbed import expected
from dltestbed.accept import golden as golden_mod
from dltestbed.accept import gpus
from dltestbed.errors import ConfigError
from dltestbed.report.gpu_evidence import MEASURES, GpuEvidence, GpuVerdict
from dltestbed.report.gpu_verdicts import judge
from dltestbed.report.verdicts import FAIL, PASS, UNDECIDED
from dltestbed.results.store import Store

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "tests" / "data" / "gpu" / "h200"
H200_STORE = H200 / "accept-init.sqlite"  # accept --init --level standard on the H200 (2026-11-28): its board's values
H200_QUICK = H200 / "accept-quick.sqlite"  # accept --level quick on the same H200 the same hour, before it
H200_FIRST = H200 / "results.sqlite"  # the H200's first store (dltestbed 56b6685): GEMM probe revision 1
MEASURED = [(b, v) for b in expected.shipped() for v in b.values.values() if v.measured is not None]


def _golden(store_path: Path, framework: str) -> list[golden_mod.Golden]:
    store = Store.open(store_path, read_only=True)
    try:
        return gpus.golden(store, [r for r in store.runs() if r.framework == framework])
    finally:
        store.close()


def test_every_figure_dltestbed_measures_is_a_measured_value_with_its_store() -> None:
    for board in expected.shipped():
        for v in board.values.values():
            assert (v.measured is not None) == (v.name in expected.MEASURED), (board.key, v.name)
            assert v.source.startswith("measured: " if v.measured else ("datasheet: ", "measured: "))
    assert MEASURED, "no board holds a measured value: the test below would hold nothing"


@pytest.mark.parametrize(("board", "value"), MEASURED, ids=[f"{b.key}-{v.name}" for b, v in MEASURED])
def test_each_measured_value_is_computed_again_from_the_store_it_names(
    board: expected.Board, value: expected.Value
) -> None:
    m = value.measured
    assert m is not None
    store = ROOT / m.store
    assert store.is_file(), f"{board.key} {value.name}: its store {m.store} is not in the repository"
    found = [g for g in _golden(store, m.framework) if board.fits(g.name)]
    assert found, f"{board.key} {value.name}: no {m.framework} run of a {board.board} in {m.store}"
    computed = []
    for g in found:
        for measure, samples in g.samples.items():
            held = golden_mod.as_board_holds(board, g.name, measure, median(samples))
            if held is not None and held[0] == value.name:
                assert g.measured_by[measure] == (m.framework, m.revision), (board.key, value.name)
                computed.append(held[1])
    assert computed, f"{board.key} {value.name}: {m.store} holds no figure it can be computed from"
    assert median(computed) == pytest.approx(value.value, rel=5e-4)  # the file holds 4 significant digits


def _verdict(store_path: Path) -> GpuVerdict:
    store = Store.open(store_path, read_only=True)
    try:
        (v,) = gpus.verdicts(store, store.runs(), None)
    finally:
        store.close()
    return v


@pytest.mark.parametrize("store", [H200_STORE, H200_QUICK], ids=["init", "quick"])
def test_the_h200_passes_every_measure_its_board_holds(store: Path) -> None:
    v = _verdict(store)
    board = next(b for b in expected.shipped() if b.key == v.board)
    assert v.board == "h200-sxm" and v.verdict == PASS, [r for r in v.reasons if r.verdict != PASS]
    held = {name for name in MEASURES if board.values.get(name) or board.values.get(f"{name}_fraction")}
    judged = {r.check for r in v.reasons if r.check in MEASURES}
    assert held == set(MEASURES) and judged == held  # all nine, each checked against its value
    assert all(r.verdict == PASS and "of what a healthy H200 SXM reaches" in r.why for r in v.reasons
               if r.check in MEASURES)  # fmt: skip
    for check in ("ecc", "pcie", "power", "memory", "xid"):  # and every fact check is listed, passed
        assert any(r.check == check and r.verdict == PASS for r in v.reasons), check


def test_one_measure_cut_to_70_percent_of_itself_fails_that_measure(tmp_path: Path) -> None:
    cut = tmp_path / "results.sqlite"
    shutil.copyfile(H200_STORE, cut)
    with sqlite3.connect(cut) as db:
        changed = db.execute("UPDATE measures SET value = value * 0.7 WHERE probe = 'gemm' AND \"case\" = ?",
                             ("bfloat16 n=8192",)).rowcount  # fmt: skip
    assert changed > 0
    v = _verdict(cut)
    (failed,) = [r for r in v.reasons if r.verdict != PASS]
    assert (v.verdict, failed.verdict, failed.check) == (FAIL, FAIL, "gemm_bfloat16")
    assert failed.why.startswith("bfloat16 GEMM at 0.70 of what a healthy H200 SXM reaches")
    assert "reset the GPU" in failed.action and failed.evidence.startswith("gemm_bfloat16 ")


def _evidence(store_path: Path) -> tuple[list[GpuEvidence], dict]:
    store = Store.open(store_path, read_only=True)
    try:
        return gpus.evidence(store, store.runs())
    finally:
        store.close()


def test_the_h200s_first_store_cannot_be_judged_on_gemm_its_probe_was_revision_1() -> None:
    """The quick acceptance on the H200 said the same (tests/data/gpu/h200/accept-quick-verdict.json, the other way
    round: the board at revision 1, its GEMMs at 2), and exited 3."""
    v = _verdict(H200_FIRST)
    undecided = {r.check for r in v.reasons if r.verdict == UNDECIDED}
    assert undecided == {"gemm_float32", "gemm_tf32", "gemm_bfloat16", "gemm_float16"} and v.verdict == UNDECIDED
    assert all("with pytorch at revision 1" in r.why for r in v.reasons if r.check in undecided)
    assert {r.verdict for r in v.reasons if r.check not in undecided} == {PASS}  # the rest are like for like


def test_a_figure_of_another_revision_or_framework_cannot_be_judged_and_says_why() -> None:
    (ev,), _ = _evidence(H200_STORE)
    newer = dataclasses.replace(ev, measured_by={**ev.measured_by, "gemm_tf32": ("pytorch", 99)})
    other = dataclasses.replace(ev, measured_by={**ev.measured_by, "memory_copy": ("tensorflow", 1)})
    for e, check, said in ((newer, "gemm_tf32", "at revision 99"), (other, "memory_copy", "with tensorflow")):
        (v,) = judge([e], expected.shipped())
        (r,) = [r for r in v.reasons if r.check == check]
        assert v.verdict == UNDECIDED and r.verdict == UNDECIDED and said in r.why and "accept --init" in r.why


def test_golden_gives_the_launch_rate_in_launches_a_second() -> None:
    (g,) = _golden(H200_FIRST, "pytorch")
    rate = median(g.samples["kernel_launches_per_s"])
    assert rate == pytest.approx(1 / 4.123e-6, rel=0.01)  # 4.12 µs a launch, as the H200 printed it


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ({"store": "x.sqlite", "framework": "pytorch"}, "`revision` must be"),
        ({"store": "x.sqlite", "revision": 1}, "`framework` must be one of"),
        ({"framework": "pytorch", "revision": 1}, "`store` must name"),
        ({"store": "x.sqlite", "framework": "jax", "revision": 1}, "`framework` must be one of"),
    ],
)
def test_a_measured_value_without_its_store_framework_or_revision_is_refused(entry: dict, said: str) -> None:
    table = {"version": 1, "board": "X", "match": ["X"], "values": {"gemm_tf32": {"value": 0.7, **entry,
             "source": "measured: a healthy X on a named machine, 2026-11-28"}}}  # fmt: skip
    with pytest.raises(ConfigError, match=said):
        expected._parse("x", table, "x.toml")


def test_each_measure_says_the_gpus_clock_and_power_while_it_ran() -> None:
    """The known answer of the H200's power cap: its tensor-core GEMMs ran at the cap (SM 1425-1545 MHz of 1980,
    692 W of 700), its float32 GEMM (no tensor cores) at full clock: why a sustained probe reads less than a burst."""
    (ev,), _ = _evidence(H200_FIRST)
    assert ev.conditions["gemm_bfloat16"] == "SM 1470 MHz, 692 W, power cap in 100% of 1 sample(s)"
    assert ev.conditions["gemm_float32"] == "SM 1980 MHz, 692 W, power cap in 0% of 2 sample(s)"
    (r,) = [r for r in _verdict(H200_STORE).reasons if r.check == "gemm_tf32"]
    assert r.evidence.startswith("gemm_tf32 3.45e+14 (SM 15") and "W, power cap in 100% of" in r.evidence


def test_the_report_says_the_gpu_while_each_probe_case_ran() -> None:
    """The same in `report`: the H200's standard-level GEMMs at the cap, its memory copy below it."""
    from dltestbed.report import analysis

    store = Store.open(H200_STORE, read_only=True)
    try:
        cases = {(c.key.probe, c.key.case): c for c in analysis.read(store, store.runs()).cases}
    finally:
        store.close()
    assert cases["gemm", "bfloat16 n=8192"].gpu == "SM 1458 MHz, 691 W, power cap in 100% of 5 sample(s)"
    assert cases["d2d", "device copy 1024 MiB"].gpu == "SM 1980 MHz, 385 W, power cap in 0% of 6 sample(s)"


H100_NAME = "NVIDIA H100 80GB HBM3"
POWER = 'values.power_limit_w = { value = 600, source = "measured: our golden node gn01, 2026-12-01" }\n'


def test_a_site_overrides_a_shipped_board_value_by_value(tmp_path: Path) -> None:
    """docs/reference.md: "a site overrides values one by one": a table that gives one value alone (no `version`,
    no `board`) changes that value, and the board keeps its name, version, NVML names and other values."""
    site = tmp_path / "site.toml"
    site.write_text("[boards.h100-sxm]\n" + POWER)
    shipped = next(b for b in expected.shipped() if b.key == "h100-sxm")
    mine = expected.for_gpu(H100_NAME, expected.with_site(expected.shipped(), site))
    assert mine is not None and mine.key == "h100-sxm"
    assert (mine.board, mine.version, mine.match, mine.exclude) == (
        shipped.board,
        shipped.version,
        shipped.match,
        shipped.exclude,
    )
    assert mine.values["power_limit_w"].value == 600 and "gn01" in mine.values["power_limit_w"].source
    assert {k: v for k, v in mine.values.items() if k != "power_limit_w"} == {
        k: v for k, v in shipped.values.items() if k != "power_limit_w"
    }
    site.write_text('[boards.h100-sxm]\nboard = "H100 SXM (capped)"\n')  # a name alone: the values as shipped
    (renamed,) = [b for b in expected.with_site(expected.shipped(), site) if b.key == "h100-sxm"]
    assert renamed.board == "H100 SXM (capped)" and renamed.values == shipped.values


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[boards.h100-sxm]\nversion = 2\n" + POWER, r"version 2; this dltestbed reads board files of version 1"),
        ('[boards.rtx]\nboard = "RTX"\nmatch = ["RTX"]\n' + POWER, r"\[boards.rtx\]: `version` is missing"),
        ('[boards.rtx]\nversion = 1\nmatch = ["RTX"]\n' + POWER, r"\[boards.rtx\]: `board` is missing"),
        (
            '[boards.h100-sxm]\npower_limit_w = { value = 600, source = "measured: gn01, 2026-12-01" }\n',
            r"\[boards.h100-sxm\]: unknown field 'power_limit_w'; a board gives version, board, match, exclude, values",
        ),
    ],
)
def test_an_override_still_refuses_another_version_and_a_new_board_is_whole(
    tmp_path: Path, text: str, said: str
) -> None:
    """What a partial override does not loosen: a version it gives is checked, a board not shipped gives every
    field, and a value outside `values` (a typo that would be ignored) is refused, each in one line."""
    site = tmp_path / "site.toml"
    site.write_text(text)
    with pytest.raises(ConfigError, match=said) as err:
        expected.with_site(expected.shipped(), site)
    assert "\n" not in str(err.value)
