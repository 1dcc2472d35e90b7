"""`dltestbed accept --level quick` with its defaults (every node at once) on a rack with two dead nodes beside
four good ones, on lab hosts that each have a share of the cores of their own (`lab up --capacity`, as nodes of a
rack have): every node judged; the dead ones named, never passed; the site's choice that a dead node fails; the
mended one provisioned, read and measured beside controls on --resume. (The faults of a live node, and a stop
mid-acceptance: tests/lab/test_accept.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
import yaml

from dltestbed import lab
from dltestbed.lab import LabSpec
from dltestbed.lab.state import LabState
from tests.lab.conftest import accept_argv, leftovers, overlap, run_spans, this_checkout

NAME = "tr"
SUBNET = "10.213.85.0/24"  # its own: it runs beside the other CI tier's labs
GOOD = [f"{NAME}-h{i}" for i in range(1, 5)]
DOWN = f"{NAME}-h5"  # a healthy host whose link is down: dead, until it is mended
DEAD = f"{NAME}-d1"  # an address with no host behind it
DEAD_IP = "10.213.85.201"
# it runs in a CI tier of its own, beside another tier's tests: its nodes are measured at once (the mended one beside
# controls), so a load from outside slows them alike; the healthy nodes' speed is judged, with a wide bar
SLOWDOWN = "50"


@pytest.fixture(scope="module")
def rack(lab_dir: Path) -> Iterator[LabState]:
    """Five lab hosts, each with a fixed share of the cores, sharing this checkout's venv."""
    assert len(os.sched_getaffinity(0)) >= 2, "the hosts' shares of the cores need 2 or more CPUs here"
    lab.down(NAME)
    state = lab.up(LabSpec(name=NAME, hosts=5, subnet=SUBNET, shares=this_checkout(), capacity=True))
    yield state
    lab.down(NAME)
    assert not leftovers(NAME)


def _inventory(state: LabState, folder: Path, nodes: list[str], dead: bool = False) -> Path:
    """The lab's inventory narrowed to `nodes` (with the dead addresses beside them), its venv this checkout's."""
    doc = yaml.safe_load(state.inventory.read_text())
    hosts = doc["all"]["children"]["bare_metal"]["hosts"]
    kept = {n: hosts[n] for n in nodes}
    if dead:
        kept[DEAD] = {"ansible_host": DEAD_IP}
    doc["all"]["children"]["bare_metal"]["hosts"] = kept
    doc["all"]["vars"] |= {"dltestbed_venv": sys.prefix, "dltestbed_venv_shared": True}
    path = folder / "rack.yml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _accept(inv: Path, out: Path, results: Path, *more: str) -> list[str]:
    return accept_argv(inv, out, results, "--slowdown", SLOWDOWN, *more)


def _verdicts(doc: dict) -> dict[str, str]:
    return {n["node"]: n["verdict"] for n in doc["nodes"]}


def _reasons(doc: dict, node: str) -> list[dict]:
    return next(n["reasons"] for n in doc["nodes"] if n["node"] == node)


def _link(state: LabState, node: str, up: bool) -> None:
    """A lab host's link on the bridge, up or down (down: nothing reaches it, as a dead node)."""
    veth = next(h.veth for h in state.hosts if h.name == node)
    subprocess.run(["ip", "link", "set", veth, "up" if up else "down"], check=True)


@pytest.mark.timeout(1800)  # three acceptances: about 5 min alone, longer beside another CI tier
def test_two_dead_nodes_are_named_the_four_good_ones_judged_and_a_mended_one_resumed(
    rack: LabState, tmp_path: Path
) -> None:
    inv = _inventory(rack, tmp_path, [*GOOD, DOWN], dead=True)
    out, results = tmp_path / "pack", tmp_path / "results.sqlite"
    _link(rack, DOWN, up=False)
    try:
        proc = subprocess.run(_accept(inv, out, results), capture_output=True, text=True, timeout=1500)
        print(proc.stderr[-5000:])  # shown with -s, or when it fails
        assert proc.returncode == 3, proc.stderr[-4000:]
        doc = json.loads(proc.stdout)
        assert _verdicts(doc) == {**dict.fromkeys(GOOD, "pass"), DOWN: "cannot judge", DEAD: "cannot judge"}
        for node in (DOWN, DEAD):
            (r,) = _reasons(doc, node)
            assert r["check"] == "stage provision"
            assert (
                r["why"].startswith("not measured: left out at stage provision: ") and "accept --resume" in r["action"]
            )
        assert "provision: 2 of 6 node(s) not provisioned" in proc.stderr
        cases = {(s.get("name"), c.get("name")): c for s in ET.parse(out / "junit.xml").getroot() for c in s}
        for node in (DOWN, DEAD):
            assert cases[(f"node {node}", "stage provision")].find("error") is not None  # cannot judge: never a pass
        assert all(cases[(f"node {n}", "runs")].find("failure") is None for n in GOOD)
        # the pairs: each good node in one pair, both pairs in one round, at the same time
        stages = json.loads((out / "accept-state.json").read_text())["stages"]
        (pairs_bench,) = stages["pairs"]["benches"]
        pairs = sorted(sorted(p[:2]) for p in stages["pairs"]["data"]["pairs"])
        assert pairs == [GOOD[:2], GOOD[2:]]
        spans = run_spans(results, pairs_bench)
        assert len(spans) == 4 and overlap(list(spans.values())), spans

        # the site's choice: a dead node fails. Nothing of the good nodes is measured again
        again = _accept(inv, out, results, "--resume", "--unreachable", "fail")
        proc = subprocess.run(again, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 1, proc.stderr[-3000:]
        doc = json.loads(proc.stdout)
        assert _verdicts(doc) == {**dict.fromkeys(GOOD, "pass"), DOWN: "fail", DEAD: "fail"}
        assert "stage measure: done before" in proc.stderr and "stage rejoin: the nodes left out" in proc.stderr
        assert _reasons(doc, DOWN)[0]["check"] == "stage rejoin"  # tried again, still down
    finally:
        _link(rack, DOWN, up=True)

    # mended: resumed, it is provisioned, read and measured beside controls at the same time, and passes
    proc = subprocess.run(_accept(inv, out, results, "--resume"), capture_output=True, text=True, timeout=1500)
    print(proc.stderr[-5000:])
    assert proc.returncode == 3, proc.stderr[-4000:]  # the dead address is still dead
    doc = json.loads(proc.stdout)
    assert _verdicts(doc) == {**dict.fromkeys(GOOD, "pass"), DOWN: "pass", DEAD: "cannot judge"}, doc["nodes"]
    mended = [r for r in _reasons(doc, DOWN) if "once mended (--resume)" in r["why"]]
    assert mended and all("measured at the same time" in r["why"] for r in mended), _reasons(doc, DOWN)
    assert any(r["check"] == "drift" and r["verdict"] == "pass" for r in _reasons(doc, DOWN))
    rejoin = json.loads((out / "accept-state.json").read_text())["stages"]["rejoin"]["data"]
    assert rejoin["rejoined"] == [DOWN] and len(rejoin["controls"]) >= 2
    # a measure slow beside the controls (noise on these shared cores, or a fault) is measured again beside them
    assert all(b["nodes"] == [DOWN] for b in rejoin["again"]["batches"]), rejoin["again"]
    model = next(b for b in rejoin["measure"] if run_spans(results, b, models_only=True))
    spans = run_spans(results, model, models_only=True)
    assert set(spans) == {DOWN, *rejoin["controls"]} and overlap(list(spans.values())), spans
