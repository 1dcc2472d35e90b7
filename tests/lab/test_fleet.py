"""A fleet check on real SSH hosts: four lab hosts, one of them with fewer cores; `report --by-host` flags
that host and only that one."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from dltestbed import lab
from dltestbed.lab import LabSpec
from dltestbed.lab.state import LabState
from tests.conftest import run_cli
from tests.lab.conftest import leftovers, ssh, this_checkout

BENCH = [
    "--model",
    "alexnet",
    "--image-size",
    "128",
    "--batch-size",
    "8",
    "--warmup",
    "2",
    "--steps",
    "15",
    "--repeat",
    "2",
    "--no-parallel",
]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, lab_dir: Path) -> Iterator[tuple[LabState, Path]]:
    """Four hosts; host 4 runs on CPU 0 only. They run this test's own venv and checkout, shared with
    every host read-only at the same path (a site's shared filesystem: nothing to provision)."""
    assert len(os.sched_getaffinity(0)) >= 2, "the fleet test slows one host to 1 CPU: it needs 2 or more"
    lab.down("tf")
    state = lab.up(LabSpec(name="tf", hosts=4, subnet="10.213.84.0/24", cpus=(("4", "0"),), shares=this_checkout()))
    doc = yaml.safe_load(state.inventory.read_text())
    doc["all"]["vars"]["dltestbed_venv"] = sys.prefix
    inv = tmp_path_factory.mktemp("fleet") / "inventory.yml"
    inv.write_text(yaml.safe_dump(doc))
    yield state, inv
    lab.down("tf")
    assert not leftovers("tf")


@pytest.mark.quiet  # the healthy hosts' speeds must differ by less than the bar: nothing else may run
def test_the_slow_host_is_flagged_and_only_it(fleet: tuple[LabState, Path], results: Path) -> None:
    state, inv = fleet
    allowed = ssh(state, "tf-h4", "grep Cpus_allowed_list /proc/self/status").stdout.split()[-1]
    assert allowed == "0"
    write = ssh(state, "tf-h1", f"touch {sys.prefix}/dltestbed-lab-probe")
    assert write.returncode != 0 and "Read-only file system" in write.stderr  # shared read-only
    proc = run_cli("bench", "--inventory", str(inv), *BENCH, "--format", "json", "--results", str(results))
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads(proc.stdout)
    assert sorted({r["fingerprint"]["host"] for r in runs}) == ["tf-h1", "tf-h2", "tf-h3", "tf-h4"]
    assert {r["fingerprint"]["cpu_affinity"] for r in runs if r["host"] == "tf-h4"} == {1}
    for h in state.hosts[1:3]:  # hosts no test command reached: the key check's connection served both runs
        logins = (h.dir(state.dir) / "sshd.log").read_text().count("Accepted publickey")
        assert logins == 1, f"{h.name}: {logins} SSH logins for a key check and 2 runs"
    # The healthy hosts share this machine's 2 cores and differ by up to 12 % between runs (a CI run: 51.3,
    # 45.7, 45.1 img/s); tf-h4 has 1 core and is 35-45 % slower. At the default 5 % bar it must be flagged;
    # at 15 % it must be the only one (the bar is the user's: --fleet-slowdown).
    strict = ["--fleet-slowdown", "15"]
    report = json.loads(run_cli("report", "--by-host", "--format", "json", "--results", str(results)).stdout)
    speeds = {g["key"]["host"]: round(g["images_per_sec"]["mean"], 1) for g in report["groups"]}
    assert "tf-h4" in [f["host"] for f in report["fleet"]], speeds
    report = json.loads(run_cli("report", "--by-host", "--format", "json", *strict, "--results", str(results)).stdout)
    flagged = [(f["host"], f["hosts"]) for f in report["fleet"]]
    assert flagged == [("tf-h4", 4)], speeds
    (flag,) = report["fleet"]
    assert flag["robust_z"] < -3.5 and (1 - flag["images_per_sec"] / flag["peers_median"]) * 100 >= 15
    # without --by-host too: 4 machines are enough for the fleet check, and the page draws it
    page = results.parent / "fleet.html"
    assert run_cli("report", "--out", str(page), *strict, "--results", str(results)).returncode == 0
    html = page.read_text()
    assert 'data-figure="fleet"' in html and "outlier" not in html.split("<main>")[0]
    text = run_cli("report", "--by-host", *strict, "--results", str(results)).stdout
    assert "## Fleet: hosts slower than their peers" in text and "| tf-h4 |" in text and "by at least 15 %" in text
