"""Acceptance's pure parts on known answers: the node verdicts (peers, the second pass, failed runs, drift, GPUs),
the facts read from fingerprints (the fake NVML serving the captured H100, made eight), the GPU evidence of an
unhealthy node, the pack's JUnit, the levels, the state kept for --resume, and the CLI's one-line refusals."""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from dltestbed import expected
from dltestbed.accept import facts, golden, gpus, judge, levels, pack, retest, slowness, stages
from dltestbed.accept.state import StageRecord, State
from dltestbed.errors import ConfigError
from dltestbed.expected import shipped, with_site
from dltestbed.panels import seconds
from dltestbed.report import drift
from dltestbed.report.gpu_evidence import MEASURES, GpuVerdict, Reason
from dltestbed.report.gpu_verdicts import exit_code
from dltestbed.report.gpu_verdicts import judge as judge_gpus
from dltestbed.report.verdicts import FAIL, PASS, UNDECIDED, WARN
from dltestbed.results.store import Store
from dltestbed.workload.events import HealthEvent, ResourceEvent
from dltestbed.workload.gpu import Nvml
from tests import fakenvml
from tests.conftest import run_cli
from tests.h100data import H100, H100_NAME

NODES = ("n1", "n2", "n3", "n4")
FIRST = {"alexnet img/s": {"n1": 100.0, "n2": 103.0, "n3": 98.0, "n4": 50.0}}


def _one(verdicts: list[judge.NodeVerdict], node: str) -> judge.NodeVerdict:
    return next(v for v in verdicts if v.node == node)


def _kept(v: judge.NodeVerdict) -> tuple[Reason, ...]:
    """Its reasons that did not pass (every check made is a reason: the passes too)."""
    return tuple(r for r in v.reasons if r.verdict != PASS)


BESIDE = {"alexnet img/s": {"n1": 100.0, "n2": 104.0, "n3": 98.0}}  # the controls, measured beside the suspect


def test_a_slow_node_fails_only_when_its_controls_confirm_it() -> None:
    confirmed = judge.judge(
        judge.Findings(
            NODES,
            measures=FIRST,
            second={"alexnet img/s": {"n4": 52.0}},
            controls={"n4": BESIDE},
            causes={"n4": "a CPU hog"},
        )
    )
    assert [v.verdict for v in confirmed] == [PASS, PASS, PASS, FAIL]
    (r,) = _kept(_one(confirmed, "n4"))
    assert r.why.startswith("alexnet img/s 50 % below its 3 peers' median")
    said = "the second pass measured it 48 % below the median of its controls n1, n2, n3, measured at the same time"
    assert said in r.why and r.why.endswith("cause: a CPU hog")
    assert r.evidence == "first 50, second 52, controls' median 100 (n1 100, n2 104, n3 98)"
    assert r.action.startswith("drain the node")
    assert _one(confirmed, "n4").summary == "slow: alexnet img/s 50 % below its peers, in both passes; cause: a CPU hog"
    cleared = judge.judge(
        judge.Findings(NODES, measures=FIRST, second={"alexnet img/s": {"n4": 99.0}}, controls={"n4": BESIDE})
    )
    (alexnet,) = [r for r in _one(cleared, "n4").reasons if r.check == "alexnet img/s"]
    assert _one(cleared, "n4").verdict == PASS and "cleared by the second pass: 1 % below the median" in alexnet.why
    n1 = [(r.check, r.verdict) for r in _one(cleared, "n1").reasons]  # the checks it passed are listed too
    assert n1 == [("runs", PASS), ("alexnet img/s", PASS)]
    unmeasured = judge.judge(judge.Findings(NODES, measures=FIRST))
    assert _one(unmeasured, "n4").verdict == UNDECIDED
    assert exit_code(confirmed) == 1 and exit_code(cleared) == 0 and exit_code(unmeasured) == 3


def test_a_suspect_is_judged_by_its_controls_not_by_the_first_pass() -> None:
    """The second pass ran slower for every node (a busier fabric, shared cores): the suspect at 58 is 42 % below
    its peers' first-pass median, yet 3 % below its controls' 60 measured beside it: cleared. Against the first
    pass it would have failed; against controls that ran faster than it by 30 % it fails."""
    busy = {"alexnet img/s": {"n1": 60.0, "n2": 61.0, "n3": 59.0}}
    cleared = judge.judge(
        judge.Findings(NODES, measures=FIRST, second={"alexnet img/s": {"n4": 58.0}}, controls={"n4": busy})
    )
    assert _one(cleared, "n4").verdict == PASS
    (alexnet,) = [r for r in _one(cleared, "n4").reasons if r.check == "alexnet img/s"]
    assert "3 % below the median of its controls n1, n2, n3, measured at the same time" in alexnet.why
    one_by_one = judge.judge(
        judge.Findings(
            NODES, measures=FIRST, second={"alexnet img/s": {"n4": 42.0}}, controls={"n4": busy}, together=False
        )
    )
    (slow,) = _kept(_one(one_by_one, "n4"))
    assert slow.verdict == FAIL and "30 % below" in slow.why and "one after another (--no-parallel)" in slow.why
    alone = {"alexnet img/s": {"n1": 100.0}}  # one control: the suspicion cannot be confirmed
    few = judge.judge(
        judge.Findings(NODES, measures=FIRST, second={"alexnet img/s": {"n4": 20.0}}, controls={"n4": alone})
    )
    (r,) = _kept(_one(few, "n4"))
    assert r.verdict == UNDECIDED and "cannot be confirmed: 1 known-good node(s) ran beside it" in r.why


def test_a_node_left_out_is_judged_alone_and_the_rest_as_before() -> None:
    nodes = (*NODES, "n5", "n6")
    out = {"n5": ("provision", "unreachable: ssh: connect to host 10.0.0.5 port 22: No route to host")}
    out["n6"] = ("preflight", "n6 did not answer when the bench began: timed out")
    f = judge.Findings(nodes, measures=FIRST, second={"alexnet img/s": {"n4": 52.0}}, controls={"n4": BESIDE}, out=out)
    verdicts = judge.judge(f)
    assert [v.verdict for v in verdicts] == [PASS, PASS, PASS, FAIL, UNDECIDED, UNDECIDED]
    (n5,) = _one(verdicts, "n5").reasons
    assert n5.check == "stage provision" and n5.verdict == UNDECIDED
    assert n5.why == f"not measured: left out at stage provision: {out['n5'][1]}"
    assert "accept --resume" in n5.action
    healthy = judge.judge(judge.Findings(nodes, measures={"m": {"n1": 1.0, "n2": 1.0, "n3": 1.0, "n4": 1.0}}, out=out))
    assert exit_code(healthy) == 3  # the 4 pass; the 2 left out cannot be judged
    failing = judge.judge(judge.Findings(nodes, measures={"m": {n: 1.0 for n in NODES}}, out=out, out_verdict=FAIL))
    assert [v.verdict for v in failing] == [PASS] * 4 + [FAIL] * 2 and exit_code(failing) == 1
    three = judge.judge(judge.Findings(("n1", "n2", "n5"), measures={"m": {"n1": 1.0, "n2": 1.0}}, out=out))
    assert "2 node(s): its measures (m) have no peers" in _kept(three[0])[0].why  # only the measured are peers


def test_a_node_mended_and_resumed_is_judged_against_the_controls_beside_it() -> None:
    nodes = (*NODES, "n5")
    mended = {"alexnet img/s": {"n5": 97.0}}
    ok = judge.judge(judge.Findings(nodes, measures=FIRST, second=mended, controls={"n5": BESIDE}, rejoined=("n5",)))
    (r,) = [r for r in _one(ok, "n5").reasons if r.check == "alexnet img/s"]
    assert r.verdict == PASS and r.why.startswith("alexnet img/s once mended (--resume): 3 % below the median")
    assert r.evidence == "once mended 97, controls' median 100 (n1 100, n2 104, n3 98)"
    slow = {"alexnet img/s": {"n5": 60.0}}
    bad = judge.judge(judge.Findings(nodes, measures=FIRST, second=slow, controls={"n5": BESIDE}, rejoined=("n5",)))
    assert (
        _one(bad, "n5").verdict == FAIL
        and "40 % below the median of its controls n1, n2, n3" in _kept(_one(bad, "n5"))[0].why
    )
    unmeasured = judge.judge(judge.Findings(nodes, measures=FIRST, rejoined=("n5",)))
    assert _one(unmeasured, "n5").verdict == UNDECIDED


def test_a_mended_node_slow_beside_its_controls_fails_only_when_slow_again_beside_them() -> None:
    nodes = (*NODES, "n5")
    slow = {"alexnet img/s": {"n5": 75.0}}  # 25 % below its controls' median: one round of noise, or a fault

    def mended(again: float, controls: dict[str, float] = BESIDE["alexnet img/s"]) -> judge.Reason:
        f = judge.Findings(
            nodes,
            measures=FIRST,
            second=slow,
            controls={"n5": BESIDE},
            rejoined=("n5",),
            slowdown=20,
            again={"alexnet img/s": {"n5": again}},
            controls_again={"n5": {"alexnet img/s": controls}},
        )
        (r,) = [r for r in _one(judge.judge(f), "n5").reasons if r.check == "alexnet img/s"]
        return r

    cleared = mended(102.0, {"n1": 99.0, "n2": 101.0})
    assert cleared.verdict == PASS
    assert cleared.why.startswith("alexnet img/s once mended (--resume): 25 % below the median of its controls")
    assert "; cleared when measured again: 2 % above the median of its controls n1, n2" in cleared.why
    assert cleared.evidence == "once mended 75, again 102, controls' median 100 (n1 99, n2 101)"
    failed = mended(70.0)
    assert failed.verdict == FAIL and "; and again: 30 % below the median of its controls n1, n2, n3" in failed.why
    few = mended(70.0, {"n1": 99.0})
    assert few.verdict == UNDECIDED and "measured again, fewer than 2 known-good nodes ran beside it" in few.why
    # what the stage measures again: a node slow in any measure beside enough controls, by the same bar
    measured = {"m": {"a": 79.0, "b": 81.0, "c1": 100.0, "c2": 100.0}, "k": {"a": 10.0, "b": 5.0, "c1": 10.0}}
    assert slowness.slow_beside(measured, ["a", "b"], ["c1", "c2"], 20) == ["a"]  # k: one control alone judges none
    assert slowness.slow_beside(measured, ["a", "b"], ["c1", "c2"], 22) == []


def test_the_second_pass_batches_controls_and_pairs_rounds() -> None:
    first = {"m": {"n1": 100.0, "n2": 90.0, "n3": 101.0, "n4": 99.0, "n5": 50.0}, "k": {"n1": 10.0, "n3": 10.0}}
    assert retest.choose_controls(first, ["n1", "n2", "n3", "n4"], 3) == ["n4", "n1", "n3"]  # nearest the medians
    assert retest.choose_controls(first, ["n2"], 3) == ["n2"]
    assert retest.batches_of(["a", "b", "c"], ["x", "y", "z"], None) == retest.Batches(
        ["x", "y", "z"], [["a", "b", "c"]], True
    )
    assert retest.batches_of(["a", "b", "c"], ["x", "y", "z"], 5).batches == [["a", "b"], ["c"]]
    assert retest.batches_of(["a"], ["x", "y", "z"], 3) == retest.Batches(["x", "y"], [["a"]], True)
    assert retest.batches_of(["a", "b"], ["x", "y"], 1) == retest.Batches(["x", "y"], [["a", "b"]], False)
    assert retest.batches_of([], ["x", "y"], None).batches == []  # no suspect: nothing again
    from dltestbed.orchestrate.scenarios.distributed import rounds_of

    pairs = [("n1", "n2"), ("n3", "n4"), ("n5", "n1")]  # five nodes: the odd one with the first, after
    assert rounds_of(pairs) == [[0, 1], [2]]
    assert rounds_of([("a", "b"), ("c", "d"), ("e", "f")], 4) == [[0, 1], [2]]  # --parallel 4: two pairs a round
    assert rounds_of([("a", "b"), ("c", "d")], 1) == [[0], [1]]  # one at a time
    assert [list(p) for p in stages.pairs_of(("n1", "n2", "n3", "n4", "n5"))] == [list(p) for p in pairs]


def test_the_bar_is_the_users_and_two_nodes_leave_the_peers_out() -> None:
    mild = {"m": {"n1": 100.0, "n2": 101.0, "n3": 99.0, "n4": 80.0}}
    assert [s.node for s in slowness.suspects(mild, 5.0)] == ["n4"]
    assert slowness.suspects(mild, 25.0) == []
    two = judge.judge(judge.Findings(("n1", "n2"), measures={"m": {"n1": 100.0, "n2": 50.0}}))
    assert [v.verdict for v in two] == [UNDECIDED, UNDECIDED]  # CPU nodes: nothing else judges their speed
    assert [(r.check, r.verdict) for r in two[1].reasons] == [("runs", PASS), ("peers", UNDECIDED)]
    assert "2 node(s): its measures (m) have no peers to be compared with" in two[1].reasons[1].why
    board = GpuVerdict("n1:0", "NVIDIA H200", "h200-sxm", PASS, (Reason("gemm_tf32", PASS, "at 1.00 of …"),))
    gpu_nodes = judge.judge(judge.Findings(("n1",), measures={"m": {"n1": 100.0}}, gpus=[board]))
    assert gpu_nodes[0].verdict == PASS  # a GPU node alone: its GPUs judged against their board, its peers left out
    partly = judge.judge(judge.Findings(NODES, measures={"m": {"n1": 100.0, "n2": 50.0}}))  # 2 of 4 measured it
    assert [v.verdict for v in partly] == [UNDECIDED, UNDECIDED, PASS, PASS]
    assert "a peer comparison needs 3" in _kept(partly[0])[0].why


def test_failed_runs_fail_twice_warn_once_and_everywhere_cannot_judge() -> None:
    twice = judge.judge(judge.Findings(NODES, failed={"n2": "boom"}, failed_second={"n2": "boom again"}))
    assert _one(twice, "n2").verdict == FAIL and "both passes" in _one(twice, "n2").reasons[0].why
    once = judge.judge(judge.Findings(NODES, failed={"n2": "boom"}, failed_second={"n2": None}))
    assert _one(once, "n2").verdict == WARN and exit_code(once) == 0
    every = judge.judge(
        judge.Findings(NODES, failed={n: "no module" for n in NODES}, failed_second={n: "no module" for n in NODES})
    )
    assert {v.verdict for v in every} == {UNDECIDED}


def test_drift_fails_the_node_with_what_the_fleet_has() -> None:
    found = {n: {"driver": "580.159.04", "tensorflow": "2.21.0"} for n in NODES}
    found["n3"] = {"driver": "580.159.04", "tensorflow": "2.19.1"}
    verdicts = judge.judge(judge.Findings(NODES, drifts=drift.drift(found)))
    n3 = _one(verdicts, "n3")
    assert n3.verdict == FAIL and n3.summary == "TensorFlow 2.19.1, where 3 of 4 nodes have 2.21.0"
    assert n3.reasons[0].action.startswith("install the fleet's")
    assert [v.verdict for v in verdicts if v.node != "n3"] == [PASS] * 3


def _devices(smi: str) -> list[dict]:
    return Nvml(fakenvml.FakeNvml(smi)).devices()


def test_node_facts_from_eight_captured_gpus_and_the_package_metadata() -> None:
    eight = fakenvml.several(fakenvml.h100_text(), 8)
    fp = {"kernel": "6.8.0", "gpus": _devices(eight), "packages": {"tensorflow-cpu": "2.21.0", "dltestbed": "0.1.0"}}
    got = facts.node_facts(fp)
    assert got == {
        "gpu_count": "8",
        "driver": "580.159.04",
        "cuda": got["cuda"],
        "vbios": "96.00.DA.00.0C",
        "pcie_max": "Gen5 x16",
        "ecc_mode": got["ecc_mode"],
        "mig_mode": got["mig_mode"],
        "power_limit_w": "700 W",
        "kernel": "6.8.0",
        "tensorflow": "2.21.0",
        "dltestbed": "0.1.0",
    }
    assert got["cuda"].startswith("13.") or got["cuda"].startswith("12.")
    capped = fakenvml.set_value(eight, "GPU Power Readings/Current Power Limit", "490.00 W", gpu=5)
    assert facts.node_facts({"gpus": _devices(capped)})["power_limit_w"] == "490 W, 700 W"
    assert facts.node_facts({"kernel": "6.1", "gpus": []}) == {"kernel": "6.1"}  # a CPU node: no GPU facts


def test_a_link_trained_down_xid_79_a_power_cap_and_an_uncorrectable_error_each_fail_their_gpu() -> None:
    eight = fakenvml.several(fakenvml.busy(fakenvml.h100_text()), 8)  # under load: an idle link says nothing
    down = fakenvml.set_value(eight, "PCI/GPU Link Info/PCIe Generation/Current", "3", gpu=2)
    down = fakenvml.set_value(down, "PCI/GPU Link Info/Link Width/Current", "8x", gpu=2)
    down = fakenvml.set_value(down, "GPU Power Readings/Current Power Limit", "490.00 W", gpu=4)  # 30 % below
    devices = _devices(down)
    counters = [{"index": i, "ecc_uncorrected": 1 if i == 6 else 0} for i in range(8)]
    health = [HealthEvent("after", 0.0, counters, xids=[{"index": 3, "xid": 79, "t": 1.0}])]
    samples = [ResourceEvent(float(t), 1, 100.0, Nvml(fakenvml.FakeNvml(down)).sample()) for t in range(3)]
    found = [facts.gpu_evidence("n1", i, devices[i], health, samples, {}, {}) for i in range(8)]
    idle = facts.gpu_evidence("n1", 2, devices[2], health, [], {}, {})
    assert "pcie_gen" not in idle.facts  # not read under load: cannot judge, never the idle link's
    assert found[2].facts["pcie_gen"] == 3 and found[2].facts["pcie_width"] == 8 and found[3].xids == (79,)
    gpus = judge_gpus(found, shipped())
    assert [g.verdict for g in gpus] == [PASS, PASS, FAIL, FAIL, FAIL, PASS, FAIL, PASS]
    node = judge.judge(judge.Findings(("n1",), gpus=gpus))[0]
    assert node.verdict == FAIL and len(node.gpus) == 8
    assert [r.check for r in _kept(node)] == ["gpu n1:2", "gpu n1:3", "gpu n1:4", "gpu n1:6"]
    assert [r.check for r in node.reasons if r.verdict == PASS] == ["gpu n1:0", "gpu n1:1", "gpu n1:5", "gpu n1:7"]
    why = [r.why for r in _kept(node)]
    assert "Gen3 x8" in why[0] and "uncorrectable" in why[3] and "power limit 490 W, 30 % below" in why[2]
    assert "power-cycle" in _kept(node)[1].action  # XID 79: fallen off the bus


def test_what_explains_a_slow_cpu_node() -> None:
    def samples(pct: float) -> list[ResourceEvent]:
        return [ResourceEvent(t=float(i), rss_bytes=1, cpu_percent=0.0 if i == 0 else pct) for i in range(5)]

    assert facts.cpu_share(samples(48.0), 1) == pytest.approx(0.48)
    assert facts.cpu_share(samples(48.0), None) is None
    from dltestbed.results.records import RunRecord

    run = RunRecord("r", "b", "t", "single", "bm", "bm", "n4", "alexnet", "synthetic", "train", "cpu", 8, 64, 3, 20, 1)
    run.fingerprint = {"cpu_affinity": 1}
    said = facts.slow_cause(run, samples(48.0), 0.97)
    assert said == (
        "its workload had 48 % of its 1 CPU(s), its peers' 97 %: something else on the node competes for them"
    )
    assert "competes" not in facts.slow_cause(run, samples(95.0), 0.97)


def test_the_pack_lists_every_check_with_its_verdict_and_what_was_left_out(tmp_path: Path) -> None:
    """The H200's store judged as a lone local node: the JUnit has a testcase for every check of the node and its
    GPU (each pass a passing case), verdict.json holds the same checks and their counts, the page a row for each;
    the checks left out (peers, pairs, drift) are skipped cases, never passes."""
    store = Store.open(Path(__file__).parents[1] / "data" / "gpu" / "h200" / "accept-init.sqlite", read_only=True)
    try:
        gpu_verdicts = gpus.verdicts(store, store.runs(), None)
    finally:
        store.close()
    left = [judge.LeftOut("peers", "1 node(s): …"), judge.LeftOut("stage pairs", "one node: no pair")]
    f = judge.Findings(("vm",), compared={"vm": ["driver", "kernel"]}, gpus=gpu_verdicts, left_out=left)
    nodes = judge.judge(f)
    summary = {"id": "a", "outcome": "1 pass", "level": "quick", "inventory": "i", "dltestbed": "0",
               "started_at": "s", "finished_at": "f", "sensitivity": "s"}  # fmt: skip
    inv = tmp_path / "local.yml"
    inv.write_text("all: {hosts: {vm: {ansible_connection: local}}}\n")
    pack.write(tmp_path / "pack", summary, nodes, {}, inv, [], left)
    made = pack.every_check(nodes)
    (gpu,) = gpu_verdicts
    assert len(made) == len(gpu.reasons) + 1 == 15  # 5 facts + 9 measures of the GPU; its node's drift
    cases = [c for c in ET.parse(tmp_path / "pack" / pack.JUNIT).getroot().iter("testcase")]
    passed = [c for c in cases if c[0].tag not in ("skipped", "failure", "error")]
    assert len(passed) == len(made) == sum(r.verdict == PASS for _, r in made)
    assert [c.get("name") for c in cases if c[0].tag == "skipped"] == ["peers", "stage pairs"]
    doc = json.loads((tmp_path / "pack" / pack.VERDICT).read_text())
    listed = [r for n in doc["nodes"] for r in n["reasons"] if not r["check"].startswith("gpu ")]
    listed += [r for n in doc["nodes"] for g in n["gpus"] for r in g["reasons"]]
    assert len(listed) == len(made) and doc["checks"] == {PASS: 15, WARN: 0, FAIL: 0, UNDECIDED: 0, "skipped": 2}
    assert [x["check"] for x in doc["left_out"]] == ["peers", "stage pairs"]
    page = (tmp_path / "pack" / pack.PAGE).read_text()
    assert page.count("<tr>\n<td>") == len(made) + len(nodes)  # a row per check, and the verdicts' table
    assert "Checks: 15 pass, 0 warn, 0 fail, 0 cannot judge, 2 skipped." in page and "one node: no pair" in page


def test_the_junit_never_counts_cannot_judge_as_a_pass() -> None:
    nodes = [
        judge.NodeVerdict("n1", PASS, ()),
        judge.NodeVerdict("n2", FAIL, (Reason("drift kernel", FAIL, "kernel 6.1", "install it"),)),
        judge.NodeVerdict("n3", UNDECIDED, (Reason("pairs", UNDECIDED, "no known-good node"),)),
    ]
    root = ET.fromstring(pack.junit(nodes))
    suites = {s.get("name"): s for s in root}
    assert suites["node n1"].get("failures") == "0" and suites["node n1"].get("errors") == "0"
    assert suites["node n2"].get("failures") == "1"
    assert suites["node n3"].get("errors") == "1"
    assert "cannot judge" in pack.page(
        {
            "id": "a",
            "outcome": "x",
            "level": "quick",
            "inventory": "i",
            "dltestbed": "0",
            "started_at": "s",
            "finished_at": "f",
            "sensitivity": "s",
        },
        nodes,
    )


def test_the_page_shows_names_and_reasons_as_written_never_as_markup() -> None:
    """The pack's page goes through the report's renderer: a reason's or a node's Markdown or HTML characters are
    shown as they are, in the cell they belong to."""
    why = "**bold** _it_ `code` [link](http://x) <b>tag</b> a | b \\ 1. # done"
    nodes = [judge.NodeVerdict("n|1", FAIL, (Reason("drift kernel", FAIL, why, "install <it>"),))]
    summary = dict.fromkeys(("id", "outcome", "level", "inventory", "dltestbed", "started_at", "finished_at"), "x")
    page = pack.page({**summary, "sensitivity": "s"}, nodes)
    assert not any(tag in page for tag in ("<strong>bold", "<em>it", "<code>code", '<a href="http', "<b>tag", "<it>"))
    assert html.escape(why, quote=False) in page and '<h2 id="n-1-fail">n|1: fail</h2>' in page
    assert "default-src 'none'" in page  # the report's page: it loads nothing


def test_levels_and_durations() -> None:
    assert levels.level("quick").repeat == 1 and levels.level("burn-in").hold_seconds == 4 * 3600
    assert seconds("90s") == 90 and seconds("30m") == 1800 and seconds("4h") == 14400 and seconds(None) is None
    for bad in ("soon", "-1h", "0", "inf", "nan"):
        with pytest.raises(ConfigError):
            seconds(bad)
    with pytest.raises(ConfigError, match="known: quick, standard, burn-in"):
        levels.level("fast")
    assert stages.pairs_of(["a", "b", "c"]) == [("a", "b"), ("c", "a")]
    assert stages.pairs_of(["a", "b", "c", "d"]) == [("a", "b"), ("c", "d")]
    assert list(stages.STAGES) == [
        "provision",
        "preflight",
        "measure",
        "node",
        "pairs",
        "fleet",
        "second",
        "hold",
        "rejoin",
    ]


def test_state_is_kept_and_resumed_only_for_the_same_request(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no acceptance to resume"):
        State.begin(tmp_path, "r1", resume=True)
    st, resumed = State.begin(tmp_path, "r1", resume=False)
    assert not resumed
    st.record("provision", StageRecord("k0"))
    st.record("preflight", StageRecord("k1", ["b-1"], {"facts": {}}))
    again, resumed = State.begin(tmp_path, "r1", resume=True)
    assert resumed and again.id == st.id and again.finished("preflight", "k1") is not None
    assert again.finished("preflight", "other") is None and again.benches() == ["b-1"]
    with pytest.raises(ConfigError, match="other inputs"):
        State.begin(tmp_path, "r2", resume=True)
    new, _ = State.begin(tmp_path, "r2", resume=False)  # a new acceptance keeps the provisioning that passed
    assert new.id != st.id and list(new.stages) == ["provision"]
    (tmp_path / "accept-state.json").write_text("{")
    with pytest.raises(ConfigError, match="cannot be read"):
        State.begin(tmp_path, "r1", resume=True)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--inventory", "/nonexistent.yml"], "/nonexistent.yml"),
        (["--level", "fast"], "--level 'fast': unknown"),
        (["--skip", "lunch"], "--skip 'lunch': no such stage"),
        (["--on-fail", "notify {nodes}"], "unknown placeholder {nodes}"),
        (["--hold", "soon"], "--hold 'soon'"),
        (["--sign-key", "/nonexistent-key"], "--sign-key '/nonexistent-key': it cannot sign: no such file"),
        (["--init"], "--expected FILE: where to write"),
        (["--skip", "measure"], "--skip measure: the verdict needs it"),
        (["--init", "--expected", "site.toml"], "--level quick runs the model once"),
        (["--parallel", "0"], "--parallel 0: give how many nodes at once, 1 or more"),
        (["--unreachable", "ignore"], "--unreachable 'ignore': give cannot-judge or fail"),
    ],
)
def test_bad_input_is_one_line_before_any_node_is_touched(tmp_path: Path, args: list[str], said: str) -> None:
    inv = tmp_path / "inv.yml"
    inv.write_text("all:\n  children:\n    bare_metal:\n      hosts:\n        n1: {ansible_host: 192.0.2.1}\n")
    argv = ["accept", "--inventory", str(inv), "--out", str(tmp_path / "pack"), *args]
    proc = run_cli(*argv)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], proc.stderr
    assert not (tmp_path / "pack").exists()


def test_the_captured_h100_store_is_read_but_not_judged_against_other_sizes(tmp_path: Path) -> None:
    """The H100's stored runs (2026-11-24): its GEMMs were probed at n ≤ 4096 then, and a board's GEMM is judged at
    n = 8192, so they are not read; its ResNet-50 ran at batch 32 in float32, not in the gpu preset; ECC, the link
    the power limit and XIDs were not read then; and its board holds datasheet values only (its figures from a bare
    burst were removed). So the GPU cannot be judged: never a pass, never a false fail. Its memory is checked."""
    store_file = tmp_path / "results.sqlite"
    shutil.copyfile(H100 / "results.sqlite", store_file)
    store = Store.open(store_file)  # upgraded to today's schema
    try:
        runs = store.runs()
        (ev,), wrong = gpus.evidence(store, runs)
        (verdict,) = gpus.verdicts(store, runs, None)
    finally:
        store.close()
    assert wrong == {} and ev.gpu == "vm:0" and ev.name == "NVIDIA H100 80GB HBM3"
    assert ev.facts == {"memory_total_bytes": 85520809984.0} and ev.measures == {}
    assert verdict.board == "h100-sxm" and verdict.verdict == UNDECIDED
    assert {r.check: r.verdict for r in verdict.reasons} == {
        "xid": UNDECIDED, "ecc": UNDECIDED, "pcie": UNDECIDED, "power": UNDECIDED, "memory": PASS,
    }  # fmt: skip


def _stored_node(store: Store, node: str, slow_gpu: int | None) -> None:
    """A node of eight H100s as acceptance's measure stage stores it: a per-GPU micro run and a gpu-preset
    ResNet-50 run on each GPU, with today's case names, at the captured H100's figures (one GPU 15 % slower),
    their NVML facts (the fake NVML serving the captured GPU, made eight) and health counters after."""
    from dltestbed.results.records import RunRecord
    from dltestbed.workload.events import MeasureEvent
    from tests.h100data import captured

    c = captured()
    busy = fakenvml.several(fakenvml.busy(fakenvml.h100_text()), 8)
    devices = _devices(busy)
    sampled = Nvml(fakenvml.FakeNvml(busy)).sample()
    for i, dev in enumerate(devices):
        k = 0.85 if i == slow_gpu else 1.0
        cases = {f"gemm {m} n=8192": c[f"gemm_{m}"] * 1e12 for m in ("float32", "tf32", "bfloat16", "float16")}
        cases |= {"h2d pinned 256 MiB": c["h2d"] * 1e9, "d2h pinned 256 MiB": c["d2h"] * 1e9}
        cases |= {"d2d device copy 1 GiB": c["d2d"] * 1e12, "gemm float32 n=2048": 1e12}
        launch = 1 / 200_000 / k  # seconds a launch (200,000 a second), the slow GPU's longer
        spec = {"gpu": dev["uuid"], "gpu_index": i, "device": "gpu"}
        fp = {"gpus": [dev]}
        micro = RunRecord(
            f"m{node}{i}",
            "b1",
            "t",
            "single",
            "bm",
            "bm",
            node,
            "micro",
            "synthetic",
            "probe",
            "gpu",
            0,
            0,
            2,
            5,
            1,
            status="ok",
            fingerprint=fp,
            spec=spec,
        )
        model = RunRecord(
            f"r{node}{i}",
            "b2",
            "t",
            "single",
            "bm",
            "bm",
            node,
            "resnet50",
            "synthetic",
            "train",
            "gpu",
            256,
            224,
            None,
            20,
            1,
            status="ok",
            fingerprint=fp,
            spec=spec,
            math="mixed_bfloat16",
            xla=True,
            images_per_sec=c["resnet50"] * k,
        )
        for run in (micro, model):
            store.save_run(run)
            store.add_health(run.id, HealthEvent("after", 1.0, [{"index": i, "ecc_uncorrected": 0}]))
            store.add_resource(run.id, ResourceEvent(1.0, 1, 100.0, [sampled[i]]))
        for j, (case, value) in enumerate(cases.items()):
            probe, name = case.split(" ", 1)
            store.add_measure(micro.id, MeasureEvent(probe, name, j, "timed", value * k, "B/s", 1.0, 1.0))
        store.add_measure(
            micro.id, MeasureEvent("launch", "empty kernel, launches in a row", 99, "timed", launch, "s", 1.0, 1.0)
        )
    store.flush()


def test_gpu_evidence_from_stored_runs_names_the_slow_gpu_among_sixteen(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "results.sqlite")
    try:
        _stored_node(store, "g1", None)
        _stored_node(store, "g2", 5)
        runs = store.runs()
        found, _ = gpus.evidence(store, runs)
        verdicts = gpus.verdicts(store, runs, None)
    finally:
        store.close()
    first = next(e for e in found if e.gpu == "g1:0")
    assert sorted(first.measures) == sorted(MEASURES)
    assert first.measures["kernel_launches_per_s"] == pytest.approx(200_000)
    assert first.facts["pcie_gen"] == 5 and first.facts["ecc_uncorrected"] == 0
    assert [v.gpu for v in verdicts if v.verdict != PASS] == ["g2:5"]
    (bad,) = [v for v in verdicts if v.gpu == "g2:5"]
    slower = {r.check.removesuffix(" peers") for r in bad.reasons if r.verdict == FAIL}
    assert slower == set(first.measures)  # slower than its peers in every measure
    nodes = judge.judge(judge.Findings(("g1", "g2"), gpus=verdicts))
    assert [n.verdict for n in nodes] == [PASS, FAIL] and _kept(nodes[1])[0].check == "gpu g2:5"


def _golden_h100(node: str, index: int, spread: float) -> golden.Golden:
    """A golden H100 with the captured figures, each sampled 5 times within ±spread."""
    from tests.h100data import captured

    c = captured()
    base = {f"gemm_{m}": c[f"gemm_{m}"] * 1e12 for m in ("float32", "tf32", "bfloat16", "float16")}
    base |= {"h2d_pinned": c["h2d"] * 1e9, "d2h_pinned": c["d2h"] * 1e9, "memory_copy": c["d2d"] * 1e12}
    base["resnet50_gpu_preset_ips"] = c["resnet50"]
    wobble = (1 - spread, 1 - spread / 2, 1.0, 1 + spread / 2, 1 + spread)
    samples = {k: [v * w for w in wobble] for k, v in base.items()}
    return golden.Golden(node, index, H100_NAME, "580.159.04", samples, {k: ("pytorch", 2) for k in base})


def test_init_writes_the_golden_h100s_values_as_the_boards_hold_them(tmp_path: Path) -> None:
    """Known answers: the captured H100 as a golden node gives back its figures as the board holds them (GEMM over
    the datasheet's peak, copies over the link and memory bandwidth), each naming the store, framework and revision
    that measured it, and the site file it writes is read by --expected as it is."""
    text, count = golden.site_file(
        [_golden_h100("gold", i, 0.01) for i in range(2)], shipped(), "2026-11-27", "/var/lib/x/results.sqlite"
    )
    assert count == 8
    site = tmp_path / "site.toml"
    site.write_text(text)
    mine = next(b for b in with_site(shipped(), site) if b.key == "h100-sxm")
    theirs = next(b for b in shipped() if b.key == "h100-sxm")
    known = {
        "gemm_bfloat16": 792.4 / 989.5,
        "gemm_tf32": 407.9 / 494.5,
        "h2d_pinned_fraction": 55.1 / 63.02,
        "memory_copy_fraction": 3.01 / 3.35,
        "resnet50_gpu_preset_ips": 5726,
    }
    for name, value in known.items():
        assert mine.values[name].value == pytest.approx(value, rel=0.002), name
        assert mine.values[name].source.startswith(
            "measured: NVIDIA H100 80GB HBM3, driver 580.159.04, on gold:0, gold:1"
        )
        assert "2026-11-27" in mine.values[name].source and "median of 10" in mine.values[name].source
        assert mine.values[name].measured == expected.Measured("/var/lib/x/results.sqlite", "pytorch", 2)
    assert mine.values["pcie_gen"] == theirs.values["pcie_gen"]  # datasheet values stay


def test_init_refuses_noise_an_unknown_board_and_too_few_samples() -> None:
    with pytest.raises(ConfigError, match=r"too noisy to be a reference: 8 varied beyond ±8.3 %.*nothing written"):
        golden.site_file([_golden_h100("gold", 0, 0.3)], shipped(), "2026-11-27", "s")
    made = {"resnet50_gpu_preset_ips": ("pytorch", 1)}
    unknown = golden.Golden("n", 0, "NVIDIA RTX PRO 6000", "580", {"resnet50_gpu_preset_ips": [1.0, 1.0, 1.0]}, made)
    with pytest.raises(ConfigError, match="has no board file"):
        golden.site_file([unknown], shipped(), "2026-11-27", "s")
    few = golden.Golden("n", 0, H100_NAME, "580", {"resnet50_gpu_preset_ips": [5700.0]}, made)
    with pytest.raises(ConfigError, match="no measure of the golden GPUs has 3 samples"):
        golden.site_file([few], shipped(), "2026-11-27", "s")


def test_burn_in_fails_a_unit_that_slows_from_the_first_round_to_the_last() -> None:
    rounds = [
        {("g1", "g1/gpu0", "resnet50 img/s"): 5000.0, ("g1", "g1/gpu1", "resnet50 img/s"): 5000.0},
        {("g1", "g1/gpu0", "resnet50 img/s"): 4990.0, ("g1", "g1/gpu1", "resnet50 img/s"): 4600.0},
        {("g1", "g1/gpu0", "resnet50 img/s"): 4980.0, ("g1", "g1/gpu1", "resnet50 img/s"): 4200.0},
    ]
    found = slowness.trends(rounds, 5.0)
    (r,) = found["g1"]
    assert r.why == "g1/gpu1 resnet50 img/s fell 16 % from the first of 3 burn-in rounds to the last"
    assert slowness.trends(rounds, 20.0) == {} and slowness.trends(rounds[:1], 5.0) == {}
    node = judge.judge(judge.Findings(("g1",), extra=found))[0]
    assert node.verdict == FAIL and node.summary == r.why  # what a drain says: the burn-in's words, not "fail"
    lost = slowness.trends([rounds[0], {("g1", "g1/gpu0", "resnet50 img/s"): 4990.0}], 5.0)["g1"]
    assert [(x.verdict, x.why) for x in lost] == [
        (UNDECIDED, "g1/gpu1 resnet50 img/s: no result in the last of 2 burn-in rounds")
    ]


def test_init_reads_the_golden_gpus_samples_from_stored_runs(tmp_path: Path) -> None:
    """The stored node of eight H100s as golden: each GPU's timed calls by measure, and its gpu-preset
    ResNet-50 runs; the site file holds the captured fractions back."""
    store = Store.open(tmp_path / "results.sqlite")
    try:
        _stored_node(store, "gold", None)
        found = gpus.golden(store, store.runs())
    finally:
        store.close()
    assert len(found) == 8 and found[0].driver == "580.159.04"
    assert sorted(found[0].samples) == sorted(MEASURES) and len(found[0].samples["gemm_bfloat16"]) == 1
    text, count = golden.site_file(found, shipped(), "2026-11-27", str(tmp_path / "results.sqlite"))
    site = tmp_path / "site.toml"
    site.write_text(text)
    mine = next(b for b in with_site(shipped(), site) if b.key == "h100-sxm")
    assert mine.values["gemm_bfloat16"].value == pytest.approx(0.801, abs=0.001) and count == 9  # the launch rate too
    assert mine.values["kernel_launches_per_s"].value == pytest.approx(200_000)  # a rate, not seconds a launch
    made = mine.values["gemm_bfloat16"].measured  # runs stored before revisions were: revision 1
    assert made == expected.Measured(str(tmp_path / "results.sqlite"), "tensorflow", 1)


def test_a_wrong_allreduce_over_a_nodes_gpus_fails_the_node_not_gpu_0(tmp_path: Path) -> None:
    from dltestbed.results.records import RunRecord
    from dltestbed.workload.events import CheckEvent

    store = Store.open(tmp_path / "results.sqlite")
    try:
        run = RunRecord("a1", "b", "t", "single", "bm", "bm", "g1", "micro", "synthetic", "probe", "gpu", 0, 0, 2, 5, 1)
        run.status, run.spec = "ok", {"gpus": "node", "scale": "full"}
        store.save_run(run)
        store.add_check(run.id, CheckEvent("allreduce", "256 MiB algbw", "reference", 64, 3, 1.0, 0.0, 0, 1.0, gpu=0))
        store.flush()
        _, wrong = gpus.evidence(store, [run])
        (reason,) = gpus.node_wrong(store, [run])["g1"]
    finally:
        store.close()
    assert wrong == {}  # no GPU blamed
    assert reason.verdict == FAIL and reason.why.startswith("all-reduce over the node's GPUs gave a wrong sum")


def test_the_node_stage_is_tensorflows(tmp_path: Path) -> None:
    """PyTorch runs no process over every GPU: its acceptance leaves the node stage out, saying why."""
    from dltestbed.accept.context import Ctx
    from dltestbed.orchestrate import Silent
    from dltestbed.requests.accept import AcceptRequest, Nodes, Pack

    state, _ = State.begin(tmp_path, "r", resume=False)
    state.record("preflight", StageRecord("k", [], {"gpus": {"g1": 8}}))
    for fw, said in (("pytorch", "PyTorch runs no process over every GPU (--gpus node)"), ("tensorflow", None)):
        request = AcceptRequest(Nodes(tmp_path / "inv.yml", framework=fw), pack=Pack(tmp_path))
        ctx = Ctx(request, levels.level("quick"), ("g1",), "", Silent(), state)
        assert stages.NodeGpus().applies(ctx) == said


def test_the_framework_is_the_one_every_node_has_the_default_first() -> None:
    from dltestbed.accept.context import on_every_node

    torch_only = {"h200": {"torch": "2.11.0", "numpy": "2.1"}, "n2": {"torch": "2.11.0", "tensorflow-cpu": "2.21"}}
    assert on_every_node(torch_only) == ["pytorch"]  # a GPU machine with its own PyTorch alone
    both = {"n1": {"torch": "2.13.0", "tensorflow": "2.21.0"}, "n2": {"torch": "2.13.0", "tensorflow-cpu": "2.21"}}
    assert on_every_node(both) == ["tensorflow", "pytorch"]
    assert on_every_node({"n1": {"tensorflow": "2.21"}, "n2": {"torch": "2.11"}}) == []
