"""A group against a reference loop run in the same benches (bench/harness_fidelity.py stores it, role
`reference`): the pairs by bench and repetition, their geometric mean and paired-t interval on known inputs; the
reference is never a group of its own."""

from __future__ import annotations

import math

import pytest
from scipy import stats as st

from dltestbed.report.render.tables import groups_table
from dltestbed.report.stats import summarise
from dltestbed.results.records import COTENANT, REFERENCE, RunRecord
from tests.conftest import make_run

RATIOS = (0.9, 1.0, 1.1)  # dltestbed ÷ reference in three benches


def _runs() -> list[RunRecord]:
    runs = []
    for i, ratio in enumerate(RATIOS):
        bench, ref_ips = f"b{i}", 100.0 + 10 * i
        runs.append(make_run(bench_id=bench, status="ok", images_per_sec=ref_ips * ratio))
        ref = make_run(bench_id=bench, status="ok", images_per_sec=ref_ips, role=REFERENCE)
        ref.spec = {"reference": "torchvision 0.26.0"}
        runs.append(ref)
    lone = make_run(bench_id="b9", status="ok", images_per_sec=1.0, role=REFERENCE)  # no run of ours beside it
    return [*runs, lone]


def test_the_group_is_set_against_the_reference_paired_by_bench_with_a_paired_t_interval() -> None:
    (group,) = summarise(_runs())  # the reference is no group: one row, of dltestbed's three runs
    assert group.runs == 3
    a = group.reference
    assert a is not None and a.pairs == 3 and a.who == "torchvision 0.26.0"
    d = [math.log(r) for r in RATIOS]
    mean, sd = sum(d) / 3, math.sqrt(sum((x - sum(d) / 3) ** 2 for x in d) / 2)
    half = st.t.ppf(0.975, 2) * sd / math.sqrt(3)
    assert a.ratio == pytest.approx(math.exp(mean))
    assert (a.lo, a.hi) == (pytest.approx(math.exp(mean - half)), pytest.approx(math.exp(mean + half)))
    assert a.method == "paired t on log ratios"
    table = "\n".join(groups_table([group]))
    assert "against reference [95% interval]" in table
    assert f"{a.ratio:.3f} [{a.lo:.3f}, {a.hi:.3f}] (torchvision 0.26.0)" in table
    assert group.to_dict()["reference"]["pairs"] == 3


def test_one_pair_is_its_ratio_alone_and_no_reference_no_column() -> None:
    ours = make_run(bench_id="b", status="ok", images_per_sec=95.0)
    ref = make_run(bench_id="b", status="ok", images_per_sec=100.0, role=REFERENCE)
    (group,) = summarise([ours, ref])
    assert group.reference is not None and group.reference.ratio == pytest.approx(0.95)
    assert group.reference.lo is None and "0.950 (a reference loop)" in "\n".join(groups_table([group]))
    (plain,) = summarise([ours])
    assert plain.reference is None and "against reference" not in "\n".join(groups_table([plain]))


def test_neither_a_reference_nor_a_cotenant_is_a_measured_run() -> None:
    assert make_run().measured
    assert not make_run(role=REFERENCE).measured and not make_run(role=COTENANT).measured
