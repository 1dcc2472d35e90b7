"""The host facts acceptance's drift compares (workload/hostfacts.py), parsed from the kernel's own texts, and
read on this machine; a node with fewer CPUs usable than its peers drifts, said in words."""

from __future__ import annotations

import os

import pytest

from dltestbed.accept.facts import node_facts
from dltestbed.report import drift
from dltestbed.report.verdicts import FAIL
from dltestbed.workload import hostfacts

MEMINFO = "MemTotal:       131596288 kB\nHugePages_Total:     512\nHugePages_Free:   512\nHugepagesize:   2048 kB\n"


@pytest.mark.parametrize(("text", "count"), [("0-3,8-11\n", 8), ("0\n", 1), ("0-127", 128), ("\n", 0), ("a-b", None)])
def test_a_kernel_cpu_list_counted(text: str, count: int | None) -> None:
    assert hostfacts.cpu_list_count(text) == count


def test_cgroup_quotas_v2_and_v1() -> None:
    assert hostfacts.cgroup_cpus("200000 100000\n") == 2.0 and hostfacts.cgroup_cpus("max 100000\n") is None
    assert hostfacts.cfs_cpus("150000\n", "100000\n") == 1.5 and hostfacts.cfs_cpus("-1\n", "100000\n") is None
    text = "4:memory:/job\n3:cpu,cpuacct:/slurm/uid_0/job_7\n0::/user.slice/x\n"
    assert hostfacts.cgroup_path(text) == "/user.slice/x" and hostfacts.cgroup_path(text, "cpu") == "/slurm/uid_0/job_7"
    assert hostfacts.usable(8, 1.5) == 2 and hostfacts.usable(2, None) == 2 and hostfacts.usable(None, 1.0) is None


def test_hugepages_from_meminfo() -> None:
    assert hostfacts.hugepages(MEMINFO) == "512 x 2048 kB" and hostfacts.hugepages("MemTotal: 1 kB\n") is None


def test_this_machines_facts_as_its_kernel_says() -> None:
    got = hostfacts.read()
    assert got["cpus_usable"] == len(os.sched_getaffinity(0))  # no CPU quota on this machine's test process
    assert got["cpus_online"] >= got["cpus_usable"] >= 1 and got["numa_nodes"] >= 1


def test_a_node_with_one_cpu_usable_among_two_cpu_peers_drifts() -> None:
    fp = {"cpu_model": "Xeon", "cpus_online": 2, "cpus_usable": 2, "smt": "on", "memory_bytes": 125 * 2**30 + 5}
    facts = {f"n{i}": node_facts(fp) for i in range(1, 4)} | {"n4": node_facts(fp | {"cpus_usable": 1})}
    assert facts["n1"] == {"cpu_model": "Xeon", "cpus_online": "2", "cpus_usable": "2", "smt": "on",
                           "memory_gib": "125 GiB"}  # fmt: skip
    (d,) = drift.drift(facts)
    assert (d.node, d.fact, d.verdict, d.why) == ("n4", "cpus_usable", FAIL, "CPUs usable 1, where 3 of 4 nodes have 2")
