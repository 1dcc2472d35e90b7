"""Options that need a GPU (--device gpu, --math tf32, --gpu-memory-mib, --cotenant gpu) are judged before any
run, where the launcher sees the targets' GPUs: on a target known to have none, one line and nothing stored,
--dry-run included; where a GPU is seen (a fake nvidia-smi answering with the captured H100), the bench goes
on; where it cannot be known before running, the bench says so and goes on."""

from __future__ import annotations

import os
import shlex
import stat
import types
from pathlib import Path

import pytest

from dltestbed.choices import Device
from dltestbed.errors import ConfigError
from dltestbed.inventory import Host
from dltestbed.orchestrate import (
    BenchRequest,
    Compute,
    Launch,
    Silent,
    Where,
    Workloads,
    gpus,
    prepare,
    run_bench,
)
from dltestbed.orchestrate.launchers import Direct, Slurm
from dltestbed.orchestrate.scenarios import Options
from dltestbed.provision import localfacts
from dltestbed.targets import Site
from dltestbed.vms.settings import VMSettings
from dltestbed.workload.frameworks.tensorflow import TensorFlow
from tests.conftest import one_error_line, run_cli
from tests.plans import plan_of

H100 = ["0, NVIDIA H100 80GB HBM3, 550.54.15, 81559 MiB, 00000000:1B:00.0"]  # tests/data/gpu/h100/query.csv
QUERY = " ".join(localfacts.NVIDIA_SMI[1:])


def fake_smi(bin_dir: Path, lines: list[str], rc: int = 0, err: str = "") -> Path:
    """A fake nvidia-smi in bin_dir: dltestbed's query gets `lines` and `rc`, anything else exits 99."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "nvidia-smi"
    body = "\n".join(f"echo {shlex.quote(line)}" for line in lines)
    script.write_text(
        f'#!/bin/sh\nif [ "$*" != "{QUERY}" ]; then echo "fake nvidia-smi: unknown: $*" >&2; exit 99\n'
        f"fi\n{body}\necho {shlex.quote(err)} >&2\nexit {rc}\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return bin_dir


@pytest.fixture
def no_gpu_env(tmp_path: Path) -> dict[str, str]:
    """This machine as a user without a GPU has it, for certain: nvidia-smi answers `No devices were found`."""
    bin_dir = fake_smi(tmp_path / "bin", ["No devices were found"], rc=6)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


TINY = ["-m", "alexnet", "--image-size", "32", "--batch-size", "2", "--warmup", "1", "--steps", "2", "--repeat", "1"]


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "run"])
def test_device_gpu_without_one_is_one_line_before_any_run(
    dry_run: bool, results: Path, no_gpu_env: dict[str, str]
) -> None:
    args = ["bench", "--device", "gpu", "--targets", "bm", *TINY, "--results", str(results)]
    proc = run_cli(*args, *(["--dry-run"] if dry_run else []), env=no_gpu_env)
    line = one_error_line(proc)
    assert line == (
        "error: --device gpu: no GPU on bm:local (nvidia-smi fails on this machine: No devices were found); "
        "use --device auto or cpu"
    )
    assert proc.returncode == 2 and "rep 1" not in proc.stdout and not results.exists()  # no run, no store


@pytest.mark.skipif(bool(gpus.Local().used_gpus()), reason="this machine's TensorFlow has a GPU")
def test_device_gpu_on_this_gpu_less_machine_as_it_is(results: Path) -> None:
    """The issue's command, on this machine as it is (no NVIDIA driver, or TensorFlow's CPU build)."""
    proc = run_cli("bench", "--device", "gpu", "--targets", "bm", "-m", "alexnet", "--results", str(results))
    line = one_error_line(proc)
    assert line.startswith("error: --device gpu: no GPU on bm:local (") and line.endswith("; use --device auto or cpu")
    assert not results.exists()


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (
            ["--math", "tf32"],
            "error: --math tf32: no GPU on bm:local (nvidia-smi fails on this machine: No devices were found); "
            "TF32 is the tensor-core math of an Ampere-or-later GPU; use --math float32",
        ),
        (
            ["--gpu-memory-mib", "1024"],
            "error: --gpu-memory-mib 1024: no GPU on bm:local (nvidia-smi fails on this machine: No devices were "
            "found); it sizes GPU memory: leave it out there",
        ),
    ],
    ids=["tf32", "gpu-memory-mib"],
)
def test_gpu_only_options_without_a_gpu_are_one_line(
    option: list[str], message: str, results: Path, no_gpu_env: dict[str, str]
) -> None:
    proc = run_cli("bench", "--dry-run", *option, "--targets", "bm", *TINY, "--results", str(results), env=no_gpu_env)
    assert one_error_line(proc) == message


def test_gpu_memory_with_device_cpu_is_refused_by_the_plan() -> None:
    with pytest.raises(ConfigError, match="--gpu-memory-mib sizes GPU memory, and --device cpu hides the GPUs"):
        plan_of(device="cpu", gpu_memory_mib=1024)


def _request(device: Device = "auto", **compute: object) -> BenchRequest:
    where = Where(targets=("bm",), device=device)
    return BenchRequest(Workloads(models=("alexnet",)), where, compute=Compute(**compute), dry_run=True)  # type: ignore[arg-type]


def test_the_check_passes_where_a_gpu_is_seen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The captured H100's nvidia-smi answer and TensorFlow's CUDA build: --device gpu and --math tf32 plan."""
    monkeypatch.setenv("PATH", f"{fake_smi(tmp_path / 'bin', H100)}:{os.environ['PATH']}")
    monkeypatch.setattr(TensorFlow, "installed", classmethod(lambda cls: ("tensorflow", True)))

    said: list[str] = []

    class Heard(Silent):
        def say(self, line: str) -> None:
            said.append(line)

    out = run_bench(_request(device="gpu", math="tf32", gpu_memory_mib=4096), Heard())
    assert out.planned[-1] == "3 run(s); none was run (--dry-run)"
    assert said == ["--preset auto: gpu, for this machine's NVIDIA H100 80GB HBM3 (1 GPU(s))"]  # no note
    assert "alexnet train synthetic 224px bs512 auto+200 steps tf32" in out.planned[0]


def test_a_cpu_build_of_tensorflow_sees_no_gpu_on_bare_metal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """nvidia-smi lists a GPU, but this venv's TensorFlow is tensorflow-cpu: bm has none; cbm (an image of the
    GPU flavour, given the host's GPUs) has it."""
    monkeypatch.setenv("PATH", f"{fake_smi(tmp_path / 'bin', H100)}:{os.environ['PATH']}")
    local = gpus.Local()
    monkeypatch.setattr(TensorFlow, "installed", classmethod(lambda cls: ("tensorflow-cpu", False)))
    bm, cbm = local.seen("bm"), local.seen("cbm")
    assert (bm.has, cbm.has) == (False, True)
    assert bm.how == "nvidia-smi lists 1 on this machine, but this venv has tensorflow-cpu, not TensorFlow's CUDA build"
    with pytest.raises(ConfigError, match=r"^--device gpu: no GPU on bm:local \(nvidia-smi lists 1"):
        run_bench(_request(device="gpu"), Silent())


def test_no_driver_is_no_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi at all
    seen = gpus.Local().seen("bm")
    assert seen == gpus.Seen("bm:local", False, "no nvidia-smi on this machine: no NVIDIA driver")


def test_needs_name_each_gpu_option_as_given() -> None:
    plan = plan_of(models=["alexnet"], device="gpu", math="tf32", gpu_memory_mib=2048)
    need = gpus.needs(plan, Options("shared", cotenant="gpu"))
    assert [n.option for n in need] == ["--device gpu", "--math tf32", "--gpu-memory-mib 2048", "--cotenant gpu"]
    assert gpus.needs(plan_of(models=["alexnet"], math="mixed"), Options()) == []  # mixed runs on a CPU
    assert gpus.needs(plan_of(preset_name="gpu"), Options()) == []


def test_unknown_is_said_not_refused_and_known_none_is_refused() -> None:
    need = [gpus.Need("--math tf32", "use --math float32")]
    unknown = gpus.Seen("bm on Slurm's nodes", None, "Slurm's nodes are known once it allocates them")
    assert gpus.check(need, [gpus.Seen("bm:h1", True, "nvidia-smi lists 8 on h1"), unknown]) == [
        "note: --math tf32: whether bm on Slurm's nodes has a GPU is known only once it runs (Slurm's nodes are "
        "known once it allocates them); a run without one fails"
    ]
    with pytest.raises(ConfigError, match=r"^--math tf32: no GPU on vm:h1 \(x\); use --math float32$"):
        gpus.check(need, [unknown, gpus.Seen("vm:h1", False, "x")])
    assert gpus.check([], [gpus.Seen("vm:h1", False, "x")]) == []


def test_the_shared_scenarios_two_pools_must_fit_the_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--gpu-memory-mib gives the co-tenant a pool of the same size on the same GPU: both pools and both CUDA
    contexts must fit the captured H100's 81559 MiB, before any run; the cpu co-tenant and the single scenario
    hold one pool."""
    monkeypatch.setenv("PATH", f"{fake_smi(tmp_path / 'bin', H100)}:{os.environ['PATH']}")
    seen = [gpus.Local().seen("cbm")]
    assert seen[0].memory_mib == 81559
    fits = 81559 // 2 - gpus.CUDA_CONTEXT_MIB
    gpus.fit(plan_of(models=["alexnet"], gpu_memory_mib=fits), Options("shared"), seen)
    too_big = plan_of(models=["alexnet"], gpu_memory_mib=fits + 1)
    with pytest.raises(ConfigError) as err:
        gpus.fit(too_big, Options("shared"), seen)
    need = 2 * (fits + 1 + gpus.CUDA_CONTEXT_MIB)
    assert str(err.value) == (
        f"--gpu-memory-mib {fits + 1} with --scenario shared: the foreground's and the co-tenant's pools and their "
        f"CUDA contexts need about 2 x ({fits + 1} + {gpus.CUDA_CONTEXT_MIB}) = {need} MiB, and the GPU of cbm:local "
        f"has 81559 MiB; give each at most {fits}, or --cotenant cpu"
    )
    gpus.fit(too_big, Options("shared", cotenant="cpu"), seen)
    gpus.fit(too_big, Options(), seen)
    gpus.fit(too_big, Options("shared"), [gpus.Seen("bm on Slurm's nodes", None, "known once allocated")])


def test_slurm_nodes_are_known_once_allocated() -> None:
    seen = Slurm(BenchRequest(launch=Launch("slurm")), 2).seen_gpus(["bm", "cbm", "bm"], gpus.Local())
    assert [(s.target, s.has) for s in seen] == [("bm on Slurm's nodes", None), ("cbm on Slurm's nodes", None)]


def _host(name: str) -> Host:
    return Host(name, "10.0.0.1", 22, None, None, (), ("bare_metal",))


def test_each_target_of_each_host_from_its_facts_or_its_vm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hosts read over SSH (here faked): a GPU, no driver, unreadable; a host that is down is not judged; a VM
    has the GPUs passed through or none; cvm none in this version."""
    answers = {
        "gpu": ({"nvidia_smi_rc": 0, "nvidia_smi": H100}, ""),
        "cpu": ({"nvidia_smi_rc": 127, "nvidia_smi": []}, ""),
        "odd": (None, "its GPUs could not be read: sh: permission denied"),
    }
    asked: list[str] = []

    def host_gpus(host: Host) -> tuple[dict[str, object] | None, str]:
        asked.append(host.name)
        return answers[host.name]

    monkeypatch.setattr(prepare, "host_gpus", host_gpus)
    hosts = [_host(n) for n in ("gpu", "cpu", "odd", "down")]
    sites = [Site(host=h, down="no answer" if h.name == "down" else None) for h in hosts]
    passed = types.SimpleNamespace(settings=VMSettings(gpus="all", image="/images/cuda.qcow2"))
    vms = [passed, types.SimpleNamespace(settings=VMSettings()), passed, None]
    launcher = Direct(BenchRequest(where=Where(targets=("bm", "vm", "cvm"))))
    launcher._checked = prepare.Checked(prepare.Setup(("bm", "vm", "cvm"), tuple(hosts)), sites, vms)  # type: ignore[arg-type]
    seen = {s.target: s for s in launcher.seen_gpus(["bm", "vm", "cvm", "bm"], gpus.Local())}
    assert sorted(asked) == ["cpu", "gpu", "odd"]  # once each, the host that is down not at all
    assert {t: s.has for t, s in seen.items()} == {
        "bm:gpu": True,
        "vm:gpu": True,
        "cvm:gpu": False,
        "bm:cpu": False,
        "vm:cpu": False,
        "cvm:cpu": False,
        "bm:odd": None,
        "vm:odd": True,
        "cvm:odd": False,
    }
    assert seen["bm:cpu"].how == "no nvidia-smi on cpu: no NVIDIA driver"
    assert seen["vm:cpu"].how == "its VM has no GPU passed through: --vm-gpus or dltestbed_vm_gpus gives it one"
    assert seen["bm:odd"].how == "its GPUs could not be read: sh: permission denied"


def test_no_target_is_judged_when_no_option_needs_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU check costs a bench without GPU options nothing: no host's GPUs are read."""

    def seen_gpus(self: Direct, kinds: list[str], local: gpus.Local) -> list[gpus.Seen]:
        raise AssertionError("targets' GPUs read without a GPU option")

    monkeypatch.setattr(Direct, "seen_gpus", seen_gpus)
    out = run_bench(_request(device="auto", math="mixed"), Silent())
    assert out.planned[-1].endswith("none was run (--dry-run)")
