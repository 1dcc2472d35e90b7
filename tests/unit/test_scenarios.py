"""Scenario planning, pure parts: checks, order, CPU split, co-tenant specs, the worker's TF_CONFIG."""

from __future__ import annotations

import json

import pytest

from dltestbed.config import format_cpu_list, parse_cpu_list, spec_json, workload_spec
from dltestbed.errors import ConfigError
from dltestbed.orchestrate import planning, scenarios
from dltestbed.workload.distributed import Cluster
from dltestbed.workload.frameworks.tensorflow.distributed import cluster_from_env, collective, job_facts, tf_config
from tests.plans import plan_of


def _plan(**kw: object) -> planning.Plan:
    return plan_of(models=["alexnet", "resnet50"], image_size=64, steps=2, warmup=1, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "cpus"), [("0", [0]), ("0-3", [0, 1, 2, 3]), ("3,1-2, 8", [1, 2, 3, 8]), ("0-0", [0])]
)
def test_cpu_lists(text: str, cpus: list[int]) -> None:
    assert parse_cpu_list(text) == cpus
    assert parse_cpu_list(format_cpu_list(cpus)) == cpus


@pytest.mark.parametrize(("cpus", "text"), [([0, 1, 2, 5], "0-2,5"), ([7], "7"), ([1, 3, 4, 5, 9, 10], "1,3-5,9-10")])
def test_cpu_list_formatting(cpus: list[int], text: str) -> None:
    assert format_cpu_list(cpus) == text


@pytest.mark.parametrize("bad", ["", "a", "3-1", "1,,2", "-1"])
def test_bad_cpu_lists(bad: str) -> None:
    with pytest.raises(ConfigError, match="--cpus"):
        workload_spec(model="alexnet", cpus=bad)


def test_workload_spec_carries_the_new_options() -> None:
    spec = workload_spec(model="alexnet", distributed=True, cpus="0-1")
    text = spec_json(spec)
    assert json.loads(text) == {"model": "alexnet", "distributed": True, "cpus": "0-1"}
    from dltestbed.workload.args import parse

    parsed = parse(["--spec", text])[0]
    assert spec_json(parsed) == text and parsed.distributed and parsed.cpus == "0-1"


def test_distributed_inference_is_refused() -> None:
    with pytest.raises(ConfigError, match="distributed runs train"):
        workload_spec(model="alexnet", distributed=True, mode="infer")


def test_tf_config_round_trip() -> None:
    value = tf_config(["10.0.0.1:2222", "10.0.0.2:2222"], 1)
    assert json.loads(value)["task"] == {"type": "worker", "index": 1}
    c = cluster_from_env(value)
    assert (c.workers, c.index, c.size) == (("10.0.0.1:2222", "10.0.0.2:2222"), 1, 2)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "--distributed needs TF_CONFIG"),
        ("{", "TF_CONFIG is not"),
        ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}}', "at least 2 workers"),
        ('{"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 2}}', "task index 2"),
        ('{"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "chief", "index": 0}}', "only 'worker'"),
    ],
)
def test_bad_tf_config(value: str | None, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        cluster_from_env(value)


class _Strategy:
    def __init__(self, replicas: int) -> None:
        self.num_replicas_in_sync = replicas


def test_a_jobs_replicas_per_worker() -> None:
    """A worker with 4 GPUs runs 4 replicas and asks for NCCL: the fingerprint says so; replicas that do not
    divide among the workers (MultiWorkerMirroredStrategy needs as many devices on each) are one line."""
    job = Cluster(("a:1", "b:1"), 1)
    facts = {"worker_index": 1, "workers": 2, "replicas": 8, "local_replicas": 4, "collective": "NCCL"}
    assert job_facts(_Strategy(8), job, collective(4)) == facts
    assert job_facts(_Strategy(2), job, collective(0))["local_replicas"] == 1
    assert collective(0) == "RING"  # NCCL runs on GPUs only
    assert job_facts(_Strategy(4), None, "NCCL")["replicas"] == 4  # --gpus node: one worker, a replica per GPU
    with pytest.raises(ConfigError, match=r"^3 replicas do not divide among 2 workers: every worker needs as many"):
        job_facts(_Strategy(3), job, collective(3))


def test_random_order_is_seeded_and_complete() -> None:
    plan = _plan(repeat=3, order="random", seed=7)
    rounds = plan.rounds(["bm", "cbm"])
    assert rounds == _plan(repeat=3, order="random", seed=7).rounds(["bm", "cbm"])  # reproducible
    assert rounds != _plan(repeat=3, order="random", seed=8).rounds(["bm", "cbm"])
    for rep, round_ in enumerate(rounds, 1):
        assert sorted((s.model, k) for _, s, k in round_) == sorted(
            (m, k) for m in ("alexnet", "resnet50") for k in ("bm", "cbm")
        )  # every pair once per repetition
        assert {r for r, _, _ in round_} == {rep}
    inter = _plan(repeat=1).rounds(["bm", "cbm"])[0]
    assert [(s.model, k) for _, s, k in inter] == [
        ("alexnet", "bm"),
        ("alexnet", "cbm"),
        ("resnet50", "bm"),
        ("resnet50", "cbm"),
    ]
    with pytest.raises(ConfigError, match="unknown order 'sorted'"):
        _plan(order="sorted")


@pytest.mark.parametrize(
    ("options", "hosts", "message"),
    [
        (scenarios.Options("distributed", workers=1), [None], "needs at least 2 workers; got 1"),
        (scenarios.Options("distributed"), ["h1"], "got 1 (one per host; --workers N puts several on a host)"),
        (scenarios.Options("single", workers=2), [None], "--workers is only for --scenario distributed"),
        (scenarios.Options("shared"), ["h1", "h2"], "scenario shared runs on one host; 2 given"),
        (scenarios.Options("shared", cotenant="io"), [None], "--cotenant io reads real data"),
        (scenarios.Options("shared", cotenant="disk"), [None], "unknown co-tenant 'disk'"),
        (scenarios.Options("mesh"), [None], "unknown scenario 'mesh'; known: single, distributed, shared"),
        (
            scenarios.Options("distributed"),
            ["h1", "h2", "vm"],
            "workers in VMs on different hosts cannot reach each other",
        ),
    ],
)
def test_scenario_checks(options: scenarios.Options, hosts: list, message: str) -> None:
    kinds = ["bm", hosts.pop()] if hosts[-1] == "vm" else ["bm"]
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        scenarios.check(options, hosts, _plan(), kinds)
    if kinds != ["bm"]:
        scenarios.check(scenarios.Options("distributed", workers=2), hosts[:1], _plan(), kinds)  # one host's VM: fine


def test_workers_default_to_one_per_host() -> None:
    assert scenarios.worker_count(scenarios.Options("distributed"), [None]) == 2
    assert scenarios.worker_count(scenarios.Options("distributed"), ["a", "b", "c"]) == 3
    assert scenarios.worker_count(scenarios.Options("distributed", workers=4), ["a", "b"]) == 4


def test_cpu_split_for_isolation() -> None:
    assert scenarios.split_cpus("0,1") == ("0", "1")
    assert scenarios.split_cpus("0,1,2,3,4,5,6,7") == ("0-3", "4-7")
    assert scenarios.split_cpus("2,3,5") == ("2", "3,5")
    with pytest.raises(ConfigError, match="--isolate needs at least 2 CPUs on the host; it has 1"):
        scenarios.split_cpus("0")
    with pytest.raises(ConfigError, match=r"--isolate needs at least 2 CPUs for vm on h1; it has 1"):
        scenarios.split_cpus("0", "for vm on h1")


def test_co_tenant_specs() -> None:
    fg = workload_spec(model="resnet50", image_size=64, batch_size=8, data="real", data_dir="/d", classes=3)
    co = scenarios.cotenant_spec("alexnet", 512, fg, None)
    assert (co.model, co.mode, co.batch_size, co.size, co.data, co.device) == (
        "alexnet",
        "train",
        512,
        64,
        "synthetic",
        "auto",
    )
    assert co.steps >= 10**9  # runs until it is stopped
    assert scenarios.cotenant_spec("cpu", 64, fg, "1").device == "cpu"
    assert scenarios.cotenant_spec("cpu", 64, fg, "1").cpus == "1"
    assert scenarios.cotenant_spec("gpu", 64, fg, None).device == "gpu"
    io = scenarios.cotenant_spec("io", 64, fg, None)
    assert (io.data, io.data_dir, io.classes) == ("real", "/d", 3)
    small = workload_spec(model="resnet50", image_size=32)
    assert scenarios.cotenant_spec("alexnet", 8, small, None).size >= 32


def test_contention_labels() -> None:
    assert scenarios.contention_label("alexnet", 512, None, None) == "alexnet b512"
    assert scenarios.contention_label("cpu", 64, "0-3", "4-7") == "cpu b64 isolated (cpus 0-3 / co-tenant 4-7)"


def test_repeat_auto_reads_the_widest_interval_of_the_compared_groups() -> None:
    """--repeat auto stops on the widest half-width of every group measured against bare metal; None
    while a compared group has no interval yet (one run a side), or when nothing is compared."""
    from dltestbed.report.stats import summarise
    from tests.conftest import make_run

    def runs(kind: str, values: list[float]) -> list:
        return [
            make_run(target_kind=kind, status="ok", images_per_sec=v, repetition=i + 1) for i, v in enumerate(values)
        ]

    bm = runs("bm", [100.0, 104.0, 98.0])
    assert scenarios.widest_half_width(bm) is None  # nothing compared
    assert scenarios.widest_half_width(bm + runs("cbm", [90.0])) is None  # cbm has no interval yet
    both = bm + runs("cbm", [90.0, 95.0, 91.0]) + runs("vm", [70.0, 88.0, 60.0])
    halves = {
        g.key.target_kind: (g.effect.hi_pct - g.effect.lo_pct) / 2 for g in summarise(both) if g.effect is not None
    }
    assert set(halves) == {"cbm", "vm"} and halves["vm"] > halves["cbm"] > 0
    assert scenarios.widest_half_width(both) == pytest.approx(halves["vm"])
