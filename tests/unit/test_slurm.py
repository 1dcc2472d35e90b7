"""Slurm's output parsed (captured from the lab's slurm-wlm 22.05), the commands built, the options
checked, and the lab's slurm.conf: known answers, no daemon needed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from dltestbed.errors import ConfigError
from dltestbed.lab import slurm as lab_slurm
from dltestbed.lab.state import plan as lab_plan
from dltestbed.orchestrate.launchers.slurm import check_options, from_inventory
from dltestbed.requests.bench import BenchRequest, Options, Where, Workloads
from dltestbed.requests.lab import LabSpec
from dltestbed.requests.launch import Launch, SlurmOptions
from dltestbed.slurm import parse
from dltestbed.slurm.alloc import HOLDER, Allocation, Node, Request, salloc_argv
from tests.conftest import one_error_line, run_cli

DATA = Path(__file__).parent.parent / "data" / "slurm"
SLURM = BenchRequest(launch=Launch("slurm"))  # what the checks are given, but for each case's group


def test_a_job_record_is_read_whole_and_its_end_told() -> None:
    (job,) = parse.records((DATA / "job-timeout.txt").read_text())
    assert job["JobId"] == "7" and job["JobState"] == "TIMEOUT" and job["Reason"] == "TimeLimit"
    assert job["JobName"] == "dltestbed-b-20261124-050403-fd162c" and job["Partition"] == "lab"
    assert job["AllocNode:Sid"] == "localhost:7002" and job["TimeLimit"] == "00:01:00"
    assert parse.ended(job) == "TIMEOUT (TimeLimit)"


@pytest.mark.parametrize(
    ("state", "reason", "told"),
    [
        ("RUNNING", "None", None),
        ("PENDING", "Resources", None),
        ("COMPLETING", "TimeLimit", "TimeLimit"),
        ("COMPLETING", "None", None),
        ("NODE_FAIL", "NodeDown", "NODE_FAIL (NodeDown)"),
        ("CANCELLED", "None", "CANCELLED"),
    ],
)
def test_how_a_job_ended(state: str, reason: str, told: str | None) -> None:
    assert parse.ended({"JobState": state, "Reason": reason}) == told


def test_values_with_spaces_stay_whole() -> None:
    rec = parse.fields("JobId=9 JobName=my bench Comment=dltestbed bench b-1 of installation x UserId=root(0)")
    assert rec == {
        "JobId": "9",
        "JobName": "my bench",
        "Comment": "dltestbed bench b-1 of installation x",
        "UserId": "root(0)",
    }


def test_nodes_and_their_addresses() -> None:
    recs = {r["NodeName"]: r for r in parse.records((DATA / "nodes.txt").read_text())}
    assert sorted(recs) == ["sl-h1", "sl-h2"]
    assert recs["sl-h1"]["NodeAddr"] == "10.213.120.11" and recs["sl-h2"]["NodeAddr"] == "10.213.120.12"
    assert recs["sl-h1"]["CPUTot"] == "2" and recs["sl-h1"]["Partitions"] == "lab"


def test_the_step_cancelled_line_and_salloc_job_id() -> None:
    lines = (DATA / "srun-time-limit.txt").read_text().splitlines()
    assert parse.cancelled(lines) == "cancelled at 2026-11-24T05:05:09 due to time limit"
    assert (
        parse.cancelled(["slurmstepd: error: *** JOB 12 ON n1 CANCELLED AT 2026-01-01T00:00:00 ***"])
        == "cancelled at 2026-01-01T00:00:00"
    )
    assert parse.cancelled(["srun: error: n1: task 0: Exited with exit code 1"]) is None
    said = (DATA / "salloc-time-limit.txt").read_text().splitlines()
    assert parse.job_id_in(said) == "7"
    assert parse.job_id_in(["salloc: Pending job allocation 31", "salloc: job 31 queued and waiting"]) == "31"
    assert parse.granted("7 sl-h[1-2]\n") == ("7", "sl-h[1-2]") and parse.granted("salloc: error") is None


def test_partitions_and_their_nodes() -> None:
    nodes, default = parse.partitions((DATA / "sinfo-nodes.txt").read_text())
    assert nodes == {"lab": {"sl-h1", "sl-h2"}} and default == "lab"
    nodes, default = parse.partitions("n1 cpu\nn2 gpu*\nn1 gpu*\n")
    assert nodes == {"cpu": {"n1"}, "gpu": {"n1", "n2"}} and default == "gpu"


def test_the_commands() -> None:
    argv = salloc_argv(Request(2, partition="gpu", time="10", job_name="dltestbed-b-1", comment="a b"))
    assert argv[:4] == ["salloc", "--nodes=2", "--exclusive", "--job-name=dltestbed-b-1"]
    assert "--partition=gpu" in argv and "--time=10" in argv and "--comment=a b" in argv
    assert not any(a.startswith("--account") for a in argv)
    assert argv[-4:] == ["--", "sh", "-c", HOLDER]
    alloc = Allocation.__new__(Allocation)
    alloc.job_id = "7"
    step = alloc.srun_argv("n1", ["/opt/v/bin/python", "-m", "dltestbed.workload", "--x", "a b"])
    assert step[:3] == ["srun", "--jobid=7", "--nodelist=n1"] and "--ntasks=1" in step and "--overlap" in step
    assert step[step.index("--") + 1 :] == ["/opt/v/bin/python", "-m", "dltestbed.workload", "--x", "a b"]


@pytest.mark.parametrize(
    ("kw", "wanted"),
    [
        ({}, 1),
        ({"scenario": Options("distributed")}, 2),
        ({"scenario": Options("distributed", workers=3)}, 3),
        ({"launch": Launch("slurm", nodes=4)}, 4),
    ],
)
def test_the_node_count(kw: dict, wanted: int) -> None:
    assert check_options(replace(SLURM, **kw)) == wanted


@pytest.mark.parametrize(
    ("kw", "line"),
    [
        ({"launch": Launch("slurm", nodes=0)}, "--nodes: at least 1"),
        ({"launch": Launch("slurm", venv="venv")}, "--venv venv: an absolute path"),
        ({"where": Where(targets=("bm", "vm"))}, "not vm"),
        ({"where": Where(targets=("bm", "cbm"))}, "come from --inventory"),
        ({"workloads": Workloads(data="real")}, "give --data-shared"),
        ({"scenario": Options("shared"), "launch": Launch("slurm", nodes=2)}, "scenario shared runs on one node"),
        ({"where": Where(limit="h1")}, "--limit picks inventory hosts"),
    ],
)
def test_bad_combinations_are_one_line(kw: dict, line: str) -> None:
    with pytest.raises(ConfigError, match=line):
        check_options(replace(SLURM, **kw))


def test_a_launchers_options_go_with_that_launcher_only() -> None:
    """Each launcher is asked by name; another launcher's option given is refused in one line, and an unknown
    launcher lists the known ones."""
    from dltestbed.orchestrate.launchers import Direct, Slurm, launcher_class, launcher_for

    with pytest.raises(ConfigError, match=r"^--partition goes with --launcher slurm$"):
        launcher_for(BenchRequest(slurm=SlurmOptions(partition="p")))
    with pytest.raises(ConfigError, match=r"^--slurm-time goes with --launcher slurm$"):
        launcher_for(BenchRequest(slurm=SlurmOptions(time="1:00")))
    with pytest.raises(ConfigError, match=r"^--nodes: how many machines a scheduler gives"):
        launcher_for(BenchRequest(launch=Launch(nodes=2)))
    assert isinstance(launcher_for(BenchRequest()), Direct)
    on_nodes = launcher_for(BenchRequest(launch=Launch("slurm", nodes=3)))
    assert isinstance(on_nodes, Slurm) and len(on_nodes.hosts()) == 3
    slurm = BenchRequest(launch=Launch("slurm"))
    assert Direct.on_this_machine(BenchRequest()) and not Slurm.on_this_machine(slurm)
    with pytest.raises(ConfigError, match=r"^unknown launcher 'pbs'; known: direct, slurm or kubernetes$"):
        launcher_class("pbs")


def test_options_the_command_line_leaves_out_come_from_the_inventory(tmp_path: Path) -> None:
    """dltestbed_slurm_* set for group all fill the options not given; one host that disagrees is one line."""
    from dltestbed import inventory

    inv = tmp_path / "inventory.yml"
    inv.write_text(
        "all:\n  vars:\n    dltestbed_slurm_partition: gpu\n    dltestbed_slurm_time: '30'\n"
        "    dltestbed_slurm_account: ops\n  hosts:\n    n1:\n    n2:\n"
    )
    opts = from_inventory(SlurmOptions(account="mine"), inventory.load(inv))
    assert opts == SlurmOptions(partition="gpu", account="mine", time="30")  # the command line wins
    inv.write_text(
        "all:\n  vars:\n    dltestbed_slurm_partition: gpu\n  hosts:\n    n1:\n    n2:\n"
        "      dltestbed_slurm_partition: debug\n"
    )
    with pytest.raises(ConfigError, match=r"dltestbed_slurm_partition differs between hosts \(debug, gpu\)"):
        from_inventory(SlurmOptions(), inventory.load(inv))
    assert from_inventory(SlurmOptions(partition="x"), inventory.load(inv)).partition == "x"


def test_the_cli_says_a_missing_controller_in_one_line(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"  # a cluster whose controller is nowhere: TEST-NET, never answered
    conf.write_text(
        "ClusterName=none\nSlurmctldHost=nowhere(192.0.2.1)\nSlurmctldTimeout=2\nMessageTimeout=2\n"
        "NodeName=n1 CPUs=1\nPartitionName=p Nodes=n1 Default=YES\n"
    )
    out = run_cli(
        "bench",
        "--launcher",
        "slurm",
        "--model",
        "alexnet",
        "--steps",
        "1",
        "--repeat",
        "1",
        "--results",
        str(tmp_path / "r.sqlite"),
        env={"SLURM_CONF": str(conf)},
        timeout=120,
    )
    line = one_error_line(out)
    assert "--launcher slurm:" in line, line
    assert not (tmp_path / "logs").exists() or not any((tmp_path / "logs").iterdir())


def test_the_lab_config() -> None:
    lab = lab_plan(LabSpec(name="sx", hosts=3, subnet="10.213.99.0/24", cpus=(("3", "0"),), slurm=True))
    text = lab_slurm.config_text(lab)
    assert "SlurmctldHost=sx-ctl(10.213.99.1)" in text and "ClusterName=dltestbed-sx" in text
    assert "NodeName=sx-h1 NodeAddr=10.213.99.11" in text and "NodeName=sx-h3 NodeAddr=10.213.99.13 CPUs=1 " in text
    assert "AuthInfo=socket=/run/dltestbed-munge-sx/munge.socket.2" in text
    assert "PartitionName=lab Nodes=ALL Default=YES" in text and "SelectType=select/linear" in text
    assert lab_slurm.parse_sinfo("sx-h1 idle\nsx-h2 down*\n\n") == {"sx-h1": "idle", "sx-h2": "down*"}
    with pytest.raises(ConfigError, match="--slurm and --bastion"):
        lab_plan(LabSpec(name="sx", hosts=2, slurm=True, bastion=True))


def test_a_node_without_an_address_is_reached_by_name() -> None:
    assert Node("n1", "n1").address == "n1"


def test_a_step_does_not_carry_this_machines_container_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """srun exports the submitter's environment to the node: this machine's DOCKER_HOST or Podman storage would
    point the node's runtime at a daemon or store that is not there (or, in a lab, at this machine's). The
    step gets neither; the target's own env (the host's runtime settings) and everything else still go."""
    from dltestbed.targets.slurm import SlurmTarget

    monkeypatch.setenv("DOCKER_HOST", "unix:///run/controller/docker.sock")
    monkeypatch.setenv("CONTAINERS_STORAGE_CONF", "/var/lib/controller/storage.conf")
    monkeypatch.setenv("DLTESTBED_SITE_VAR", "kept")
    alloc = Allocation.__new__(Allocation)
    alloc.srun_argv = lambda node, argv: list(argv)  # type: ignore[method-assign]  # the step, without srun here
    alloc.ended_why = lambda tail: None  # type: ignore[method-assign]
    target = SlurmTarget(alloc, Node("n1", "10.0.0.1"), "python3")
    lines: list[str] = []
    result = target.run(["env"], env={"CONTAINERS_CONF": "/etc/dltestbed/containers.conf"}, on_line=lines.append)
    assert result.ok
    seen = dict(line.split("=", 1) for line in lines if "=" in line)
    assert "DOCKER_HOST" not in seen and "CONTAINERS_STORAGE_CONF" not in seen
    assert seen["CONTAINERS_CONF"] == "/etc/dltestbed/containers.conf" and seen["DLTESTBED_SITE_VAR"] == "kept"
