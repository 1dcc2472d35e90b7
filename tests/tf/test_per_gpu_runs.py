"""--gpus per-gpu's fan-out with real workloads: a set of targets per GPU, all of a node's GPUs at once, each run
given its GPU (the UUID it sees alone) and its CPUs. There is no GPU here: the two GPUs are named as a node's
driver would list them, and each workload, started at once on its own CPU, fails closed, since CUDA sees no such
GPU (never the CPU's figures under a GPU's name); the bench itself refuses per-gpu on this machine before any run."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from dltestbed.orchestrate import pergpu
from dltestbed.orchestrate.scenarios import RunEnv, single
from dltestbed.requests.bench import Options
from dltestbed.results.store import Store
from dltestbed.runner import NullObserver
from dltestbed.targets import Site, make
from tests.conftest import one_error_line, run_cli
from tests.plans import plan_of

UUIDS = ("GPU-c84fb4c3-541d-2de0-1924-81e2d03549d9", "GPU-c84fb4c3-541d-2de0-1924-81e2d03549da")


def test_each_gpu_of_a_node_runs_at_once_on_its_own_cpu(tmp_path: Path) -> None:
    listed = [[str(i), u, f"00000000:00:0{6 + i}.0", "Disabled", str(i)] for i, u in enumerate(UUIDS)]  # CPU i
    slots = pergpu.parse_slots(json.dumps(listed), "local")
    plan = plan_of(models=["alexnet"], image_size=32, batch_size=4, warmup=1, steps=30, repeat=1, gpus="per-gpu")
    store = Store.open(tmp_path / "results.sqlite")
    machines = [[make("bm", Site())] for _ in slots]
    env = RunEnv(plan, [Site()], ["bm"], store, NullObserver(), Options(), machines=machines, gpus=slots)
    records = single.run_all(env)
    assert [r.status for r in records] == ["failed", "failed"]
    assert all("gpu" in (r.reason or "").lower() for r in records), [r.reason for r in records]
    assert sorted((r.spec["gpu"], r.spec["cpus"], r.spec["gpus"], r.spec["device"]) for r in records) == [
        (UUIDS[0], "0", "one", "gpu"),
        (UUIDS[1], "1", "one", "gpu"),
    ]
    assert sorted(r.unit.rsplit("/", 1)[1] for r in records) == ["gpu0", "gpu1"]  # the report tells them apart
    spans = [(datetime.fromisoformat(r.started_at), datetime.fromisoformat(r.finished_at or "")) for r in records]
    assert spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1]  # at once, not one after the other
    results = str(tmp_path / "refused.sqlite")
    refused = run_cli("bench", "--gpus", "per-gpu", "--targets", "bm", "-m", "alexnet", "--results", results)
    assert refused.returncode == 2
    assert one_error_line(refused).startswith("error: --gpus per-gpu: no GPU on bm:local (no nvidia-smi")


def test_a_nodes_gpus_take_the_copies_in_turn(tmp_path: Path) -> None:
    """The probes per GPU too (acceptance's copies): with in_turn a node's GPUs run one after another, since at
    once each would measure a share of the PCIe switch's uplink they share. Each run fails closed here."""
    listed = [[str(i), u, f"00000000:00:0{6 + i}.0", "Disabled", str(i)] for i, u in enumerate(UUIDS)]
    slots = pergpu.parse_slots(json.dumps(listed), "local")
    plan = plan_of(suite="micro", probes=["membw"], warmup=0, steps=1, repeat=1, gpus="per-gpu")
    store = Store.open(tmp_path / "results.sqlite")
    machines = [[make("bm", Site())] for _ in slots]
    turns = Options(gpus_in_turn=True)
    records = single.run_all(
        RunEnv(plan, [Site()], ["bm"], store, NullObserver(), turns, machines=machines, gpus=slots)
    )
    assert [(r.status, r.spec["gpu"], r.spec["device"]) for r in records] == [
        ("failed", UUIDS[0], "gpu"),
        ("failed", UUIDS[1], "gpu"),
    ]
    assert all("no GPU is visible" in (r.reason or "") for r in records), [r.reason for r in records]
    first, second = (
        (datetime.fromisoformat(r.started_at), datetime.fromisoformat(r.finished_at or "")) for r in records
    )
    assert first[1] <= second[0]  # one after the other
