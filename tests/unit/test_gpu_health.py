"""A GPU's health: sampled and checked through NVML (a fake serving the H100 captured on a real machine, and
unhealthy cases built from it), judged into findings, causes and a report section."""

from __future__ import annotations

import io
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dltestbed import runner
from dltestbed.config import probe_spec
from dltestbed.report import figures, health, health_md, render
from dltestbed.report import validate as v
from dltestbed.report.analysis import analyse, read
from dltestbed.report.fleet import FleetFlag
from dltestbed.report.keys import GroupKey
from dltestbed.report.validate_init import init_reference
from dltestbed.results import points
from dltestbed.results.records import RunRecord
from dltestbed.results.store import Store
from dltestbed.workload.codec import encode, parse_line
from dltestbed.workload.emit import Emitter
from dltestbed.workload.events import HealthEvent, ResourceEvent, StepEvent
from dltestbed.workload.gpu import Nvml
from dltestbed.workload.micro import run_micro
from dltestbed.workload.sampler import watched
from tests import fakenvml
from tests.conftest import make_run

H100 = fakenvml.h100_text()
BUSY = fakenvml.busy(H100)
GPU = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "sm_clock_max_mhz": 1980}


def _edit(text: str, **paths: str) -> str:
    for path, value in paths.items():
        text = fakenvml.set_value(text, path.replace("__", "/").replace("_", " "), value)
    return text


def _sample(text: str, t: float) -> ResourceEvent:
    """A resource sample as the workload's sampler takes it, from an `nvidia-smi -q` text."""
    return ResourceEvent(t=t, rss_bytes=1, cpu_percent=1.0, gpus=Nvml(fakenvml.FakeNvml(text)).sample(pid=1))


def _checked(before: str, after: str, xids: tuple[tuple[int, int], ...] = ()) -> list[HealthEvent]:
    """The health events a run emits, read from a GPU in the state `before`, then `after` with its XIDs."""
    events: list[HealthEvent] = []
    first = Nvml(fakenvml.FakeNvml(before, xids=xids))
    with watched(first, events.append):
        while first._n.xids:  # the watch takes each XID from the event set
            time.sleep(0.01)
    later = Nvml(fakenvml.FakeNvml(after))
    gpus, unseen = later.health()
    return [events[0], HealthEvent("after", events[1].t, gpus, events[1].xids, unseen)]


def _run(**kw: Any) -> RunRecord:
    fields: dict[str, Any] = {"status": "ok", "images_per_sec": 500.0, "fingerprint": {"gpus": [GPU]}, **kw}
    return make_run(**fields)


def test_the_health_counters_of_the_captured_h100() -> None:
    """Everything a before/after check compares, read from the real capture. The retired-page counters are
    N/A on an H100: it remaps rows instead (every GPU from Ampere on), so they are not asked for, and not
    reported as unseen on every modern GPU."""
    gpus, unseen = Nvml(fakenvml.h100()).health()
    assert gpus == [
        {
            "index": 0,
            "uuid": "GPU-00000000-1111-2222-3333-444444444444",
            "ecc_corrected": 0,
            "ecc_uncorrected": 0,
            "remapped_rows_correctable": 0,
            "remapped_rows_uncorrectable": 0,
            "remapped_rows_pending": 0,
            "remapped_rows_failed": 0,
            "pcie_gen": 5,
            "pcie_gen_max": 5,
            "pcie_width": 16,
            "pcie_width_max": 16,
            "pcie_replays": 0,
            "power_limit_watts": 700.0,
            "clock_reasons": 0x1,
        }
    ]
    assert unseen == []


def test_a_gpu_before_ampere_reports_retired_pages_instead_of_rows() -> None:
    text = _edit(H100, Remapped_Rows__Correctable_Error="N/A", Retired_Pages__Single_Bit_ECC="2")
    text = _edit(text, Retired_Pages__Double_Bit_ECC="0", Retired_Pages__Pending_Page_Blacklist="No")
    (gpu,), unseen = Nvml(fakenvml.FakeNvml(text)).health()
    assert (gpu["retired_pages_sbe"], gpu["retired_pages_dbe"]) == (2, 0) and "remapped_rows_correctable" not in gpu
    assert unseen == []


@pytest.mark.parametrize(
    ("branch", "reasons", "unseen"),
    [
        (580, 0x1, []),  # nvmlDeviceGetCurrentClocksEventReasons
        (525, 0x1, []),  # before R535: the same bits from nvmlDeviceGetCurrentClocksThrottleReasons
        (390, None, ["clock-event reasons: Function Not Found"]),  # neither: said, never taken as "no slowdown"
    ],
)
def test_the_clock_event_reasons_on_older_drivers(branch: int, reasons: int | None, unseen: list[str]) -> None:
    nvml = Nvml(fakenvml.FakeNvml(H100, driver_branch=branch))
    (gpu,), said = nvml.health()
    assert gpu.get("clock_reasons") == reasons and said == unseen
    (sample,) = nvml.sample(pid=1)
    assert sample.get("clock_reasons") == reasons


def test_a_slowdown_that_could_not_be_read_is_not_judged_nor_called_none() -> None:
    """A driver with neither reasons call: the GPU was busy, but the slowdown rule cannot judge it, the table
    shows no slowdown figure, and "no finding" does not claim "no hardware slowdown"."""
    old = fakenvml.FakeNvml(BUSY, driver_branch=390)
    samples = [ResourceEvent(t=float(t), rss_bytes=1, cpu_percent=1.0, gpus=Nvml(old).sample(pid=1)) for t in range(3)]
    events: list[HealthEvent] = []
    with watched(Nvml(fakenvml.FakeNvml(H100, driver_branch=390)), events.append):
        pass
    run = _run()
    (row,) = health.gpus([run], {run.id: samples}, {run.id: events}, [])
    assert row.busy_samples == 3 and row.reasons_read == 0
    a = analyse([run], samples={run.id: samples}, checks={run.id: events})
    judged = v.judge(v.parse_reference("health: {}", "ref.yml"), a)
    slow = next(j for j in judged if j.what == "health.no_hardware_slowdown")
    assert (slow.status, slow.evidence) == ("cannot judge", "clock-event reasons not visible from bm")
    text = "\n".join(health_md.markdown([row], [], [], [], {}))
    assert "no hardware slowdown: cannot judge (h GPU 0: clock-event reasons not visible from bm)" in text
    assert "No finding in what was checked (no XID, no new uncorrectable ECC error, PCIe link at its max)." in text
    assert health_md.row(row).split(" | ")[8] == "—"  # the slowdown cell: not read, so not "none"


def test_a_report_without_health_checks_calls_nothing_clean() -> None:
    """Samples of memory and utilisation only (the H100 store's runs, before health checks): every rule says
    why it cannot judge, none is listed as clean."""
    run = _run()
    bare = [{"index": 0, "memory_used_bytes": 1 << 30, "util_percent": 95.0}]
    samples = [ResourceEvent(t=float(t), rss_bytes=1, cpu_percent=1.0, gpus=bare) for t in range(3)]
    (row,) = health.gpus([run], {run.id: samples}, {}, [])
    text = "\n".join(health_md.markdown([row], [], [], [], {}))
    assert "No finding, and no check made:" in text and "No finding:" not in text
    for words in ("no XID", "no new uncorrectable ECC error", "PCIe link at its max", "no hardware slowdown"):
        assert f"- {words}: cannot judge (h GPU 0: " in text, words


def test_an_xid_during_the_run_is_caught_and_the_events_round_trip() -> None:
    before, after = _checked(H100, H100, xids=((0, 79),))
    assert before.phase == "before" and after.phase == "after"
    assert [(x["index"], x["xid"]) for x in after.xids] == [(0, 79)]
    for ev in (before, after):
        assert parse_line(encode(ev)) == ev  # through the workload's stdout protocol unchanged
    assert isinstance(parse_line(encode(before).replace('"before"', '"during"')), type(parse_line("x")))


def test_where_xid_events_cannot_be_registered_it_is_said_not_assumed_none() -> None:
    events: list[HealthEvent] = []
    with watched(Nvml(fakenvml.FakeNvml(H100, events=False)), events.append):
        pass
    assert events[1].xids == [] and "XID events: Not Supported" in events[1].unseen
    run = _run(target_kind="cbm")
    rows = health.gpus([run], {}, {run.id: events}, [])
    assert rows[0].unseen["XID events"] == ["cbm"]
    assert "XID events (from cbm)" in "\n".join(health_md.markdown(rows, [], [], [], {}))


def test_no_gpu_means_no_health_events() -> None:
    events: list[HealthEvent] = []
    with watched(None, events.append):
        pass
    assert events == []


def test_the_healthy_capture_has_no_finding() -> None:
    run = _run()
    samples = [_sample(BUSY, float(t)) for t in range(5)]
    assert health.findings(run, samples, _checked(H100, H100)) == []


@pytest.mark.parametrize(
    ("after", "xids", "rule", "severity", "words"),
    [
        (_edit(H100, ECC_Errors__Volatile__DRAM_Uncorrectable="2"), (), "ecc_uncorrected", "error", "2 new uncorr"),
        (_edit(H100, ECC_Errors__Volatile__SRAM_Correctable="5"), (), "ecc_corrected", "warning", "5 new corrected"),
        (_edit(H100, Remapped_Rows__Uncorrectable_Error="1"), (), "remapped_rows", "error", "1 new row(s)"),
        (_edit(H100, Remapped_Rows__Remapping_Failure_Occurred="Yes"), (), "remapped_rows", "error", "failed"),
        (_edit(H100, PCI__Replays_Since_Reset="12"), (), "pcie_replays", "warning", "12 new PCIe replay"),
        (H100, ((0, 48),), "xid", "error", "XID 48"),
    ],
)
def test_a_counter_that_moves_during_the_run_is_a_finding(
    after: str, xids: tuple[tuple[int, int], ...], rule: str, severity: str, words: str
) -> None:
    run = _run()
    (f,) = health.findings(run, [_sample(BUSY, 0.0)], _checked(H100, after, xids))
    assert (f.rule, f.severity, f.run_id, f.gpu) == (rule, severity, run.id, 0) and words in f.what


def test_a_link_trained_down_under_load_is_a_finding_an_idle_one_is_not() -> None:
    """Gen4 x8 while busy: the slot, the riser or the card. Gen1 at idle with Gen5 under load: power saving."""
    x8 = _edit(BUSY, PCI__GPU_Link_Info__PCIe_Generation__Current="4", PCI__GPU_Link_Info__Link_Width__Current="8x")
    (f,) = health.findings(_run(), [_sample(x8, 0.0), _sample(x8, 1.0)], _checked(H100, H100))
    assert f.rule == "pcie_link" and f.what == "PCIe link at Gen4 x8 under load, below its max Gen5 x16"
    idle = _edit(H100, PCI__GPU_Link_Info__PCIe_Generation__Current="1")
    assert health.findings(_run(), [_sample(idle, 0.0), _sample(BUSY, 1.0)], _checked(H100, H100)) == []


def test_hardware_slowdown_in_the_busy_samples_is_a_finding() -> None:
    hot = _edit(fakenvml.busy(H100, sm_mhz=990, temp=92), Clocks_Event_Reasons__HW_Thermal_Slowdown="Active")
    samples = [_sample(BUSY, 0.0), _sample(hot, 1.0), _sample(hot, 2.0), _sample(H100, 3.0)]  # the last: idle
    (f,) = health.findings(_run(), samples, _checked(H100, H100))
    assert f.rule == "hardware_slowdown" and f.severity == "error"
    assert f.what == "thermal slowdown (hardware) active in 67 % of busy samples (2 of 3)"


def _slowing(run: RunRecord) -> tuple[list[StepEvent], list[ResourceEvent]]:
    """20 timed steps falling from 100 to 62 images/sec, the GPU at 1980 MHz for the first 8, then held
    at 1650 MHz by a hardware thermal slowdown."""
    steps = [StepEvent(i, "timed", 8, 8 / (100.0 - 2 * i), 100.0 - 2 * i, float(i + 1)) for i in range(20)]
    hot = _edit(fakenvml.busy(H100, sm_mhz=1650, temp=88), Clocks_Event_Reasons__HW_Thermal_Slowdown="Active")
    samples = [_sample(BUSY if t < 8 else hot, float(t) + 0.5) for t in range(20)]
    return steps, samples


def test_a_run_that_slows_down_is_given_its_cause() -> None:
    run = _run(steps=20)
    steps, samples = _slowing(run)
    a = analyse([run], {run.id: steps}, samples={run.id: samples})
    (words,) = [w for w in a.steady[0][1] if w.startswith("slowing down")]
    assert words == (  # the sample at 0.5 s is before the first timed step began: 12 of the 19 after it are hot
        "slowing down: -46.9 % over its timed steps (thermal slowdown (hardware) active in 63 % of samples; "
        "SM clock 1980 → 1650 MHz; temperature 71 → 88 °C)"
    )
    assert "throttling?" not in words
    bare = analyse([run], {run.id: steps})  # no samples: the question stays a question
    assert "(throttling?)" in bare.steady[0][1][0]
    steady = [_sample(BUSY, float(t) + 0.5) for t in range(20)]
    assert health.cause(steady) == "no slowdown reason in the GPU's samples; SM clock steady at 1980 MHz"


def _fleet(clocks: dict[str, int]) -> tuple[list[RunRecord], dict[str, list[ResourceEvent]]]:
    runs, samples = [], {}
    for host, mhz in clocks.items():
        r = _run(host=host, machine=host)
        text = fakenvml.busy(H100, sm_mhz=mhz)
        if mhz < 1900:
            text = _edit(text, Clocks_Event_Reasons__SW_Power_Cap="Active")
        runs.append(r)
        samples[r.id] = [_sample(text, float(t)) for t in range(4)]
    return runs, samples


def test_a_gpu_below_its_peers_is_named_with_its_likely_cause() -> None:
    runs, samples = _fleet({"n1": 1980, "n2": 1975, "n3": 1980, "n4": 1410})
    a = analyse(runs, samples=samples)
    (flag,) = a.gpu_flags
    assert (flag.host, flag.what, flag.value, flag.peers_median) == ("n4", "sm_clock_mhz", 1410, 1980)
    n4 = next(g for g in a.gpus if g.host == "n4")
    assert n4.throttled == {"power cap": 100.0} and n4.sm_clock_mhz == 1410
    slow = FleetFlag(GroupKey.of(runs[3]).without_host(), "n4", 350.0, 500.0, -9.0, 4)
    (cause,) = health_md.likely_causes([slow], a.gpus, a.gpu_flags)
    assert cause.startswith("- n4: n4 GPU 0 (NVIDIA H100 80GB HBM3): SM clock 1410 MHz under load")
    assert cause.endswith("GPU 0: power cap in 100 % of busy samples")


def test_the_report_shows_findings_first_and_the_json_has_them() -> None:
    sick, well = _run(host="n2", machine="n2"), _run(host="n1", machine="n1")
    after = _edit(H100, ECC_Errors__Volatile__DRAM_Uncorrectable="1")
    checks = {sick.id: _checked(H100, after, ((0, 79),)), well.id: _checked(H100, H100)}
    samples = {r.id: [_sample(BUSY, 0.0), _sample(BUSY, 1.0)] for r in (sick, well)}
    a = analyse([well, sick], samples=samples, checks=checks)
    assert [g.host for g in a.gpus] == ["n2", "n1"]  # findings first, though n1 sorts before
    md = render.markdown(a)
    assert "## GPU health" in md and "**2 error(s)**" in md
    assert f"- **error** n2 GPU 0, run {sick.id} (bm alexnet rep 1): XID 79 while the run lasted" in md
    assert (
        "| n1 | 0 | NVIDIA H100 80GB HBM3 | 1 | none | 1980 (1980) | 690 (700) | 71 | none | Gen5 x16 (Gen5 x16)" in md
    )
    out = json.loads(render.as_json(a))["health"]
    assert {f["rule"] for f in out["findings"]} == {"xid", "ecc_uncorrected"}
    assert [g["host"] for g in out["gpus"]] == ["n2", "n1"]
    assert "## GPU health" not in render.markdown(analyse([make_run(status="ok", images_per_sec=9.0)]))


def test_health_events_are_stored_with_their_run(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "r.sqlite")
    run = _run()
    store.save_run(run)
    before, after = _checked(H100, H100, ((0, 13),))
    store.add_health(run.id, after)
    store.add_health(run.id, before)
    assert store.health(run.id) == [before, after]  # before first, whatever the order they came in
    store.close()


def _bench(after: str, xids: tuple[tuple[int, int], ...] = (), sample: str = BUSY, events: bool = True) -> Any:
    """Two ok bm runs on one H100, the second ending in the state `after` with its XIDs."""
    runs = [_run(repetition=i, images_per_sec=500.0 + i) for i in (1, 2)]
    checks = {runs[0].id: _checked(H100, H100), runs[1].id: _checked(H100, after, xids)}
    if not events:
        for r in runs:
            checks[r.id] = [
                HealthEvent(c.phase, c.t, c.gpus, c.xids, ["XID events: Not Supported"]) for c in checks[r.id]
            ]
    samples = {r.id: [_sample(sample, 0.0), _sample(sample, 1.0)] for r in runs}
    return analyse(runs, samples=samples, checks=checks)


def _verdicts(a: Any, rules: str) -> dict[str, str]:
    ref = v.parse_reference(rules, "ref.yml")
    return {j.what: j.status for j in v.judge(ref, a)}


def test_health_rules_fail_a_sick_gpu_whose_throughput_looks_fine() -> None:
    every = "health: {power_limit_watts: 700}"
    assert set(_verdicts(_bench(H100), every).values()) == {"pass"}
    sick = _edit(H100, ECC_Errors__Volatile__DRAM_Uncorrectable="1")
    slow = _edit(
        BUSY, Clocks_Event_Reasons__HW_Power_Brake_Slowdown="Active", PCI__GPU_Link_Info__Link_Width__Current="8x"
    )
    got = _verdicts(_bench(sick, ((0, 79),), slow), every)
    assert got == {
        "health.no_xid": "fail",
        "health.no_new_uncorrectable_ecc": "fail",
        "health.no_hardware_slowdown": "fail",
        "health.pcie_link_at_max": "fail",
        "health.power_limit_watts": "pass",
    }
    assert _verdicts(_bench(H100), "health: {power_limit_watts: 500}")["health.power_limit_watts"] == "fail"
    off = "health: {no_xid: false, no_new_uncorrectable_ecc: false, no_hardware_slowdown: false}"
    assert _verdicts(_bench(sick, ((0, 79),)), off) == {"health.pcie_link_at_max": "pass"}


def test_a_rule_on_what_could_not_be_seen_cannot_be_judged_and_junit_says_so() -> None:
    a = _bench(H100, events=False)
    judged = v.judge(v.parse_reference("health: {}", "ref.yml"), a)
    xid = next(j for j in judged if j.what == "health.no_xid")
    assert (xid.status, xid.evidence) == ("cannot judge", "XID events not visible from bm")
    xml = v.junit_xml(judged)
    assert 'classname="dltestbed.validate.health.no_xid" name="no XID on h GPU 0"><error' in xml
    sampled = _run()  # samples, but no check before and after (a workload from before dltestbed checked)
    only = analyse([sampled], samples={sampled.id: [_sample(BUSY, 0.0)]})
    xid = next(j for j in v.judge(v.parse_reference("health: {}", "ref.yml"), only) if j.what == "health.no_xid")
    assert (xid.status, xid.evidence, only.gpus[0].checked) == (
        "cannot judge",
        "no health check before and after a run",
        0,
    )
    none = v.judge(v.parse_reference("health: {}", "ref.yml"), analyse([make_run(status="ok", images_per_sec=9.0)]))
    assert [(j.name, j.status) for j in none] == [("GPU health", "cannot judge")]


def test_init_writes_health_rules_that_validate_accepts_and_passes() -> None:
    a = _bench(H100)
    ref = init_reference(a)
    assert ref["health"] == {
        "no_xid": True,
        "no_new_uncorrectable_ecc": True,
        "no_hardware_slowdown": True,
        "pcie_link_at_max": True,
        "power_limit_watts": 700.0,
    }
    parsed = v.Reference.model_validate(ref)
    assert {j.status for j in v.judge(parsed, a) if j.what.startswith("health")} == {"pass"}


def test_from_the_workload_to_the_report_an_xid_on_a_micro_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The workload (membw probe, no TensorFlow) on the fake H100 that logs XID 79 mid-run: its health events go
    through the stdout protocol into the runner's collector and the store, and the report names the XID."""
    monkeypatch.setitem(sys.modules, "pynvml", fakenvml.h100(util=None, xids=((0, 79),)))
    out = io.StringIO()
    run_micro(probe_spec(probes=("membw",), warmup=1, steps=2, sample_interval=0.05), Emitter(out))
    store = Store.open(tmp_path / "r.sqlite")
    run = _run(model="micro", mode="probe")
    store.save_run(run)
    collect = runner._Collector(run, store, runner.NullObserver())
    for line in out.getvalue().splitlines():
        collect.on_line(line)
    assert collect.unparsed == []
    before, after = store.health(run.id)
    assert (before.phase, after.phase, [x["xid"] for x in after.xids]) == ("before", "after", [79])
    assert len(store.resources(run.id)) >= 2 and "sm_clock_mhz" in store.resources(run.id)[0].gpus[0]
    a = read(store, store.runs())
    assert [(f.rule, f.run_id) for f in a.findings] == [("xid", run.id)] and a.gpus[0].runs == 1
    store.close()


def test_the_gpu_figure_puts_the_clock_beside_the_steps() -> None:
    run = _run(steps=20)
    steps, samples = _slowing(run)
    a = analyse([run], {run.id: steps}, samples={run.id: samples})
    ((label, fig),) = figures.gpu_state(a.runs, a.samples, a.steps)
    assert "alexnet" in label
    rows = [ax.get_ylabel() for ax in fig.axes]
    assert rows == ["images/sec per timed step", "SM clock, MHz", "power, W", "temperature, °C"]
    ips, clock = fig.axes[0].lines[0].get_ydata(), fig.axes[1].lines[0].get_ydata()
    assert (max(ips), min(ips)) == pytest.approx((100.0, 62.0), abs=1.5)  # on the samples' grid: interpolated
    assert (max(clock), min(clock)) == (1980, 1650)
    plots = [p for p in figures.build(a) if p.section == "gpu"]
    assert [p.name for p in plots] == ["gpu-1"] and "SM clock" in plots[0].caption
    cpu = {run.id: [ResourceEvent(t=float(t), rss_bytes=1, cpu_percent=1.0) for t in range(5)]}
    assert figures.gpu_state(a.runs, cpu, a.steps) == []  # no GPU samples: no GPU figure


def test_the_new_samples_stream_as_fields_of_the_resource_point() -> None:
    line = points.resource_line(_run(), _sample(BUSY, 1.0))
    for field in ("gpu0_sm_clock_mhz=1980.0", "gpu0_power_watts=690.0", "gpu0_temperature_c=71.0"):
        assert field in line
    assert "gpu0_clock_reasons=0.0" in line and "gpu0_pcie_tx_bytes_per_s=" in line
