"""Report statistics: grouping, spreads, overhead against bare metal."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from dltestbed.report import render
from dltestbed.report.analysis import Analysis
from dltestbed.report.inference import PAIRED_T, WELCH_T, paired
from dltestbed.report.stats import Spread, overhead_percent, summarise
from dltestbed.results.records import RunRecord
from tests.conftest import make_run


def rec(kind: str, ips: float | None, elapsed: float = 10.0, status: str = "ok", **kw: object) -> RunRecord:
    return make_run(target_kind=kind, status=status, images_per_sec=ips, elapsed_seconds=elapsed, **kw)


def test_spread_matches_statistics_module() -> None:
    values = [100.0, 90.0, 95.5, 99.0]
    s = Spread.of(values)
    assert (s.n, s.min, s.max) == (4, 90.0, 100.0)
    assert s.mean == pytest.approx(statistics.fmean(values))
    assert s.std == pytest.approx(statistics.stdev(values))
    assert Spread.of([5.0]).std is None


def test_overhead_against_matching_bare_metal() -> None:
    runs = [rec("bm", 100.0, 10.0), rec("bm", 110.0, 12.0), rec("cbm", 84.0, 14.0), rec("cbm", 84.0, 16.0)]
    groups = {g.key.target_kind: g for g in summarise(runs)}
    assert groups["bm"].overhead_percent == 0.0
    assert groups["bm"].images_per_sec.mean == 105.0  # type: ignore[union-attr]
    # one estimate, the one its interval is about: the ratio of geometric means (unpaired: Welch on logs)
    assert groups["cbm"].overhead_percent == pytest.approx((1 - 84.0 / (100.0 * 110.0) ** 0.5) * 100)
    assert groups["cbm"].overhead_percent == groups["cbm"].effect.overhead_pct  # type: ignore[union-attr]
    assert groups["cbm"].elapsed_seconds.mean == 15.0  # type: ignore[union-attr]
    assert groups["cbm"].images_per_sec.std == 0.0  # type: ignore[union-attr]
    assert overhead_percent(100.0, 120.0) == -20.0


def test_runs_of_other_sizes_or_modes_are_never_mixed() -> None:
    runs = [
        rec("bm", 100.0),
        rec("bm", 50.0, batch_size=16),
        rec("vm", 40.0, batch_size=16),
        rec("vm", 10.0, mode="infer"),
    ]
    groups = summarise(runs)
    assert len(groups) == 4
    vm16 = next(g for g in groups if g.key.target_kind == "vm" and g.key.batch_size == 16)
    assert vm16.overhead_percent == pytest.approx(20.0)
    vm_infer = next(g for g in groups if g.key.mode == "infer")
    assert vm_infer.overhead_percent is None  # no bm run in infer mode


def test_vms_on_a_users_image_are_a_layer_of_their_own() -> None:
    own = {"vm_image_name": "debian-12-genericcloud-amd64.qcow2"}
    runs = [rec("bm", 100.0), rec("vm", 80.0), rec("vm", 60.0, fingerprint=own), rec("vm", 62.0, fingerprint=own)]
    groups = {(g.key.target_kind, g.key.vm_image): g for g in summarise(runs)}
    assert sorted(groups) == [("bm", ""), ("vm", ""), ("vm", "debian-12-genericcloud-amd64.qcow2")]
    assert groups[("vm", "")].overhead_percent == pytest.approx(20.0)  # not averaged with the other image
    assert groups[("vm", "debian-12-genericcloud-amd64.qcow2")].overhead_percent == pytest.approx(
        (1 - (60.0 * 62.0) ** 0.5 / 100.0) * 100
    )
    table = render.markdown(Analysis(groups=tuple(summarise(runs))), "t")
    assert "| vm (debian-12-genericcloud-amd64.qcow2) | alexnet |" in table and "| vm | alexnet |" in table


def test_failed_runs_are_counted_not_averaged() -> None:
    runs = [rec("bm", 100.0), rec("bm", 3.0, status="failed"), rec("bm", None, status="failed")]
    (g,) = summarise(runs)
    assert (g.runs, g.failed) == (3, 2)
    assert g.images_per_sec.n == 1 and g.images_per_sec.mean == 100.0  # type: ignore[union-attr]


def test_group_with_only_failures_has_no_numbers() -> None:
    (g,) = summarise([rec("vm", None, status="failed")])
    assert g.images_per_sec is None and g.overhead_percent is None
    table = render.markdown(Analysis(groups=(g,)))
    assert "| vm | alexnet |" in table and "0 (+1 failed)" in table


def test_markdown_table_shape() -> None:
    groups = summarise([rec("bm", 100.0), rec("bm", 90.0), rec("cvm", 45.0)])
    text = render.markdown(Analysis(groups=tuple(groups)))
    first_table = next(b for b in text.split("\n\n") if b.startswith("| kind |"))  # the groups' table
    assert text.index(first_table) < text.index("## Overhead")  # it comes first, after the one-line verdicts
    assert "- **cvm, alexnet b8 64 px**: too few runs for an interval (2 per side)" in text
    lines = [line for line in first_table.splitlines() if line.startswith("|")]
    assert len(lines) == 2 + 2
    widths = {line.count("|") for line in lines}
    assert len(widths) == 1
    assert lines[2].startswith("| bm |") and lines[3].startswith("| cvm |")
    assert "| 95.0 | 7.1 | 90.0–100.0 | baseline |" in lines[2]  # bare metal is the baseline, not "0.0"
    assert lines[3].rstrip().endswith(f"| {(1 - 45.0 / (100.0 * 90.0) ** 0.5) * 100:.1f} |")  # no interval: n = 1
    assert "Every row: data synthetic, mode train" in text  # what every row shares is said once


def test_by_host_splits_groups_and_compares_on_the_same_host() -> None:
    runs = [
        rec("bm", 100.0, host="n1"),
        rec("bm", 50.0, host="n2"),
        rec("cbm", 90.0, host="n1"),
        rec("cbm", 45.0, host="n2"),
    ]
    (bm,) = [g for g in summarise(runs) if g.key.target_kind == "bm"]
    assert bm.images_per_sec.mean == 75.0 and bm.key.host is None  # type: ignore[union-attr]
    per_host = summarise(runs, by_host=True)
    assert len(per_host) == 4
    assert {(g.key.host, g.key.target_kind): g.overhead_percent for g in per_host} == {
        ("n1", "bm"): 0.0,
        ("n2", "bm"): 0.0,
        ("n1", "cbm"): pytest.approx(10.0),
        ("n2", "cbm"): pytest.approx(10.0),
    }
    table = render.markdown(Analysis(groups=tuple(per_host)))
    assert "| kind | host | model |" in table and "| cbm | n2 | alexnet |" in table


def test_by_host_puts_a_vm_beside_the_machine_it_runs_on() -> None:
    runs = [
        rec("bm", 100.0, host="n1"),
        rec("vm", 80.0, host="on-n1", machine="n1"),
        rec("bm", 50.0, host="n2"),
        rec("vm", 25.0, host="on-n2", machine="n2"),
    ]
    per_host = {(g.key.host, g.key.target_kind): g.overhead_percent for g in summarise(runs, by_host=True)}
    assert per_host == {
        ("n1", "bm"): 0.0,
        ("n1", "vm"): pytest.approx(20.0),
        ("n2", "bm"): 0.0,
        ("n2", "vm"): pytest.approx(50.0),
    }
    assert rec("bm", 1.0, host="n3").machine == "n3"  # a run stored before schema 3 sits on its host


def test_distributed_total_is_the_sum_of_workers_and_efficiency_uses_the_job_baseline() -> None:
    from dltestbed.report.jobs import distributed

    runs = []
    for job, (alone, w0, w1) in {"j1": (100.0, 45.0, 40.0), "j2": (90.0, 50.0, 49.0)}.items():
        runs.append(rec("bm", alone, scenario="distributed", job_id=job, workers=1))
        runs.append(rec("bm", w0, scenario="distributed", job_id=job, workers=2, worker_index=0))
        runs.append(rec("bm", w1, scenario="distributed", job_id=job, workers=2, worker_index=1))
    # a job whose worker failed counts as failed, not as a low total
    runs.append(rec("bm", 100.0, scenario="distributed", job_id="j3", workers=1))
    runs.append(rec("bm", 45.0, scenario="distributed", job_id="j3", workers=2, worker_index=0))
    runs.append(rec("bm", None, status="failed", scenario="distributed", job_id="j3", workers=2, worker_index=1))
    (d,) = distributed(runs)
    assert (d.workers, d.jobs, d.failed_jobs) == (2, 2, 1)
    assert d.total_images_per_sec is not None and d.total_images_per_sec.mean == pytest.approx((85 + 99) / 2)
    assert d.efficiency_percent is not None
    assert d.efficiency_percent.mean == pytest.approx((85 / 200 * 100 + 99 / 180 * 100) / 2)
    md = render.markdown(Analysis(groups=tuple(summarise(runs)), distributed=(d,)))
    assert "## Distributed" in md and "| bm | — | alexnet | 8 | 64 | 2 | 2 (+1 failed) | 92.0 |" in md
    assert d.effect is None and md.count("| baseline |") >= 1  # bm is the baseline of the job totals


def _jobs(
    kind: str, network: str, totals: dict[int, tuple[float, float]], bench: str = "b", framework: str = "tensorflow"
) -> list[RunRecord]:
    """A distributed job of 2 workers on nodes n1 and n2 per repetition (its workers' images/sec), each worker's
    fingerprint naming its network as Kubernetes' targets do."""
    runs = []
    for rep, speeds in totals.items():
        for i, ips in enumerate(speeds):
            runs.append(
                rec(
                    kind, ips, scenario="distributed", job_id=f"{kind}-{bench}-{rep}-{framework}", workers=2,
                    worker_index=i, framework=framework,
                    repetition=rep, bench_id=bench, host=f"n{i + 1}", fingerprint={"k8s_network": network},
                )
            )  # fmt: skip
    return runs


def test_the_overlays_cost_is_cbms_job_totals_against_bms_paired_on_the_same_nodes() -> None:
    """Known answers: cbm's job totals exactly 0.9 of bm's in each repetition (100, 110, 120 against 90, 99, 108):
    10 % with no spread, paired; however its workers split it (45 + 45, or 60 + 30)."""
    from dltestbed.report.jobs import distributed

    bm = _jobs("bm", "host", {1: (50.0, 50.0), 2: (55.0, 55.0), 3: (60.0, 60.0)})
    cbm = _jobs("cbm", "pod", {1: (45.0, 45.0), 2: (70.0, 29.0), 3: (60.0, 48.0)})
    d = {x.key.target_kind: x for x in distributed([*bm, *cbm])}
    e = d["cbm"].effect
    assert e is not None and e.method == PAIRED_T and e.n == 3
    assert (e.overhead_pct, e.lo_pct, e.hi_pct) == pytest.approx((10.0, 10.0, 10.0))
    assert (d["bm"].network, d["cbm"].network) == ("host", "pod")
    md = render.markdown(Analysis(groups=tuple(summarise([*bm, *cbm])), distributed=tuple(d.values())))
    assert "| cbm | pod | alexnet | 8 | 64 | 2 | 3 |" in md and "| 10.0 [10.0, 10.0] |" in md
    assert "- cbm on the pod network, bm on the host one: alexnet, 2 workers, job totals against bm's: slower by " in md
    assert f"({PAIRED_T}, n = 3)" in md
    assert "k8s_network: host (bm) / pod (cbm)" in md  # the environments' difference, said with the groups


def test_unpaired_jobs_are_compared_by_welch_and_one_job_a_side_by_nothing() -> None:
    """Two ratios, 0.9 and 0.8: paired, the whole effect is paired() of the job totals (1 − √0.72 = 15.15 %); the
    same jobs in another bench: Welch; one job a side: no interval."""
    from dltestbed.report.jobs import distributed

    bm = _jobs("bm", "host", {1: (50.0, 50.0), 2: (50.0, 50.0)})
    cbm = _jobs("cbm", "pod", {1: (45.0, 45.0), 2: (40.0, 40.0)})
    e = {x.key.target_kind: x for x in distributed([*bm, *cbm])}["cbm"].effect
    assert e is not None and e == paired([100.0, 100.0], [90.0, 80.0])
    assert e.overhead_pct == pytest.approx((1 - 0.72**0.5) * 100)
    other = _jobs("cbm", "pod", {1: (45.0, 45.0), 2: (40.0, 40.0)}, bench="c")
    w = {x.key.target_kind: x for x in distributed([*bm, *other])}["cbm"].effect
    assert w is not None and w.method == WELCH_T
    one = {x.key.target_kind: x for x in distributed([*bm[:2], *cbm[:2]])}["cbm"]
    assert one.effect is None and one.verdict is None


def test_shared_drop_is_per_pair_and_co_tenants_are_not_rows() -> None:
    from dltestbed.report.jobs import shared

    runs = []
    for job, (alone, under, co) in {"j1": (100.0, 70.0, 50.0), "j2": (110.0, 88.0, 55.0)}.items():
        runs.append(rec("cbm", alone, scenario="shared", job_id=job, contention="none"))
        runs.append(rec("cbm", under, scenario="shared", job_id=job, contention="alexnet b64"))
        runs.append(
            rec("cbm", co, scenario="shared", job_id=job, contention="alexnet b64", role="cotenant", batch_size=64)
        )
    (s,) = shared(runs)
    assert (s.contention, s.pairs, s.failed_pairs) == ("alexnet b64", 2, 0)
    assert s.drop_percent is not None and s.drop_percent.mean == pytest.approx((30.0 + 20.0) / 2)
    assert s.cotenant_images_per_sec is not None and s.cotenant_images_per_sec.mean == pytest.approx(52.5)
    groups = summarise(runs)
    assert {g.key.contention for g in groups} == {"none", "alexnet b64"}
    assert all(g.key.batch_size == 8 for g in groups)  # the co-tenant (batch 64) is not a row
    assert "| cbm | alexnet | 8 | 64 | alexnet b64 | 2 | 105.0 | 79.0 | 25.0 |" in render.markdown(
        Analysis(groups=tuple(groups), shared=(s,))
    )


def test_overheads_are_paired_by_repetition_and_said_in_words() -> None:
    base = [rec("bm", ips, repetition=i) for i, ips in enumerate([100.0, 104.0, 96.0, 101.0], 1)]
    layer = [rec("cbm", ips, repetition=i) for i, ips in enumerate([90.0, 93.5, 86.5, 91.0], 1)]  # ~10 % slower
    groups = {g.key.target_kind: g for g in summarise([*base, *layer])}
    e = groups["cbm"].effect
    assert groups["bm"].effect is None and e is not None
    assert e.method == "paired t on log ratios" and e.n == 4 and e.excludes_zero
    assert groups["cbm"].verdict.startswith("slower by 10.0 % [")  # type: ignore[union-attr]
    # the same numbers unpaired (another bench): Welch, whose interval is wider
    shuffled = [rec("cbm", ips, repetition=i, bench_id="other") for i, ips in enumerate([90.0, 93.5, 86.5, 91.0], 1)]
    w = {g.key.target_kind: g for g in summarise([*base, *shuffled])}["cbm"].effect
    assert w is not None and w.method == "Welch t on log throughput" and (w.hi_pct - w.lo_pct) > (e.hi_pct - e.lo_pct)
    table = render.markdown(Analysis(groups=tuple(groups.values())))
    assert "## Overhead against bare metal, 95% intervals" in table
    assert "| cbm | alexnet | 8 | 64 | 4 | paired t on log ratios | 10.0 [" in table


def test_one_run_a_side_gives_no_interval() -> None:
    groups = {g.key.target_kind: g for g in summarise([rec("bm", 100.0), rec("vm", 50.0)])}
    assert groups["vm"].effect is None and groups["vm"].overhead_percent == pytest.approx(50.0)
    assert "too few runs for an interval (2 per side)" in render.markdown(Analysis(groups=tuple(groups.values())))


def test_report_scope_is_the_latest_bench_unless_told(results: Path) -> None:
    import json

    from dltestbed.results.store import Store
    from tests.conftest import one_error_line, run_cli

    store = Store.open(results)
    for bench, kind, day in (("b-old", "bm", "01"), ("b-new", "cbm", "02")):
        started = f"2026-01-{day}T00:00:00+00:00"
        for rep in (1, 2):
            store.save_run(rec(kind, 100.0 + rep, bench_id=bench, repetition=rep, started_at=started))
    store.close()
    latest = json.loads(run_cli("report", "--format", "json", "--results", str(results)).stdout)
    assert latest["scope"] == "bench b-new (the latest; --all for every bench)"
    assert {g["key"]["target_kind"] for g in latest["groups"]} == {"cbm"}
    md = run_cli("report", "--results", str(results)).stdout
    assert md.startswith("# dltestbed report: bench b-new (the latest; --all for every bench)")
    every = json.loads(run_cli("report", "--all", "--format", "json", "--results", str(results)).stdout)
    assert every["scope"] == "every stored run (2 bench(es))" and len(every["groups"]) == 2
    line = one_error_line(run_cli("report", "--all", "--bench", "b-old", "--results", str(results)))
    assert line == "error: --all reports every run; leave out --bench and run ids with it"


def test_runs_with_other_steps_are_never_pooled() -> None:
    groups = summarise([rec("bm", 100.0, steps=30), rec("bm", 50.0, steps=100), rec("cbm", 90.0, steps=30)])
    assert len([g for g in groups if g.key.target_kind == "bm"]) == 2
    (cbm,) = [g for g in groups if g.key.target_kind == "cbm"]
    assert cbm.overhead_percent == pytest.approx(10.0)  # against the bm run with the same steps only


def test_a_a_noise_floor_table() -> None:
    a = [rec("bm", ips, repetition=i) for i, ips in enumerate([100.0, 103.0, 98.0, 101.0, 99.0], 1)]
    a2 = [rec("bm", ips, repetition=i, arm="A′") for i, ips in enumerate([100.5, 102.0, 98.5, 101.5, 98.0], 1)]
    groups = summarise([*a, *a2])
    (aa,) = [g for g in groups if g.key.arm == "A′"]
    assert aa.effect is not None and not aa.effect.excludes_zero  # the same kind twice: no difference
    (base,) = [g for g in groups if not g.key.arm]
    assert base.effect is None and base.cv == pytest.approx(statistics.stdev([100, 103, 98, 101, 99]) / 100.2)
    text = render.markdown(Analysis(groups=tuple(groups)))
    assert "## Noise floor: A/A (bare metal twice per repetition), 95% intervals" in text
    row = next(line for line in text.splitlines() if line.startswith("| alexnet | 8 | 64 | 5 |"))
    assert "| yes |" in row and "bm 1.92 %" in row and "bm A′" in row


def test_fleet_flags_the_slow_host_and_only_it() -> None:
    from dltestbed.report.fleet import fleet

    runs = []
    for host, ips in (("n1", 100.0), ("n2", 101.0), ("n3", 99.0), ("n4", 70.0)):
        for rep, wobble in enumerate((-0.5, 0.0, 0.5), 1):
            runs.append(rec("bm", ips + wobble, host=host, repetition=rep))
    flags, compared = fleet(summarise(runs, by_host=True))
    assert compared == 1 and [f.host for f in flags] == ["n4"]
    assert flags[0].peers_median == pytest.approx(100.0) and flags[0].robust_z == pytest.approx(0.6745 * -30 / 1)
    text = render.markdown(
        Analysis(groups=tuple(summarise(runs, by_host=True)), fleet=tuple(flags), fleet_compared=compared)
    )
    assert "## Fleet: hosts slower than their peers" in text
    assert "| bm | alexnet | 8 | 64 | n4 | 70.0 | 100.0 | 30.0 |" in text
    assert "by at least 5 %" in text
    healthy = [r for r in runs if r.host != "n4"]
    assert fleet(summarise(healthy, by_host=True)) == ([], 1)
    assert fleet(summarise(runs, by_host=True), min_slowdown=31.0) == ([], 1)  # 30 % slower: under a 31 % bar


def test_equivalence_is_judged_with_two_one_sided_tests() -> None:
    base = [rec("bm", ips, repetition=i) for i, ips in enumerate([100.0, 101.0, 99.0, 100.0, 100.5], 1)]
    near = [rec("cbm", ips, repetition=i) for i, ips in enumerate([99.8, 100.6, 99.1, 99.7, 100.4], 1)]
    (g,) = [g for g in summarise([*base, *near], equivalence=2.0) if g.key.target_kind == "cbm"]
    assert g.equivalence == "equivalent"
    text = render.markdown(Analysis(groups=(g,), equivalence=2.0))
    assert "| within ±2 % (TOST) |" in text and text.count("| equivalent |") == 1


def test_steady_state_flags_come_from_the_stored_steps(results: Path) -> None:
    from dltestbed.results.store import Store
    from dltestbed.workload.events import StepEvent
    from tests.conftest import run_cli

    store = Store.open(results)
    r = rec("bm", 100.0)
    store.save_run(r)
    for i in range(20):  # speeding up all along: the warm-up was too short
        ips = 100.0 + 2 * i
        store.add_step(r.id, StepEvent(index=i, phase="timed", images=8, seconds=8 / ips, images_per_sec=ips, t=i))
    store.close()
    md = run_cli("report", "--results", str(results)).stdout
    assert "## Steady state: runs to look at" in md and f"- {r.id} (bm, alexnet, rep 1): still speeding up: +" in md


def test_compare_two_benches_with_the_environment_that_changed() -> None:
    from dltestbed.report.compare import compare

    def runs(bench: str, values: list[float], tf: str) -> list[RunRecord]:
        return [
            rec("bm", v, bench_id=bench, repetition=i, fingerprint={"tensorflow": tf, "gpus_visible_to_tf": 0})
            for i, v in enumerate(values, 1)
        ]

    before, after = runs("b-1", [100.0, 101.0, 99.0, 100.5], "2.20.0"), runs("b-2", [80.0, 81.0, 79.5, 80.5], "2.21.0")
    (c,) = compare(before, after)
    assert c.effect is not None and c.effect.method == "Welch t on log throughput"
    assert c.verdict.startswith("slower by 19.8 % [")
    assert c.env == ["tensorflow: 2.20.0 (A) / 2.21.0 (B)"]
    text = render.comparison("b-1", "b-2", [c])
    assert "# dltestbed report: bench b-2 against bench b-1" in text and "- bm, alexnet: tensorflow: 2.20.0 (A)" in text


def test_a_gpu_run_is_never_compared_with_a_cpu_run() -> None:
    gpu = {"tensorflow": "2.21.0", "gpus_visible_to_tf": 1}
    cpu = {"tensorflow": "2.21.0", "gpus_visible_to_tf": 0}
    runs = [
        rec("bm", 900.0, repetition=1, fingerprint=gpu, used_device="gpu"),
        rec("bm", 910.0, repetition=2, fingerprint=gpu, used_device="gpu"),
        rec("cbm", 90.0, repetition=1, fingerprint=cpu, used_device="cpu"),
        rec("cbm", 91.0, repetition=2, fingerprint=cpu, used_device="cpu"),
    ]
    (cbm,) = [g for g in summarise(runs) if g.key.target_kind == "cbm"]
    assert cbm.effect is None and cbm.overhead_percent is None
    assert cbm.verdict == "refused: bm ran on gpu, cbm on cpu; no overhead across devices"
    assert "effective_device: gpu (bm) / cpu (cbm)" in cbm.env
    text = render.markdown(Analysis(groups=tuple(summarise(runs))))
    assert "refused: bm ran on gpu, cbm on cpu" in text and "## Environment differences against bare metal" in text


@pytest.mark.parametrize(
    ("cbm_fp", "words"),
    [
        (
            {"tensorflow": "2.21.0", "tensorflow_cuda_build": False},
            "refused: bm ran TensorFlow 2.21.0 (CUDA build), cbm TensorFlow 2.21.0 (CPU build); no overhead across "
            "framework builds",
        ),
        (
            {"tensorflow": "2.20.0", "tensorflow_cuda_build": True},
            "refused: bm ran TensorFlow 2.21.0 (CUDA build), cbm TensorFlow 2.20.0 (CUDA build); no overhead across "
            "framework builds",
        ),
    ],
)
def test_another_tensorflow_build_is_no_layer_overhead(cbm_fp: dict, words: str) -> None:
    bm_fp = {"tensorflow": "2.21.0", "tensorflow_cuda_build": True, "gpus_visible_to_tf": 0}
    runs = [
        rec("bm", 100.0, repetition=1, fingerprint=bm_fp),
        rec("bm", 101.0, repetition=2, fingerprint=bm_fp),
        rec("cbm", 90.0, repetition=1, fingerprint={**cbm_fp, "gpus_visible_to_tf": 0}),
        rec("cbm", 91.0, repetition=2, fingerprint={**cbm_fp, "gpus_visible_to_tf": 0}),
    ]
    (cbm,) = [g for g in summarise(runs) if g.key.target_kind == "cbm"]
    assert cbm.effect is None and cbm.overhead_percent is None and cbm.verdict == words
    same = [
        rec("bm", 100.0, repetition=1, fingerprint=bm_fp),
        rec("bm", 101.0, repetition=2, fingerprint=bm_fp),
        rec("cbm", 90.0, repetition=1, fingerprint=bm_fp),
        rec("cbm", 91.0, repetition=2, fingerprint=bm_fp),
    ]
    (ok,) = [g for g in summarise(same) if g.key.target_kind == "cbm"]
    assert ok.effect is not None and ok.verdict.startswith("slower by")  # type: ignore[union-attr]


def test_runs_on_another_dataset_are_no_layer_overhead() -> None:
    """The same model on two datasets (another digest) is refused; the same digest is compared."""
    fp = {"tensorflow": "2.21.0", "gpus_visible_to_tf": 0}
    a, b = "3f2a9c01d4e5" + "0" * 52, "9c1d00aa7b21" + "1" * 52

    def runs(digest_cbm: str) -> list[RunRecord]:
        return [
            rec("bm", 100.0, repetition=1, data="real", fingerprint={**fp, "dataset_digest": a}),
            rec("bm", 101.0, repetition=2, data="real", fingerprint={**fp, "dataset_digest": a}),
            rec("cbm", 90.0, repetition=1, data="real", fingerprint={**fp, "dataset_digest": digest_cbm}),
            rec("cbm", 91.0, repetition=2, data="real", fingerprint={**fp, "dataset_digest": digest_cbm}),
        ]

    (cbm,) = [g for g in summarise(runs(b)) if g.key.target_kind == "cbm"]
    assert cbm.effect is None and cbm.verdict == (
        "refused: bm read dataset 3f2a9c01d4e5, cbm dataset 9c1d00aa7b21; no overhead across datasets"
    )
    assert f"dataset_digest: {a} (bm) / {b} (cbm)" in cbm.env
    (same,) = [g for g in summarise(runs(a)) if g.key.target_kind == "cbm"]
    assert same.effect is not None and same.overhead_percent is not None


def test_the_step_device_decides_the_effective_device(tmp_path: Path) -> None:
    """A run whose workload saw a GPU but whose first step's result was on the CPU ran on the CPU: recorded on
    the run from its events, once; the report reads it there."""
    from dltestbed import runner
    from dltestbed.report.environment import effective_device
    from dltestbed.results.store import Store
    from dltestbed.workload.codec import encode
    from dltestbed.workload.events import StartEvent, StepEvent

    store = Store.open(tmp_path / "r.sqlite")
    for step_device, used in (("/job:localhost/replica:0/task:0/device:CPU:0", "cpu"), ("/device:GPU:1", "gpu")):
        run = make_run(fingerprint={})
        store.save_run(run)
        collect = runner._Collector(run, store, runner.NullObserver())
        start = StartEvent(spec={"model": "alexnet", "device_used": "gpu"}, fingerprint={"tensorflow": "2.21"}, t=1.0)
        collect.on_line(encode(start))
        assert run.used_device == "gpu"  # what the workload saw at its start
        collect.on_line(encode(StepEvent(0, "warmup", 8, 0.1, 80.0, 2.0, device=step_device)))
        assert effective_device(run) == used
        assert {r.id: r.used_device for r in store.runs()}[run.id] == used
    assert effective_device(make_run()) == "unknown"  # ended before its workload said


def test_jobs_of_two_frameworks_pair_each_with_its_own() -> None:
    """TensorFlow's and PyTorch's jobs in one bench, repetition and nodes: each cbm job is paired with bm's of its
    framework (cbm exactly 0.9 of bm for both), never the other's (which would give 0.9 × 2 or 0.9 ÷ 2)."""
    from dltestbed.report.jobs import distributed

    runs = [
        *_jobs("bm", "host", {1: (50.0, 50.0), 2: (60.0, 60.0)}),
        *_jobs("bm", "host", {1: (10.0, 10.0), 2: (12.0, 12.0)}, framework="pytorch"),
        *_jobs("cbm", "pod", {1: (45.0, 45.0), 2: (54.0, 54.0)}),
        *_jobs("cbm", "pod", {1: (9.0, 9.0), 2: (10.8, 10.8)}, framework="pytorch"),
    ]
    e = {x.key.target_kind: x for x in distributed(runs)}["cbm"].effect
    assert e is not None and e.method == PAIRED_T and e.n == 4
    assert (e.overhead_pct, e.lo_pct, e.hi_pct) == pytest.approx((10.0, 10.0, 10.0))
