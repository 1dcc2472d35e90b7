"""PyTorch beside TensorFlow, for real on this machine's CPU: the models layer for layer against Keras's, every
model trained and inferred, both frameworks in one bench and one report, determinism bit for bit, real data and
accuracy."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dltestbed.results.store import Store
from tests.conftest import run_cli

pytestmark = [pytest.mark.tf, pytest.mark.torch]

TINY = ["--image-size", "32", "--batch-size", "4", "--warmup", "1", "--steps", "3", "--targets", "bm"]
KINDS = {"Conv2D": "conv", "Dense": "dense", "BatchNormalization": "norm"}


def _built(name: str) -> int:
    """Keras's layers carry the order they were built in: ResNet's in their names (conv3_block2_1_conv),
    Inception's in their numbered defaults (conv2d_12); model.layers lists them by depth instead."""
    if m := re.fullmatch(r"conv(\d)_block(\d+)_(\d)_(conv|bn)", name):
        return int(m[1]) * 10**6 + int(m[2]) * 10**3 + int(m[3]) * 10 + (m[4] == "bn")
    if m := re.fullmatch(r"(conv2d|batch_normalization)(?:_(\d+))?", name):
        return int(m[2] or 0) * 10 + (m[1] == "batch_normalization")
    return {"conv1_conv": 0, "conv1_bn": 1}.get(name, 10**9)  # the stem first, the logits last


@pytest.mark.parametrize(("model", "size"), [("alexnet", 64), ("resnet50", 64), ("inception3", 75)])
def test_each_model_has_kerass_weights_layer_for_layer(model: str, size: int) -> None:
    """The same layers in the same order with the same weights each (Keras's count_params: a batch norm's
    moving statistics included), and the same total: ResNet-50 25,636,712 and Inception-v3 23,851,784 at
    1000 classes, Keras's published figures."""
    import keras

    from dltestbed.workload.frameworks.pytorch import models as torchmodels
    from dltestbed.workload.frameworks.tensorflow import models

    keras.backend.clear_session()  # default names numbered from 0 again (conv2d, conv2d_1, ...)
    keras_model = models.build(model, size, 1000)
    layers = sorted((x for x in keras_model.layers if x.count_params()), key=lambda x: _built(x.name))
    keras = [(KINDS[type(x).__name__], x.count_params()) for x in layers]
    torch = torchmodels.weights_per_layer(torchmodels.build(model, size, 1000))
    assert torch == keras
    assert sum(n for _, n in torch) == keras_model.count_params()


SMALL = {"image_size": 32, "batch_size": 4, "warmup": 1, "steps": 3}  # TINY's, as a spec's fields


def _workload(**fields: object) -> list[dict[str, Any]]:
    """PyTorch's workload run by hand with a spec of these fields."""
    proc = subprocess.run(
        [sys.executable, "-m", "dltestbed.workload", "--spec", json.dumps({"framework": "pytorch", **fields})],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines()]


@pytest.mark.parametrize(("model", "size"), [("alexnet", 32), ("resnet50", 32), ("inception3", 75)])
@pytest.mark.parametrize("mode", ["train", "infer"])
def test_every_model_trains_and_infers(model: str, size: int, mode: str) -> None:
    events = _workload(**SMALL | {"model": model, "image_size": size, "mode": mode})
    start = next(e for e in events if e["event"] == "start")
    assert start["spec"]["framework"] == "pytorch" and start["spec"]["device_used"] == "cpu"
    assert start["fingerprint"]["pytorch"].startswith("2.") and start["fingerprint"]["pytorch_cuda"] is None
    steps = [e for e in events if e["event"] == "step"]
    assert [s["phase"] for s in steps] == ["warmup", "timed", "timed", "timed"] and steps[0]["device"] == "cpu"
    summary = events[-1]
    assert summary["event"] == "summary" and summary["timed_steps"] == 3 and summary["images_per_sec"] > 0


def test_both_frameworks_in_one_bench_and_one_report(results: Path) -> None:
    """--framework tensorflow,pytorch: each model with each, interleaved; the report never averages them
    together (a group each, a framework column), and each framework's deterministic repetitions agree bit for
    bit with its own first."""
    proc = run_cli(
        "bench",
        "-m",
        "alexnet",
        "--framework",
        "tensorflow,pytorch",
        "--deterministic",
        *TINY,
        "--repeat",
        "2",
        "--format",
        "json",
        "--results",
        str(results),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads(proc.stdout)
    assert [(r["framework"], r["repetition"], r["status"]) for r in runs] == [
        ("tensorflow", 1, "ok"),
        ("pytorch", 1, "ok"),
        ("tensorflow", 2, "ok"),
        ("pytorch", 2, "ok"),
    ]
    report = json.loads(run_cli("report", "--format", "json", "--results", str(results)).stdout)
    assert sorted(g["key"]["framework"] for g in report["groups"]) == ["pytorch", "tensorflow"]
    (versus,) = report["frameworks"]  # NYSDS'17's question: the second framework against the first, paired
    assert (versus["first"], versus["other"], versus["runs"], versus["effect"]["method"]) == (
        "tensorflow",
        "pytorch",
        2,
        "paired t on log ratios",
    )
    assert versus["first_launch"] > 0 and versus["other_launch"] > 0
    agreed = {(a["framework"], a["verdict"], a["steps_compared"]) for a in report["agreement"]}
    assert agreed == {("tensorflow", "identical", 4), ("pytorch", "identical", 4)}
    md = run_cli("report", "--results", str(results)).stdout
    assert "| bm | alexnet | pytorch | " in md and "| bm | alexnet | tensorflow | " in md  # time per run
    assert "| alexnet (pytorch) | bm |" in md and "| alexnet (tensorflow) | bm |" in md  # same answer
    assert "## Framework against framework" in md and "| bm | alexnet | float32 | 4 | 32 | tensorflow |" in md


def test_real_data_and_accuracy(results: Path, dataset_dir: Path) -> None:
    proc = run_cli(
        "bench",
        "-m",
        "alexnet",
        "--framework",
        "pytorch",
        "--data",
        "real",
        "--data-dir",
        str(dataset_dir),
        "--accuracy",
        *TINY,
        "--repeat",
        "1",
        "--format",
        "json",
        "--results",
        str(results),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = json.loads(proc.stdout)
    assert (run["framework"], run["status"], run["eval_images"]) == ("pytorch", "ok", 3)
    assert 0 <= run["eval_correct"] <= 3


def test_a_ddp_job_of_two_gloo_workers(results: Path) -> None:
    """--scenario distributed: two workers on loopback join through torch.distributed's env:// rendezvous (the
    controller's MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE), all-reduce their gradients over gloo and report
    the same averaged loss at every step."""
    proc = run_cli(
        "bench", "--framework", "pytorch", "--scenario", "distributed", "-m", "alexnet", *TINY[:8], "--repeat", "1",
        "--format", "json", "--results", str(results),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads(proc.stdout)
    workers = sorted((r for r in runs if r["worker_index"] is not None), key=lambda r: r["worker_index"])
    assert [(w["worker_index"], w["status"], w["framework"]) for w in workers] == [
        (0, "ok", "pytorch"),
        (1, "ok", "pytorch"),
    ]
    facts = [(w["fingerprint"][k] for k in ("collective", "workers", "replicas")) for w in workers]
    assert [tuple(f) for f in facts] == [("gloo", 2, 2), ("gloo", 2, 2)]

    store = Store.open(results)
    losses = [[s.result for s in store.steps(w["id"])] for w in workers]
    store.close()
    assert losses[0] == losses[1] and len(losses[0]) == 4  # every step's loss is the job's, averaged


def test_the_shared_scenario_with_a_pytorch_co_tenant(results: Path) -> None:
    """--scenario shared: a PyTorch foreground alone, then beside a PyTorch co-tenant (the foreground's
    framework) that started before it was timed and stopped after; the report's shared section pairs them."""
    proc = run_cli(
        "bench", "--framework", "pytorch", "--scenario", "shared", "-m", "alexnet", *TINY, "--steps", "6",
        "--repeat", "1", "--cotenant-batch", "16", "--format", "json", "--results", str(results),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads(proc.stdout)
    assert sorted((r["role"], r["contention"], r["framework"], r["status"]) for r in runs) == [
        ("cotenant", "alexnet b16", "pytorch", "ok"),
        ("foreground", "alexnet b16", "pytorch", "ok"),
        ("foreground", "none", "pytorch", "ok"),
    ]
    under = next(r for r in runs if r["role"] == "foreground" and r["contention"] != "none")
    co = next(r for r in runs if r["role"] == "cotenant")
    assert co["batch_size"] == 16 and co["steps_done"] >= 2
    assert co["started_at"] <= under["started_at"] and co["finished_at"] >= under["finished_at"]
    report = json.loads(run_cli("report", "--format", "json", "--results", str(results)).stdout)
    (shared,) = report["shared"]
    assert shared["contention"] == "alexnet b16" and shared["pairs"] == 1


def test_pytorchs_own_probes_checked_against_float64(results: Path) -> None:
    """--suite micro --framework pytorch: PyTorch's own gemm and conv (NCHW, TensorFlow's SAME padding), the same
    cases as TensorFlow's, each product checked against float64 on the device; the report names the framework
    beside each case and never averages the two frameworks' cases together."""
    proc = run_cli(
        "bench", "--suite", "micro", "--framework", "tensorflow,pytorch", "--probes", "gemm,conv", "--warmup", "0",
        "--steps", "2", "--repeat", "1", "--targets", "bm", "--format", "json", "--results", str(results),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads(proc.stdout)
    assert [(r["framework"], r["model"], r["status"]) for r in runs] == [
        ("tensorflow", "micro", "ok"),
        ("pytorch", "micro", "ok"),
    ]
    assert runs[1]["fingerprint"]["pytorch"] and runs[1]["fingerprint"].get("tensorflow") is None
    report = json.loads(run_cli("report", "--format", "json", "--results", str(results)).stdout)
    cases = report["micro"]["cases"]
    assert all(c["runs"] == 1 for c in cases)  # a case each per framework
    by = {(c["key"]["framework"], c["key"]["case"]) for c in cases}
    for fw in ("tensorflow", "pytorch"):
        assert (fw, "float32 n=512") in by and (fw, "alexnet conv2 5x5 96-256 at 7x7") in by
    rows = report["checks"]["rows"]
    assert {r["probe"] for r in rows} == {"gemm", "conv"} and all(r["failed"] == 0 for r in rows)
    assert sum(r["checks"] for r in rows) == 2 * (1 + 3)  # per framework: gemm at size, the three convolutions
    md = run_cli("report", "--results", str(results)).stdout
    assert "| gemm | float32 n=512 (pytorch) | bm | 1 |" in md and "| gemm | float32 n=512 | bm | 1 |" in md


def test_a_screen_in_pytorch(results: Path) -> None:
    """--suite screen --framework pytorch: PyTorch's own gemm and conv products checked against float64 and
    against themselves for the screen's time, and the deterministic training of rep 2 bit for bit rep 1's."""
    tiny = ["--image-size", "32", "--batch-size", "4", "--warmup", "1", "--steps", "3", "--repeat", "2"]
    proc = run_cli(
        "bench", "--suite", "screen", "--framework", "pytorch", "--screen-time", "1", "--targets", "bm", *tiny,
        "--format", "json", "--results", str(results),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert {r["framework"] for r in json.loads(proc.stdout)} == {"pytorch"}
    report = json.loads(run_cli("report", "--format", "json", "--results", str(results)).stdout)
    rows = {r["probe"]: r for r in report["checks"]["rows"]}
    assert set(rows) == {"gemm", "conv"} and report["checks"]["mismatches"] == []
    assert all(r["framework"] == "pytorch" and r["failed"] == 0 for r in rows.values())
    assert all(r["kinds"] == ["reference", "repeat"] and r["checks"] >= 2 for r in rows.values())
    (same,) = report["agreement"]
    assert (same["framework"], same["verdict"], same["steps_compared"]) == ("pytorch", "identical", 4)


@pytest.mark.parametrize(("h", "w", "k", "stride"), [(7, 7, 5, 1), (8, 8, 3, 2), (7, 9, 4, 2)])
def test_pytorchs_convolution_pads_as_tensorflows_same(h: int, w: int, k: int, stride: int) -> None:
    """The conv probe's convolution in PyTorch (NCHW) gives TensorFlow's SAME convolution (NHWC), odd padding
    and strides included: the same case measures the same arithmetic in both frameworks."""
    import numpy as np
    import tensorflow as tf
    import torch

    from dltestbed.workload.frameworks.pytorch.checks import convolve

    rng = np.random.default_rng(0)
    x, f = rng.standard_normal((1, h, w, 3)).astype("float32"), rng.standard_normal((k, k, 3, 4)).astype("float32")
    want = tf.nn.conv2d(x, f, stride, "SAME").numpy()
    got = convolve(torch, torch.from_numpy(x).permute(0, 3, 1, 2), torch.from_numpy(f).permute(3, 2, 0, 1), stride)
    assert got.permute(0, 2, 3, 1).numpy() == pytest.approx(want, abs=1e-4)


def test_pytorchs_collectives_between_two_workers(results: Path) -> None:
    """--suite micro --scenario distributed --framework pytorch: all-reduce and the all-gather between two gloo
    workers through torch.distributed, the calls calibrated together, each size's sums checked exactly."""
    proc = run_cli(
        "bench", "--scenario", "distributed", "--suite", "micro", "--framework", "pytorch", "--warmup", "0",
        "--steps", "2", "--repeat", "1", "--format", "json", "--results", str(results),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads(proc.stdout)
    assert sorted(r["worker_index"] for r in runs) == [0, 1]
    assert all(r["status"] == "ok" and r["framework"] == "pytorch" for r in runs)
    assert all(r["fingerprint"]["collective"] == "gloo" for r in runs)
    report = json.loads(run_cli("report", "--format", "json", "--results", str(results)).stdout)
    (checked,) = report["checks"]["rows"]
    assert (checked["probe"], checked["checks"], checked["failed"], checked["worst_share"]) == ("allreduce", 6, 0, 0)
    cases = report["micro"]["cases"]
    assert [c["key"]["case"] for c in cases][:2] == ["latency: 4 B all-reduce", "all-gather 4 MiB a worker: received"]
    assert all(c["runs"] == 2 and c["key"]["framework"] == "pytorch" for c in cases)
    by = {c["key"]["case"]: c["value"]["mean"] for c in cases}
    assert by["4 MiB busbw"] == pytest.approx(by["4 MiB algbw"]) and 0 < by["latency: 4 B all-reduce"] < 1


@pytest.mark.parametrize("option", [{"math": "mixed_bfloat16"}, {"math": "mixed_float16"}, {"xla": True}])
def test_math_modes_and_compile(option: dict[str, object]) -> None:
    """Autocast in bfloat16, autocast in float16 with the gradient scaler, and torch.compile (--xla's
    counterpart) each train: finite losses, the math the run used in its start event."""
    events = _workload(model="alexnet", **SMALL, **option)
    start = next(e for e in events if e["event"] == "start")
    assert start["spec"]["math"] == option.get("math", "float32")
    assert start["spec"]["xla"] is option.get("xla", False)
    losses = [e["result"] for e in events if e["event"] == "step"]
    assert len(losses) == 4 and all(0 < x < 20 for x in losses)


@pytest.mark.parametrize("math", ["float32", "tf32", "bfloat16", "float16"])
def test_a_flipped_top_exponent_bit_is_always_caught_and_a_lowest_significand_bit_never(math: str) -> None:
    """The screen's check (torchchecked.gemm_check) with one bit flipped in one element of its product, through
    its product hook (bench/screen_sensitivity.py measures every position): the exponent's highest bit makes the
    element huge or nearly 0, always beyond the bound; the significand's lowest is a rounding's size, never."""
    import numpy as np
    import torch

    from bench.screen_sensitivity import Flip, bits
    from dltestbed.workload.frameworks.pytorch import checks as torchchecked

    plain, rng, seen = torchchecked.product, np.random.default_rng(7), {}
    try:
        for name in ("exponent, highest", "significand, lowest"):
            hits = 0
            for seed in range(15):
                torchchecked.product = Flip(bits(math)[name], rng)
                (ref,) = torchchecked.gemm_check(torch, "cpu", None, 128, math)(seed)
                hits += ref.verdict.mismatches > 0
            seen[name] = hits
    finally:
        torchchecked.product = plain
    assert seen == {"exponent, highest": 15, "significand, lowest": 0}
