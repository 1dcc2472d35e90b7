"""The framework axis without running a model: the plan of two frameworks, bad names and combinations as one
line, PyTorch's rendezvous, what a framework's build is on this machine, and where it may run."""

from __future__ import annotations

import importlib.metadata as md
import json

import pytest

from dltestbed.config import ALONE_PROBES, FRAMEWORK_PROBES, PROBES, spec_json
from dltestbed.errors import ConfigError
from dltestbed.orchestrate import gpus
from dltestbed.orchestrate.preview import describe
from dltestbed.workload import probes
from dltestbed.workload.frameworks import REGISTRY, framework
from dltestbed.workload.frameworks.pytorch import PyTorch
from dltestbed.workload.frameworks.pytorch import probes as torchprobes
from dltestbed.workload.frameworks.tensorflow import probes as tfprobes
from tests.plans import plan_of


def test_two_frameworks_make_a_spec_each_per_model_in_turn() -> None:
    plan = plan_of(models=["alexnet", "resnet50"], frameworks=["tensorflow", "pytorch"])
    assert [(s.model, s.framework) for s in plan.specs] == [
        ("alexnet", "tensorflow"),
        ("alexnet", "pytorch"),
        ("resnet50", "tensorflow"),
        ("resnet50", "pytorch"),
    ]
    assert describe(plan.specs[1]).startswith("alexnet (pytorch) train ")
    assert describe(plan.specs[0]).startswith("alexnet train ")  # the default is not named: output unchanged
    assert [s.framework for s in plan_of(models=["alexnet"]).specs] == ["tensorflow"]


def test_the_probes_run_with_each_framework() -> None:
    """--suite micro (or full) with both frameworks: a probe run each, PyTorch's bringing its own gemm, conv,
    all-reduce and net; the screen stays TensorFlow's."""
    micro = plan_of(suite="micro", frameworks=["tensorflow", "pytorch"]).specs
    assert [(s.model, s.framework) for s in micro] == [("micro", "tensorflow"), ("micro", "pytorch")]
    # the memory, copy and disk probes need no framework's code: once, with the first
    assert micro[0].probes == ALONE_PROBES and micro[1].probes == ("gemm", "conv")
    assert [s.probes for s in plan_of(suite="micro", probes=["membw"], frameworks=["tensorflow", "pytorch"]).specs] == [
        ("membw",)
    ]
    framework_probes = tuple(p for p in PROBES if p in FRAMEWORK_PROBES)
    assert tuple(torchprobes.PROBES) == tuple(tfprobes.PROBES) == framework_probes  # each framework brings each
    assert set(probes.PROBES) == set(PROBES) - set(FRAMEWORK_PROBES)  # the catalog: those that need no framework
    full = plan_of(models=["alexnet"], suite="full", frameworks=["pytorch"]).specs
    assert [(s.model, s.framework) for s in full] == [("alexnet", "pytorch"), ("micro", "pytorch")]
    assert json.loads(spec_json(full[1]))["framework"] == "pytorch"
    screen = plan_of(suite="screen", frameworks=["pytorch"]).specs  # its checks are PyTorch's own too
    assert [(s.model, s.framework) for s in screen][1:] == [("micro", "pytorch")] and screen[0].framework == "pytorch"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"frameworks": ["caffe"]}, "--framework: unknown framework 'caffe'; known: tensorflow or pytorch"),
        ({"frameworks": ["pytorch"], "gpus": "node"}, "--gpus node runs one process over every GPU, which PyTorch"),
    ],
)
def test_bad_framework_choices_are_one_line(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        plan_of(**kwargs)


@pytest.mark.parametrize(
    ("flavor", "version", "pinned"),
    [
        ("cpu", "2.13.0+cpu", "torch==2.13.0+cpu"),
        ("cpu", "2.13.0", "torch==2.13.0+cpu"),
        ("gpu", "2.13.0+cpu", "torch==2.13.0"),
    ],
)
def test_pytorchs_build_follows_the_flavour(flavor: str, version: str, pinned: str) -> None:
    """The CPU build carries `+cpu` whatever the controller has; the GPU flavour takes PyPI's (CUDA) build."""
    assert PyTorch.pinned(flavor, version) == pinned


def test_pytorchs_rendezvous_round_trips() -> None:
    env = PyTorch().worker_env(["10.0.0.1:29500", "10.0.0.2:29500"], 1)
    assert env == {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}
    cluster = PyTorch().cluster(env)
    assert (cluster.index, cluster.size, cluster.workers[0]) == (1, 2, "10.0.0.1:29500")
    with pytest.raises(ConfigError, match=r"needs MASTER_PORT, RANK in the environment"):
        PyTorch().cluster({k: v for k, v in env.items() if k not in ("MASTER_PORT", "RANK")})
    with pytest.raises(ConfigError, match=r"^RANK 2 of WORLD_SIZE 2"):
        PyTorch().cluster({**env, "RANK": "2"})
    pt = framework("pytorch")
    assert pt.build({"pytorch": "2.13.0+cpu", "pytorch_cuda": None}) == "PyTorch 2.13.0+cpu (CPU build)"
    assert pt.build({"pytorch": "2.11.0", "pytorch_cuda": "13.0"}) == "PyTorch 2.11.0 (CUDA 13.0 build)"


def test_this_machines_builds_are_read_from_package_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    """This venv's torch is the CPU build (its version says +cpu) and TensorFlow is tensorflow-cpu: neither
    would use a GPU; a CUDA build of torch would (as the lent GPU machines have it)."""
    assert PyTorch.installed() == (f"torch {md.version('torch')}", False)
    assert REGISTRY["tensorflow"].installed() == ("tensorflow-cpu", False)
    local = gpus.Local(("pytorch",))
    assert local._without_cuda() is not None and local._without_cuda().endswith("not PyTorch's CUDA build")
    monkeypatch.setattr(PyTorch, "installed", classmethod(lambda cls: ("torch 2.11.0", True)))
    assert local._without_cuda() is None
    assert gpus.Local(("tensorflow", "pytorch"))._without_cuda() == "tensorflow-cpu, not TensorFlow's CUDA build"


def test_gpus_node_is_refused_for_a_framework_that_runs_a_process_per_gpu() -> None:
    with pytest.raises(ConfigError, match=r"^--gpus node runs one process over every GPU, which PyTorch does not"):
        plan_of(models=["alexnet"], frameworks=["pytorch"], gpus="node")
    assert plan_of(models=["alexnet"], gpus="node").specs[0].framework == "tensorflow"


def test_two_frameworks_are_compared_like_for_like_only() -> None:
    """Asked `auto`, TensorFlow's CUDA build ran on the GPU and torch's CPU build on the CPU: not a framework's
    difference, so no interval; on the same device, paired by repetition."""
    from dltestbed.report import versus
    from tests.conftest import make_run

    def runs(fw: str, device: str, ips: float) -> list:
        return [
            make_run(framework=fw, used_device=device, math="float32", repetition=i, status="ok", images_per_sec=v)
            for i, v in ((1, ips), (2, ips * 1.02), (3, ips * 0.99))
        ]

    (v,) = versus.compare([*runs("tensorflow", "gpu", 1000.0), *runs("pytorch", "cpu", 50.0)])
    assert v.effect is None and v.verdict == "not compared: tensorflow ran device gpu, pytorch cpu"
    (v,) = versus.compare([*runs("tensorflow", "cpu", 40.0), *runs("pytorch", "cpu", 50.0)])
    assert v.effect is not None and v.effect.method == "paired t on log ratios"
    assert v.verdict.startswith("faster by 25.0 %")


def test_gloo_is_given_the_interface_that_routes_to_the_rendezvous() -> None:
    """Each of this machine's IPv4 addresses is reached through its own interface (loopback's through lo); gloo
    would otherwise take the address the host name resolves to."""
    import socket

    import psutil

    from dltestbed.workload.frameworks.pytorch import route_interface

    own = {
        name: a.address
        for name, addrs in psutil.net_if_addrs().items()
        for a in addrs
        if a.family == socket.AF_INET and psutil.net_if_stats()[name].isup
    }
    assert own.get("lo") == "127.0.0.1"
    for name, address in own.items():
        assert route_interface(address, 29500) == name  # its own address: the source the kernel picks
    assert route_interface("127.0.0.1", 29500) == "lo"
