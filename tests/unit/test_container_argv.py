"""Container command construction for each runtime, on captured cases (pure; no runtime needed)."""

from __future__ import annotations

import pytest

from dltestbed.errors import ConfigError
from dltestbed.targets.container import ContainerOptions, remove_argv, run_argv

ARGV = ["/opt/dltestbed/venv/bin/python", "-m", "dltestbed.workload", "--model", "alexnet"]
IMG = "dltestbed-workload:abc"


def test_docker_defaults_are_unprivileged_host_network_and_removed() -> None:
    assert run_argv("docker", IMG, "c1", ARGV, ContainerOptions()) == [
        "docker", "run", "--rm", "--name", "c1", "--network=host", "--user=10001:10001", "--pull=never",
        IMG, *ARGV]  # fmt: skip


def test_podman_gpus_use_cdi_and_no_log_copy() -> None:
    out = run_argv("podman", IMG, "c1", ARGV, ContainerOptions(gpus="0,2", cpuset="0-7", memory="16g"))
    assert out[:9] == ["podman", "run", "--rm", "--name", "c1", "--network=host", "--user=10001:10001",
                       "--pull=never", "--log-driver=none"]  # fmt: skip
    assert out[9:13] == ["--device=nvidia.com/gpu=0", "--device=nvidia.com/gpu=2", "--cpuset-cpus=0-7",
                         "--memory=16g"]  # fmt: skip
    assert "--privileged" not in out and not any(a.startswith("--cap-add") for a in out)


@pytest.mark.parametrize(("gpus", "flag"), [("all", "--gpus=all"), ("1,3", '--gpus="device=1,3"')])
def test_docker_gpus(gpus: str, flag: str) -> None:
    assert flag in run_argv("docker", IMG, "c", ARGV, ContainerOptions(gpus=gpus))


def test_numa_pinning_binds_cpus_and_memory_to_the_gpu_node() -> None:
    out = run_argv("docker", IMG, "c", ARGV, ContainerOptions(numa_node=1, numa_cpus="16-31"))
    assert "--cpuset-cpus=16-31" in out and "--cpuset-mems=1" in out
    with pytest.raises(ConfigError, match="NUMA pinning needs the node's CPUs"):
        run_argv("docker", IMG, "c", ARGV, ContainerOptions(numa_node=1))


def test_privilege_only_when_asked() -> None:
    out = run_argv("docker", IMG, "c", ARGV, ContainerOptions(privileged=True, cap_add=("SYS_NICE",)))
    assert "--privileged" in out and "--cap-add=SYS_NICE" in out


def test_env_volumes_and_user_flags_keep_their_order_before_the_image() -> None:
    opts = ContainerOptions(env=(("A", "x y"),), volumes=("/data:/data:ro",), extra=("--shm-size=1g",))
    out = run_argv("docker", IMG, "c", ARGV, opts)
    i = out.index(IMG)
    assert out[i - 3 : i] == ["--volume=/data:/data:ro", "--env=A=x y", "--shm-size=1g"]
    assert out[i + 1 :] == ARGV


def test_apptainer_exec_with_nv_and_numactl() -> None:
    out = run_argv("apptainer", "/images/dlt.sif", "ignored", ARGV,
                   ContainerOptions(gpus="0", numa_node=0, numa_cpus="0-15"))  # fmt: skip
    assert out[:3] == ["numactl", "--physcpubind=0-15", "--membind=0"]
    assert out[3:8] == ["apptainer", "exec", "--containall", "--cleanenv", "--no-home"]
    assert "--nv" in out and "--env=APPTAINERENV_CUDA_VISIBLE_DEVICES=0" in out
    assert out[-len(ARGV) - 1 :] == ["/images/dlt.sif", *ARGV]


def test_removal_commands() -> None:
    assert remove_argv("docker", "c1") == ["docker", "rm", "--force", "c1"]
    assert remove_argv("podman", "c1") == ["podman", "rm", "--force", "--ignore", "c1"]
    assert remove_argv("apptainer", "c1") is None


def test_unknown_runtime() -> None:
    with pytest.raises(ConfigError, match="unknown container runtime 'lxc'; known: docker, podman, apptainer"):
        run_argv("lxc", IMG, "c", ARGV, ContainerOptions())
