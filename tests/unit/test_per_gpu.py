"""--gpus per-gpu: a node's GPUs read before any run (nvidia-smi through a fake on PATH: there is no GPU here),
each run given its GPU by UUID and its NUMA node's CPUs, NVML restricted to that GPU, and the report telling the
runs apart by GPU (grouped and paired per GPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dltestbed.config import spec_json, workload_spec
from dltestbed.errors import ConfigError
from dltestbed.orchestrate import pergpu, preview, running
from dltestbed.orchestrate.scenarios import Options
from dltestbed.report.keys import GroupKey
from dltestbed.report.stats import pair_key
from dltestbed.results.records import RunRecord
from dltestbed.runtimes import ContainerOptions
from dltestbed.targets import ContainerImage, Site, make
from dltestbed.targets.container import ContainerTarget
from dltestbed.workload import gpu
from dltestbed.workload.gpu import Nvml
from tests import fakenvml
from tests.conftest import make_run
from tests.plans import plan_of

# the H100's UUID and bus id as its driver printed them (tests/data/gpu/h100), and a second board beside it
H100 = ("0", "GPU-c84fb4c3-541d-2de0-1924-81e2d03549d9", "00000000:00:06.0", "Disabled")
SECOND = ("1", "GPU-c84fb4c3-541d-2de0-1924-81e2d03549da", "00000000:00:07.0", "[N/A]")


def _slots_on(tmp_path: Path, stdout: str, rc: int = 0) -> str:
    """pergpu.SLOTS run for real by this Python, nvidia-smi a fake on PATH answering dltestbed's query alone."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    query = "--query-gpu=index,uuid,pci.bus_id,mig.mode.current --format=csv,noheader"
    smi.write_text(
        f'#!/bin/sh\nif [ "$*" != "{query}" ]; then echo "unknown: $*" >&2; exit 99; fi\n'
        f"cat <<'EOF'\n{stdout}EOF\nexit {rc}\n"
    )
    smi.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", pergpu.SLOTS], capture_output=True, text=True, env=env, check=True)
    return proc.stdout.splitlines()[0]


def test_a_nodes_gpus_are_read_by_uuid_and_bus_id(tmp_path: Path) -> None:
    rows = "".join(", ".join(g) + "\n" for g in (H100, SECOND))
    slots = pergpu.parse_slots(_slots_on(tmp_path, rows), "node1")
    assert [(s.index, s.uuid, s.pci_bus_id, s.label) for s in slots] == [
        (0, H100[1], H100[2], "gpu0"),
        (1, SECOND[1], SECOND[2], "gpu1"),
    ]
    assert all(s.cpus is None for s in slots)  # no such PCI device here: the kernel says no CPUs, none pinned
    with pytest.raises(ConfigError, match=r"no GPU on node1 \(nvidia-smi: NVIDIA-SMI has failed"):
        pergpu.parse_slots(_slots_on(tmp_path, "NVIDIA-SMI has failed because it couldn't communicate\n", 9), "node1")
    with pytest.raises(ConfigError, match=r"no GPU on node1 \(nvidia-smi lists none\)"):
        pergpu.parse_slots(_slots_on(tmp_path, ""), "node1")
    mig = ", ".join((*SECOND[:3], "Enabled")) + "\n"
    with pytest.raises(ConfigError, match="GPU 1 of node1 is in MIG mode"):
        pergpu.parse_slots(_slots_on(tmp_path, mig), "node1")
    env = {**os.environ, "PATH": str(tmp_path / "empty")}  # no driver at all: no GPU, in one line
    line = subprocess.run([sys.executable, "-c", pergpu.SLOTS], capture_output=True, text=True, env=env).stdout
    with pytest.raises(ConfigError, match=r"no GPU on node1 .*nvidia-smi"):
        pergpu.parse_slots(line, "node1")


def test_each_run_gets_its_gpu_and_the_cpus_of_its_numa_node_it_may_use() -> None:
    (slot,) = pergpu.parse_slots(json.dumps([[*SECOND, "8-15,24-31"]]), "node1")
    (spec,) = plan_of(models=["alexnet"], gpus="per-gpu").specs
    assert spec.gpus == "one"  # a process of per-gpu uses one GPU: the one it is given
    bound = slot.bind(spec)
    assert (bound.gpu, bound.gpu_index, bound.cpus, bound.gpus, bound.device) == (  # type: ignore[union-attr]
        SECOND[1],
        1,
        "8-15,24-31",
        "one",
        "gpu",  # a GPU CUDA cannot see fails the run: never the CPU's figures under a GPU's name
    )
    assert slot.bind(spec, pin=False).cpus is None  # cbm: the container's own limits say
    sent = json.loads(spec_json(bound))
    assert sent["gpu"] == SECOND[1] and sent["cpus"] == "8-15,24-31"
    assert "gpus" not in sent  # the workload runs on its one GPU
    pinned = slot.bind(spec.model_copy(update={"cpus": "0-3"}))
    assert pinned.cpus == "0-3"  # the user's own pinning is kept
    assert pergpu.usable("8-15,24-31", [*range(12), 30]) == "8-11,30"  # a job's cgroup: those it may use
    assert pergpu.usable("8-15", [0, 1]) == ""
    (odd,) = pergpu.parse_slots(json.dumps([[*H100, "not a list"]]), "node1")
    assert odd.cpus is None


def test_per_gpu_specs_say_what_does_not_go_together() -> None:
    """per-gpu is the controller's placement, which its plan holds; a spec holds the GPUs of one process, and the
    workload refuses per-gpu by the spec's own type."""
    with pytest.raises(ConfigError, match="--device cpu hides them"):
        plan_of(models=["alexnet"], gpus="per-gpu", device="cpu")
    with pytest.raises(ConfigError, match="--gpus: unknown placement 'all'; known: one, node, per-gpu"):
        plan_of(models=["alexnet"], gpus="all")
    with pytest.raises(ConfigError, match="a GPU's UUID as nvidia-smi -L prints it"):
        workload_spec(model="alexnet", gpu="0")
    with pytest.raises(ConfigError, match="--gpu names the one GPU of a run"):
        workload_spec(model="alexnet", gpu=H100[1], gpus="node")
    with pytest.raises(ConfigError, match="a distributed job's workers use theirs"):
        plan_of(models=["alexnet"], gpus="per-gpu", scenario="distributed")
    with pytest.raises(ConfigError, match="a distributed job's workers use theirs"):
        workload_spec(model="alexnet", gpus="node", distributed=True)
    from dltestbed.workload.args import parse

    with pytest.raises(ConfigError, match="--gpus: Input should be 'one' or 'node' \\(got 'per-gpu'\\)"):
        parse(["--spec", '{"model": "alexnet", "gpus": "per-gpu"}'])
    spec, _ = parse(["--spec", '{"model": "alexnet", "gpu": "MIG-0c6b2d1e-3f9a-5b7c-8d4e-2a1b3c4d5e6f"}'])
    assert spec.gpu.startswith("MIG-")  # type: ignore[union-attr]


def test_nvml_describes_and_samples_the_runs_gpu_alone() -> None:
    """Eight runs on a node each sample their own GPU: a neighbour's load, clocks or XIDs are not theirs."""
    fake = fakenvml.FakeNvml(fakenvml.several(fakenvml.h100_text(), 4))
    uuids = [d["uuid"] for d in Nvml(fake).devices()]
    mine = Nvml(fake, only=[uuids[2]])
    assert [d["index"] for d in mine.devices()] == [2] and len(mine.sample()) == 1
    assert gpu.visible_uuids(f" {uuids[2]} ") == [uuids[2]]
    assert gpu.visible_uuids("2") == gpu.visible_uuids("") == gpu.visible_uuids(None) == []  # indices: by bus id


def _record(gpu_uuid: str | None, index: int | None, kind: str = "bm") -> RunRecord:
    spec = {"gpu": gpu_uuid, "gpu_index": index} if gpu_uuid else {}
    return make_run(target_kind=kind, host="node1", spec=spec)


def test_the_report_tells_a_nodes_gpus_apart_and_pairs_each_with_itself() -> None:
    g0, g1 = _record(H100[1], 0), _record(SECOND[1], 1)
    assert (g0.unit, g1.unit, _record(None, None).unit) == ("node1/gpu0", "node1/gpu1", "node1")
    assert _record(SECOND[1], None).unit == "node1/" + SECOND[1]  # a spec without the index: the whole UUID
    assert GroupKey.of(g0, by_host=True) != GroupKey.of(g1, by_host=True)
    assert GroupKey.of(g0) == GroupKey.of(g1)  # over every GPU when rows are not per host
    # a layer's run on GPU 1 is paired with bare metal on GPU 1, not with whichever ran first
    assert pair_key(_record(SECOND[1], 1, "cbm")) == pair_key(g1) != pair_key(g0)


def test_a_cbm_container_sees_its_gpu_alone_on_its_nodes_cpus() -> None:
    """--gpus per-gpu on cbm: each run's container is given its GPU alone (Docker by --gpus, Podman by its CDI
    name) and that GPU's NUMA node's CPUs, unless the layout pins CPUs itself; a layout that chose the
    containers' GPUs itself is one line, not a silent override."""
    (slot,) = pergpu.parse_slots(json.dumps([[*SECOND, "8-15"]]), "node1")
    uuid = SECOND[1]
    for runtime, flag in (("docker", f'--gpus="device={uuid}"'), ("podman", f"--device=nvidia.com/gpu={uuid}")):
        target = make("cbm", Site(container=ContainerImage(runtime, "img:1", "sha256:1")))
        assert isinstance(target, ContainerTarget)
        target.confine(slot.uuid, slot.cpus)
        argv = target.runtime.run_argv(target.image, "c", ["true"], target.opts)
        assert flag in argv and "--cpuset-cpus=8-15" in argv
        assert not [a for a in argv if a in ("--gpus=all", "--device=nvidia.com/gpu=all")]
    own = ContainerOptions(gpus="auto", cpuset="0-3")
    target = make("cbm", Site(container=ContainerImage("docker", "img:1", "sha256:1", options=own)))
    assert isinstance(target, ContainerTarget)
    target.confine(slot.uuid, slot.cpus)
    assert (target.opts.gpus, target.opts.cpuset) == (uuid, "0-3")
    for chosen in ("0,1", None):
        layout = ContainerOptions(gpus=chosen)
        target = make("cbm", Site(container=ContainerImage("docker", "img:1", "sha256:1", options=layout)))
        assert isinstance(target, ContainerTarget)
        with pytest.raises(ConfigError, match="dltestbed_container_gpus"):
            target.confine(slot.uuid, slot.cpus)


def test_a_dry_run_and_the_announcement_count_per_gpu() -> None:
    """A dry run cannot know a node's GPUs (read when the bench starts): it says its count is per GPU. The
    announcement, made once they are read, counts every GPU's runs and names each target once."""
    plan = plan_of(models=["alexnet"], repeat=2, gpus="per-gpu")
    lines = preview.lines(plan, ["bm"], Options(), [None])
    assert lines[0].endswith(" on each GPU") and lines[-1].startswith("2 run(s) per GPU (--gpus per-gpu")
    machines = [[make("bm", Site())] for _ in range(4)]
    line = running.announce(plan, Options(), machines, [Site()])
    assert "= 8 run(s) on bm:local" in line and line.count("bm:local") == 1, line
    assert line.endswith(" (4 GPUs, each with its own runs)"), line
    aa = plan_of(models=["alexnet"], repeat=1, aa=True)  # a machine's own targets stay listed: bm twice
    line = running.announce(aa, Options(), [[make("bm", Site()), make("bm", Site())]], [Site()])
    assert line.count("bm:local") == 2, line


def test_the_probes_and_the_screen_run_per_gpu_and_allreduce_over_a_nodes_gpus() -> None:
    """--gpus reaches the probes: per-gpu makes a micro run (and a screen) per GPU, each given its GPU alone;
    node lets allreduce run between one machine's GPUs in one process; the workload refuses per-gpu itself."""
    from dltestbed.config import probe_spec
    from dltestbed.workload.args import parse

    plan = plan_of(suite="micro", probes=["gemm", "d2d"], gpus="per-gpu")
    (spec,) = plan.specs
    assert spec.gpus == "one" and plan.gpus == "per-gpu" and pergpu.wanted(plan)
    bound = pergpu.GpuSlot(3, H100[1], "0000:00:07.0", "0-7").bind(spec)
    assert (bound.gpus, bound.gpu, bound.gpu_index, bound.device) == ("one", H100[1], 3, "gpu")
    assert json.loads(spec_json(bound)) == {
        "model": "micro",
        "device": "gpu",
        "cpus": "0-7",
        "gpu": H100[1],
        "gpu_index": 3,
        "probes": ["gemm", "d2d"],
    }
    screen = plan_of(suite="screen", gpus="per-gpu")
    assert all(s.gpus == "one" for s in screen.specs) and pergpu.wanted(screen)
    node = probe_spec(probes=("allreduce",), gpus="node", cpu_devices=2)
    assert parse(["--spec", spec_json(node)])[0] == node
    with pytest.raises(ConfigError, match=r"allreduce runs between the workers of a job.*also between one machine's"):
        probe_spec(probes=("allreduce",))
    with pytest.raises(ConfigError, match="net runs between the workers of a job"):
        probe_spec(probes=("net",), gpus="node")
    with pytest.raises(ConfigError, match="--gpus: Input should be 'one' or 'node'"):
        parse(["--spec", '{"model": "micro", "probes": ["gemm"], "gpus": "per-gpu"}'])
    with pytest.raises(ConfigError, match="--cpu-devices splits the CPU into replicas for --gpus node"):
        probe_spec(probes=("gemm",), cpu_devices=2)
    assert plan_of(suite="micro", gpus="node").specs[0].probes == probe_spec().probes  # as before: no allreduce
