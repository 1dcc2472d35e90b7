"""Microbenchmarks: the events on captured output, the spec and the plan, the probes' pure parts, the
store, the stream's line, the runner on a replayed run, and the report's statistics on known answers."""

from __future__ import annotations

import math
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import pytest

from dltestbed.config import ALONE_PROBES, PROBES, ProbeSpec, probe_spec, spec_json
from dltestbed.errors import ConfigError
from dltestbed.orchestrate import planning
from dltestbed.report import micro, micro_md
from dltestbed.report.inference import PAIRED_T, WELCH_T
from dltestbed.results import points
from dltestbed.results.store import SCHEMA_VERSION, Store
from dltestbed.runner import RunContext, execute
from dltestbed.targets.local import LocalTarget
from dltestbed.workload import cudart, peaks, probes
from dltestbed.workload.args import parse
from dltestbed.workload.codec import encode, parse_line
from dltestbed.workload.events import MeasureEvent, ProbesDoneEvent, ResourceEvent, SkipEvent, StartEvent, Unparsed
from tests.conftest import CAPTURED, DATA, make_run
from tests.plans import plan_of

# -- events, on the captured output of a real `micro` run on this machine's CPU


def test_a_captured_micro_run_parses_completely() -> None:
    events = [parse_line(line) for line in (CAPTURED / "micro_cpu_ok.jsonl").read_text().splitlines()]
    assert not [e for e in events if isinstance(e, Unparsed)]
    start, done = events[0], events[-1]
    assert isinstance(start, StartEvent) and isinstance(done, ProbesDoneEvent)
    measures = [e for e in events if isinstance(e, MeasureEvent)]
    skips = [e for e in events if isinstance(e, SkipEvent)]
    assert {m.probe for m in measures} == {"gemm", "conv", "membw", "disk"}
    assert {(s.probe, s.case) for s in skips} == {("gemm", "bfloat16"), ("gemm", "float16"), ("h2d", ""), ("d2h", "")}
    assert done.measures == sum(m.phase == "timed" for m in measures) and done.skips == len(skips)
    assert {m.unit for m in measures if m.probe in ("gemm", "conv")} == {"FLOP/s"}
    assert {m.unit for m in measures if m.probe in ("membw", "disk")} == {"B/s"}
    cases = start.spec["cases"]
    assert [c["case"] for c in cases if c["probe"] == "gemm"] == ["float32 n=256", "float32 n=512"]
    assert sum(c["headline"] for c in cases if c["probe"] == "gemm") == 1
    by_case = {(c["probe"], c["case"]) for c in cases}
    assert {(m.probe, m.case) for m in measures} == by_case  # every planned case measured, nothing else
    for case in by_case:  # warm-up first, then the timed calls, indices in order
        phases = [m.phase for m in measures if (m.probe, m.case) == case]
        assert phases == ["warmup", "timed", "timed"]
    assert any(isinstance(e, ResourceEvent) for e in events)


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (
            '{"v":1,"event":"measure","probe":"gemm","case":"x","index":0,"phase":"timed","value":-1.0,"unit":"FLOP/s",'
            '"seconds":0.1,"t":1}',
            "positive",
        ),
        (
            '{"v":1,"event":"measure","probe":"gemm","case":"x","index":0,"phase":"cold","value":1.0,"unit":"FLOP/s",'
            '"seconds":0.1,"t":1}',
            "unknown phase",
        ),
        (
            '{"v":1,"event":"measure","probe":"gemm","case":"x","index":0,"phase":"timed","value":1.0,"seconds":0.1,"t":1}',
            "without 'unit'",
        ),
        ('{"v":1,"event":"skip","probe":"h2d","reason":"no GPU"}', "without 'case'"),
    ],
)
def test_malformed_micro_lines_are_unparsed_with_the_reason(line: str, why: str) -> None:
    ev = parse_line(line)
    assert isinstance(ev, Unparsed) and why in ev.reason


def test_micro_events_round_trip() -> None:
    for ev in (
        MeasureEvent("disk", "random 4 KiB reads x256", 3, "timed", 5e7, "B/s", 0.02, 12.5),
        SkipEvent("h2d", "", "no GPU is visible"),
        ProbesDoneEvent(12, 4),
    ):
        assert parse_line(encode(ev)) == ev


# -- the spec and the plan


def test_a_probe_spec_round_trips_through_the_workloads_parser() -> None:
    spec = probe_spec(
        probes=("disk", "gemm"),
        scale="full",
        data="real",
        data_dir="/d",
        data_digest="ab" * 32,
        data_files=3,
        data_bytes=99,
        warmup=0,
        steps=2,
        cpus="0",
    )
    assert spec.probes == ("gemm", "disk")  # in the catalogue's order
    again, _ = parse(["--spec", spec_json(spec)])
    assert again == spec and isinstance(again, ProbeSpec)
    assert (spec.model, spec.mode, spec.batch_size, spec.size) == ("micro", "probe", 0, 0)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"probes": ("gemm", "fft")}, "--probes: unknown probe 'fft'; known: " + ", ".join(PROBES)),
        ({"probes": ()}, "--probes: unknown probe ''"),
        ({"scale": "huge"}, "--scale"),
        ({"data": "real"}, "--data real needs --data-dir DIR"),
        ({"steps": 0}, "--steps"),
    ],
)
def test_bad_probe_specs_are_one_line(values: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        probe_spec(**values)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_suites_make_the_specs_they_say() -> None:
    study = plan_of(suite="study")
    assert [s.model for s in study.specs] == ["alexnet", "resnet50"] and study.models == study.specs
    only = plan_of(suite="micro", probes=["membw"])
    (spec,) = only.specs
    assert spec.probes == ("membw",) and (spec.warmup, spec.steps) == (planning.PROBE_WARMUP, planning.PROBE_STEPS)
    assert only.models == []
    full = plan_of(suite="full", steps=4)
    assert [s.model for s in full.specs] == ["alexnet", "resnet50", "micro"]
    assert full.specs[-1].probes == ALONE_PROBES and full.specs[-1].steps == 4


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"suite": "all"}, "--suite: unknown suite 'all'; known: study, micro, full"),
        ({"probes": ["gemm"]}, "--probes goes with --suite micro or full"),
        ({"suite": "micro", "models": ["alexnet"]}, "--model goes with --suite study or full"),
        ({"suite": "micro", "probe_scale": "big"}, "--scale"),
    ],
)
def test_bad_suites_are_one_line(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        plan_of(**kwargs)
    assert str(err.value).startswith(message)


def test_each_scenario_gets_its_probes() -> None:
    from dltestbed.orchestrate import scenarios

    (alone,) = plan_of(suite="micro").specs
    assert alone.probes == ("gemm", "conv", "membw", "h2d", "d2h", "d2d", "launch", "disk") and not alone.distributed
    (pair,) = plan_of(suite="micro", scenario="distributed").specs
    assert pair.probes == ("net", "allreduce") and pair.distributed and '"distributed":true' in spec_json(pair)
    scenarios.check(
        scenarios.Options(scenario="distributed"),
        [None, None],
        plan_of(suite="full", scenario="distributed"),
        ["bm"],
    )
    with pytest.raises(ConfigError, match="net runs between the workers of a job: --scenario distributed"):
        plan_of(suite="micro", probes=["gemm", "net"])
    with pytest.raises(ConfigError, match=r"gemm runs on one target \(--scenario single\); between workers: net"):
        plan_of(suite="micro", probes=["gemm"], scenario="distributed")
    with pytest.raises(ConfigError, match="not shared"):
        scenarios.check(scenarios.Options(scenario="shared"), [None], plan_of(suite="micro"), ["bm"])


def test_a_captured_worker_of_a_probe_job_parses() -> None:
    events = [parse_line(line) for line in (CAPTURED / "micro_pair_worker0.jsonl").read_text().splitlines()]
    assert not [e for e in events if isinstance(e, Unparsed)]
    start = events[0]
    assert isinstance(start, StartEvent) and start.fingerprint["workers"] == 2
    measures = [e for e in events if isinstance(e, MeasureEvent)]
    latency = [m for m in measures if m.unit == "s"]
    assert latency and all(m.case == "latency: 4 B all-reduce" and 0 < m.value < m.seconds for m in latency)
    for size in ("4 KiB", "256 KiB", "4 MiB"):  # busbw from the same calls: the same seconds, x 2(n-1)/n = 1
        alg = [m for m in measures if m.case == f"{size} algbw"]
        bus = [m for m in measures if m.case == f"{size} busbw"]
        assert [(m.seconds, m.value) for m in alg] == [(m.seconds, m.value) for m in bus] and alg


# -- the probes' pure parts

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz
cpu MHz\t\t: 2499.998
flags\t\t: fpu vme sse sse2 avx avx2 fma avx512f avx512dq
processor\t: 1
cpu MHz\t\t: 1200.000
flags\t\t: fpu
"""


def test_cpuinfo_gives_the_first_cpus_flags_and_clock() -> None:
    flags, mhz = probes.parse_cpuinfo(CPUINFO)
    assert {"avx2", "fma", "avx512f"} <= flags and "fpu" in flags and mhz == pytest.approx(2499.998)
    assert probes.parse_cpuinfo("") == (set(), None)


@pytest.mark.parametrize(
    ("flags", "per_cycle"),
    [({"avx512f", "avx2", "fma"}, 64), ({"avx2", "fma"}, 32), ({"avx2"}, 16), ({"avx"}, 16), ({"sse2"}, 8)],
)
def test_flops_per_cycle_follow_the_widest_vector_unit(flags: set[str], per_cycle: int) -> None:
    assert probes.cpu_flops_per_cycle(flags)[0] == per_cycle


@pytest.mark.parametrize(
    ("name", "math", "tflops", "board"),
    [
        (
            "NVIDIA H100 80GB HBM3",
            "float32",
            67.0,
            "H100 SXM",
        ),  # the captured H100: its name says SXM by saying nothing
        ("NVIDIA H100 80GB HBM3", "tf32", 494.5, "H100 SXM"),
        ("NVIDIA H100 80GB HBM3", "bfloat16", 989.5, "H100 SXM"),
        ("NVIDIA H100 PCIe", "bfloat16", 756.0, "H100 PCIe"),
        ("NVIDIA H100 NVL", "float16", 835.5, "H100 NVL"),
        ("NVIDIA H200", "tf32", 494.5, "H200 SXM"),
        ("NVIDIA H200 NVL", "bfloat16", 835.5, "H200 NVL"),
        ("NVIDIA GH200 480GB", "bfloat16", 989.0, "GH200 (Grace Hopper)"),
        ("NVIDIA B200", "bfloat16", 2250.0, "B200 (HGX)"),
        ("NVIDIA L40S", "tf32", 183.0, "L40S"),
        ("NVIDIA A100-SXM4-80GB", "tf32", 156.0, "A100 SXM"),
        ("NVIDIA A100 80GB PCIe", "float32", 19.5, "A100 PCIe"),
        ("Tesla V100-PCIE-16GB", "float16", 112.0, "V100 PCIe"),
    ],
)
def test_gpu_peaks_come_from_the_table_by_name_form_factor_and_math(
    name: str, math: str, tflops: float, board: str
) -> None:
    value, why = peaks.gpu_peak(name, math)
    assert value == tflops * 1e12 and why.endswith(f"dense {math} {tflops:g} TFLOP/s ({board})")


def test_a_gpu_or_math_the_table_lacks_has_no_limit() -> None:
    assert peaks.gpu_peak("Tesla V100-SXM2-16GB", "bfloat16") == (None, "V100 SXM2 has no bfloat16 tensor cores")
    assert peaks.gpu_peak("Tesla T4", "tf32")[0] is None
    value, why = peaks.gpu_peak("NVIDIA GeForce RTX 4090", "float32")
    assert value is None and "not in dltestbed's table" in why


def test_the_captured_h100_gemm_was_tf32_not_float32() -> None:
    """The H100's float32 GEMM at n=4096 measured 250 TFLOP/s (tests/data/gpu/h100): 373 % of the float32 peak
    it was held against, 51 % of the TF32 peak it really ran at, as TensorFlow's default does on Hopper."""
    import statistics

    db = sqlite3.connect(Path(__file__).parents[1] / "data" / "gpu" / "h100" / "results.sqlite")
    values = [
        v
        for (v,) in db.execute(
            "SELECT value FROM measures WHERE probe = 'gemm' AND \"case\" = 'float32 n=4096' AND phase = 'timed'"
        )
    ]
    measured = statistics.median(values)
    assert measured > peaks.gpu_peak("NVIDIA H100 80GB HBM3", "float32")[0]  # type: ignore[operator]
    assert measured < peaks.gpu_peak("NVIDIA H100 80GB HBM3", "tf32")[0]  # type: ignore[operator]


@pytest.mark.parametrize(
    ("gen", "width", "gbs"), [(5, 16, 63.0), (4, 16, 31.5), (4, 8, 15.75), (3, 16, 15.75), (2, 16, 8.0), (6, 16, 121.0)]
)
def test_a_pcie_links_payload_rate(gen: int, width: int, gbs: float) -> None:
    """Known answers: Gen5 x16 carries 63.0 GB/s a direction; the H100's pinned copies moved 55.1 (87 %)."""
    rate, _ = probes.pcie_rate(gen, width)
    assert rate is not None and abs(rate / 1e9 - gbs) < 0.05
    assert probes.pcie_rate(None, 16) == (None, "PCIe link not reported")


def test_copies_come_from_each_numa_nodes_memory_where_there_are_several(tmp_path: Path) -> None:
    for node, cpus in ((0, "0-3\n"), (1, "4-7\n"), (2, "\n")):  # node 2: memory only, no CPUs
        (tmp_path / f"node{node}").mkdir()
        (tmp_path / f"node{node}" / "cpulist").write_text(cpus)
    nodes = cudart.numa_nodes(tmp_path)
    assert nodes == {0: [0, 1, 2, 3], 1: [4, 5, 6, 7]}
    assert probes.copy_cases("h2d", 256 << 20, nodes) == [
        ("pinned 256 MiB from node 0", True, [0, 1, 2, 3]),
        ("pinned 256 MiB from node 1", True, [4, 5, 6, 7]),
        ("pageable 256 MiB from node 0", False, [0, 1, 2, 3]),
        ("pageable 256 MiB from node 1", False, [4, 5, 6, 7]),
    ]
    assert probes.copy_cases("d2h", 64 << 20, {0: [0, 1]}) == [
        ("pinned 64 MiB", True, None),
        ("pageable 64 MiB", False, None),
    ]


def test_where_the_kernel_does_not_say_the_gpus_node_it_is_unknown() -> None:
    assert probes.near_node({"numa_node": None}).startswith("the kernel does not report the GPU's NUMA node (-1)")
    assert probes.near_node({"numa_node": 1}) == "the GPU's NUMA node is 1"


def test_without_a_driver_the_cuda_probes_skip_with_cudas_own_words() -> None:
    """The real cuda-bindings on a machine with no NVIDIA driver: every copy and launch case is a skip that
    says why, nothing is measured (a GPU named by a fake NVML does not make one)."""
    where = probes.Where(
        None,
        ("NVIDIA H100 80GB HBM3",),
        "small",
        (),
        0,
        gpu_facts=({"pcie_gen_max": 5, "pcie_width_max": 16, "numa_node": None},),
    )
    for probe in ("h2d", "d2h", "d2d", "launch"):
        cases = probes.PROBES[probe](where)
        assert cases and all(isinstance(c, probes.Skip) for c in cases), cases
        assert all("cudaErrorInsufficientDriver" in str(c) or "cudaErrorNoDevice" in str(c) for c in cases), cases
    with pytest.raises(probes.Skip, match="no GPU is visible"):
        probes.h2d(probes.Where(None, (), "small", (), 0))


def test_calibration_doubles_until_a_call_lasts_long_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    calls: list[int] = []

    def call(reps: int) -> None:  # 10 ms a rep on a fake clock
        calls.append(reps)
        clock[0] += 0.01 * reps

    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])
    assert probes.calibrate(call, 0.05) == 8
    assert calls == [1, 1, 2, 4, 8]  # the first, untimed, traces
    case = probes.Case("x", "c", "B/s", 100.0, call)
    got = list(probes.timed(case, "small", 1, 2))
    assert [(i, p) for i, p, _, _ in got] == [(0, "warmup"), (1, "timed"), (2, "timed")]
    assert all(v == [("c", "B/s", pytest.approx(100.0 * 8 / 0.08))] and s == pytest.approx(0.08) for _, _, v, s in got)
    # workers agree on the slowest's time: one worker that is fast alone still stops where the slow one does
    calls.clear()
    assert probes.calibrate(call, 0.05, agree=lambda dt: max(dt, 0.06)) == 1 and calls == [1, 1]


def test_the_disk_probe_reads_a_datasets_files(tmp_path: Path) -> None:
    files = []
    for i, size in enumerate((10_000, 5_000, 0)):
        p = tmp_path / f"f{i}.jpg"
        p.write_bytes(b"x" * size)
        files.append(str(p))
    cases = probes.disk(probes.Where(None, (), "small", tuple(files), 0))
    seq, rand = cases
    assert isinstance(seq, probes.Case) and isinstance(rand, probes.Case)
    assert seq.work == 15_000 and seq.name == "sequential 1 MiB reads of 0.0 MiB" and "dataset" in seq.note
    assert 0 < rand.work <= probes.RANDOM_READS["small"] * probes.BLOCK
    seq.call(1)
    rand.call(1)
    assert seq.cleanup is None  # the dataset is never removed


def test_the_disk_probe_removes_its_scratch_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setitem(probes.SCRATCH_BYTES, "small", 2 << 20)
    seq, _ = probes.disk(probes.Where(None, (), "small", (), 0))
    assert isinstance(seq, probes.Case) and len(list(tmp_path.iterdir())) == 1
    assert seq.work == 2 << 20 and f"scratch file in {tmp_path}" in seq.note
    assert seq.cleanup is not None
    seq.cleanup()
    assert not list(tmp_path.iterdir())


MOUNTS = r"""/dev/vda1 / ext4 rw,relatime 0 0
proc /proc proc rw,nosuid 0 0
tmpfs /tmp tmpfs rw,nosuid,nodev 0 0
overlay /var/lib/docker/overlay2/abc/merged overlay rw,lowerdir=/a:/b 0 0
/dev/vdb1 /mnt/my\040data xfs rw 0 0
/dev/vdb2 /tmp/disk ext4 rw 0 0
"""


@pytest.mark.parametrize(
    ("path", "mount"),
    [
        ("/home/x", ("/", "ext4")),
        ("/tmp/dltestbed-disk-1", ("/tmp", "tmpfs")),
        ("/tmp/disk/f", ("/tmp/disk", "ext4")),
        ("/tmpfoo/x", ("/", "ext4")),
        ("/mnt/my data/c/1.jpg", ("/mnt/my data", "xfs")),
        ("/tmp", ("/tmp", "tmpfs")),
    ],
)
def test_a_files_filesystem_is_the_longest_mount_holding_it(path: str, mount: tuple[str, str]) -> None:
    assert probes.mount_of(path, MOUNTS) == mount
    assert probes.mount_of(path, "") == ("", "unknown")


def test_copies_without_a_gpu_are_skipped_with_the_reason() -> None:
    with pytest.raises(probes.Skip, match="no GPU is visible"):
        probes.h2d(probes.Where(None, (), "small", (), 0))


# -- store, stream, runner


def test_measures_and_skips_are_stored_and_a_schema_3_store_gains_their_tables(results: Path) -> None:
    store = Store.open(results)
    run = make_run(model="micro", mode="probe", batch_size=0, image_size=0)
    store.save_run(run)
    store.add_measure(run.id, MeasureEvent("gemm", "float32 n=256", 0, "timed", 1e10, "FLOP/s", 0.1, 5.0))
    store.add_measure(run.id, MeasureEvent("gemm", "float32 n=256", 0, "timed", 2e10, "FLOP/s", 0.1, 5.0))  # again
    store.add_skip(run.id, SkipEvent("h2d", "", "no GPU"))
    store.close()
    db = sqlite3.connect(results)  # back to schema 3: no measures or skips
    db.executescript("DROP TABLE measures; DROP TABLE skips; PRAGMA user_version=3;")
    db.close()
    again = Store.open(results)
    assert again.measures(run.id) == [] and again.skips(run.id) == []
    again.add_measure(run.id, MeasureEvent("membw", "copy 64 MiB", 0, "timed", 2e10, "B/s", 0.1, 6.0))
    assert [m.value for m in again.measures(run.id)] == [2e10]
    assert sqlite3.connect(results).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_measure_is_one_line_protocol_point() -> None:
    run = make_run(model="micro", mode="probe", batch_size=0, image_size=0)
    line = points.measure_line(run, MeasureEvent("disk", "random 4 KiB reads x256", 2, "timed", 5e7, "B/s", 0.5, 10.0))
    head, fields, ts = line.rsplit(" ", 2)
    assert head.startswith("dltestbed_measure,") and r"case=random\ 4\ KiB\ reads\ x256" in head
    assert "probe=disk" in head and "unit=B/s" in head and "phase=timed" in head
    assert fields == "index=2i,seconds=0.5,value=50000000.0" and ts == str(10 * 10**9)


@pytest.fixture
def replay_micro(monkeypatch: pytest.MonkeyPatch, results: Path):
    def go(path: Path):
        monkeypatch.setenv("REPLAY_FILE", str(path))
        monkeypatch.setattr("dltestbed.runner.workload_argv", lambda t, s: [sys.executable, str(DATA / "replay.py")])
        store = Store.open(results)
        return execute(LocalTarget(python=sys.executable), probe_spec(), store, RunContext(bench_id="b")), store

    return go


def test_a_replayed_micro_run_is_stored_whole(replay_micro) -> None:
    run, store = replay_micro(CAPTURED / "micro_cpu_ok.jsonl")
    assert run.status == "ok" and run.is_probe and run.images_per_sec is None
    assert len(store.measures(run.id)) == run.steps_done == store.runs()[0].steps_done == 27
    assert {(s.probe, s.case) for s in store.skips(run.id)} == {
        ("gemm", "bfloat16"),
        ("gemm", "float16"),
        ("h2d", ""),
        ("d2h", ""),
    }
    assert run.spec["cases"] and run.fingerprint["tensorflow"]


def test_a_micro_run_cut_short_is_failed_and_keeps_its_measures(replay_micro, tmp_path: Path) -> None:
    lines = (CAPTURED / "micro_cpu_ok.jsonl").read_text().splitlines()[:12]
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines) + "\n")
    run, store = replay_micro(cut)
    assert run.status == "failed" and run.reason == "the workload exited without a summary"
    assert 0 < len(store.measures(run.id)) < 27


# -- the report, on known answers


def _probe_run(kind: str, rep: int, values: dict[tuple[str, str], float], arm: str = "") -> tuple:
    run = make_run(
        target_kind=kind,
        repetition=rep,
        model="micro",
        mode="probe",
        batch_size=0,
        image_size=0,
        status="ok",
        arm=arm,
        spec={
            "scale": "small",
            "cases": [
                {
                    "probe": "gemm",
                    "case": "float32 n=512",
                    "headline": True,
                    "limit": 2e11,
                    "limit_source": "2 CPUs x ...",
                    "note": "",
                },
                {
                    "probe": "disk",
                    "case": "seq",
                    "headline": True,
                    "limit": None,
                    "limit_source": "",
                    "note": "dataset; page cache dropped",
                },
            ],
        },
    )
    ms = []
    for (probe, case), v in values.items():
        unit = "FLOP/s" if probe == "gemm" else "B/s"
        # three timed calls: the median is v whatever the outlier; a warm-up call that never counts
        ms += [MeasureEvent(probe, case, 0, "warmup", v / 100, unit, 1.0, 0.0)]
        ms += [MeasureEvent(probe, case, i, "timed", x, unit, 0.1, float(i)) for i, x in enumerate((v, v * 0.2, v), 1)]
    return run, ms


def test_probe_changes_against_bare_metal_have_known_answers() -> None:
    runs, measures = [], {}
    for rep, (g_bm, g_vm, d_bm, d_vm) in enumerate(
        [(100, 99, 1000, 650), (110, 108.9, 1100, 715), (90, 89.1, 900, 585)], 1
    ):
        for kind, g, d in (("bm", g_bm, d_bm), ("vm", g_vm, d_vm)):
            r, ms = _probe_run(kind, rep, {("gemm", "float32 n=512"): g * 1e9, ("disk", "seq"): d * 1e6})
            runs.append(r)
            measures[r.id] = ms
    failed = make_run(target_kind="cbm", model="micro", mode="probe", status="failed", reason="workload exit 1")
    cases, skipped = micro.summarise([*runs, failed], measures, {runs[0].id: [SkipEvent("h2d", "", "no GPU")]})
    by = {(c.key.probe, c.key.target_kind): c for c in cases}
    gemm_vm, disk_vm = by["gemm", "vm"], by["disk", "vm"]
    # every vm repetition is exactly 1 % (gemm) and 35 % (disk) below its bm partner: zero spread, exact answers
    assert gemm_vm.effect is not None and gemm_vm.effect.method == PAIRED_T
    assert gemm_vm.effect.overhead_pct == pytest.approx(1.0) and gemm_vm.effect.lo_pct == pytest.approx(1.0)
    assert disk_vm.effect.overhead_pct == pytest.approx(35.0)  # type: ignore[union-attr]
    assert by["gemm", "bm"].effect is None and by["gemm", "bm"].value.mean == pytest.approx(100e9)
    assert by["gemm", "bm"].fraction == pytest.approx(0.5) and gemm_vm.runs == 3
    assert by["disk", "vm"].limit is None  # no limit where none is known
    assert [(s.target_kind, s.probe) for s in skipped] == [("bm", "h2d"), ("cbm", "all")]
    assert "workload exit 1" in skipped[1].reasons[0]
    text = "\n".join(micro_md.markdown(cases, skipped, []))
    assert "| vm | -1.0 [-1.0, -1.0] | -35.0 [-35.0, -35.0] |" in text  # gemm, disk: the catalogue's order
    assert "| gemm | float32 n=512 | bm | 3 | 100 GFLOP/s | 90 GFLOP/s | 110 GFLOP/s | 50 % | baseline |" in text
    assert "- gemm on bm, vm: 2 CPUs x ..." in text and "| cbm | all | all | run " in text


def test_memory_copies_are_measured_against_bare_metals_best_copy() -> None:
    runs, measures = [], {}
    for kind, one, every in (("bm", 10e9, 20e9), ("cbm", 9e9, 10e9)):
        r, _ = _probe_run(kind, 1, {})
        runs.append(r)
        measures[r.id] = [
            MeasureEvent("membw", case, 1, "timed", v, "B/s", 0.1, 1.0)
            for case, v in (("copy 64 MiB, 1 thread", one), ("copy 64 MiB, all CPUs", every))
        ]
    cases, _ = micro.summarise(runs, measures, {})
    fractions = {(c.key.target_kind, c.key.case): c.fraction for c in cases}
    assert fractions == {
        ("bm", "copy 64 MiB, 1 thread"): 0.5,
        ("bm", "copy 64 MiB, all CPUs"): 1.0,
        ("cbm", "copy 64 MiB, 1 thread"): 0.45,
        ("cbm", "copy 64 MiB, all CPUs"): 0.5,
    }
    assert {c.limit_source for c in cases} == {"the best copy bare metal measured (a measured ceiling)"}


def test_a_latency_is_compared_as_a_rate() -> None:
    runs, measures = [], {}
    for rep in (1, 2, 3):  # vm's latency is twice bare metal's: half the rate, a change of -50 %
        for kind, seconds in (("bm", 1e-3 * rep), ("vm", 2e-3 * rep)):
            r = make_run(
                target_kind=kind,
                repetition=rep,
                model="micro",
                mode="probe",
                status="ok",
                spec={"scale": "small", "cases": []},
            )
            runs.append(r)
            measures[r.id] = [MeasureEvent("net", "latency", 1, "timed", seconds, "s", 0.1, 1.0)]
    cases, _ = micro.summarise(runs, measures, {})
    (vm,) = [c for c in cases if c.key.target_kind == "vm"]
    assert vm.effect is not None and vm.effect.overhead_pct == pytest.approx(50.0)
    assert micro_md.change(vm.effect) == "-50.0 [-50.0, -50.0]"
    assert vm.value.mean == pytest.approx(4e-3)  # shown as measured: seconds


@pytest.mark.parametrize(
    ("value", "unit", "shown"),
    [
        (3.12e7, "B/s", "31.2 MB/s"),
        (2.2e10, "B/s", "22 GB/s"),
        (4.26e12, "B/s", "4.26 TB/s"),  # the H200's device copy: not "4.26e+03 GB/s"
        (4.8e12, "B/s", "4.8 TB/s"),
        (1e12, "B/s", "1 TB/s"),
        (9.99e11, "B/s", "999 GB/s"),
        (5.51e10, "B/s", "55.1 GB/s"),
        (5e5, "B/s", "500 kB/s"),
        (9.2e10, "FLOP/s", "92 GFLOP/s"),
        (6.7e13, "FLOP/s", "67 TFLOP/s"),
        (3.06e-3, "s", "3.06 ms"),
        (4.2e-5, "s", "42 µs"),
        (2.0, "s", "2 s"),
        (7.0, "items", "7 items"),
    ],
)
def test_values_are_shown_in_the_largest_unit_they_reach(value: float, unit: str, shown: str) -> None:
    assert micro_md.show(value, unit) == shown


def _device_copy(gpu: str) -> tuple[list[micro.CaseStats], list[micro.Skipped]]:
    """One bare-metal run's device copy of 4.26 TB/s on a GPU of NVML name `gpu`, summarised."""
    run, _ = _probe_run("bm", 1, {})
    run.fingerprint = {"gpus": [{"index": 0, "name": gpu}]}
    ms = [MeasureEvent("d2d", "device copy 1024 MiB", 1, "timed", 4.26e12, "B/s", 0.5, 1.0)]
    return micro.summarise([run], {run.id: ms}, {})


def test_a_device_copy_is_a_share_of_its_boards_datasheet_bandwidth() -> None:
    (h200,), _ = _device_copy("NVIDIA H200")  # dltestbed/boards/h200-sxm.toml: 4.8 TB/s
    assert h200.limit == pytest.approx(4.8e12) and h200.fraction == pytest.approx(0.8875)
    assert "4.8 TB/s" in h200.limit_source and "h200-sxm" in h200.limit_source
    row = "| d2d | device copy 1024 MiB | bm | 1 | 4.26 TB/s | 4.26 TB/s | 4.26 TB/s | 89 % | baseline |"
    assert row in "\n".join(micro_md.markdown([h200], [], []))
    (unknown,), _ = _device_copy("NVIDIA T4")  # no board file: no share, not a guess
    assert unknown.limit is None and unknown.fraction is None


def test_a_failed_probe_run_without_a_reason_says_so() -> None:
    failed = make_run(model="micro", mode="probe", status="failed", reason=None)
    _, (skipped,) = micro.summarise([failed], {}, {})
    assert skipped.reasons == (f"run {failed.id} failed: no reason recorded",)


def test_unpaired_probe_runs_use_welch_and_one_run_a_side_says_so() -> None:
    runs, measures = [], {}
    for kind, reps in (("bm", (1, 2, 3)), ("cbm", (1, 1))):  # cbm's repetitions do not pair up
        for i, rep in enumerate(reps):
            r, ms = _probe_run(kind, rep, {("disk", "seq"): (100 + i) * 1e6})
            runs.append(r)
            measures[r.id] = ms
    cases, _ = micro.summarise(runs, measures, {})
    (cbm,) = [c for c in cases if c.key.target_kind == "cbm"]
    assert cbm.effect is not None and cbm.effect.method == WELCH_T
    single, ms = _probe_run("vm", 1, {("disk", "seq"): 1e8})
    cases, _ = micro.summarise([*runs, single], {**measures, single.id: ms}, {})
    (vm,) = [c for c in cases if c.key.target_kind == "vm"]
    assert vm.effect is None and vm.why_none == "too few runs for an interval (2 per side)"
    assert math.isclose(vm.value.mean, 1e8)
