"""Container command construction for each runtime, on captured cases (pure; no runtime needed)."""

from __future__ import annotations

import pytest

from dltestbed.errors import ConfigError
from dltestbed.runtimes import ContainerOptions, runtime

ARGV = ["/opt/dltestbed/venv/bin/python", "-m", "dltestbed.workload", "--model", "alexnet"]
IMG = "dltestbed-workload:abc"


def test_docker_defaults_are_unprivileged_host_network_and_removed() -> None:
    assert runtime("docker").run_argv(IMG, "c1", ARGV, ContainerOptions(labels=(("dltestbed.owner", "me@h-1"),))) == [
        "docker",
        "run",
        "--rm",
        "--interactive",
        "--name",
        "c1",
        "--network=host",
        "--user=10001:10001",
        "--pull=never",
        "--label=dltestbed.owner=me@h-1",
        IMG,
        *ARGV,
    ]


def test_podman_gpus_use_cdi_and_no_log_copy() -> None:
    out = runtime("podman").run_argv(IMG, "c1", ARGV, ContainerOptions(gpus="0,2", cpuset="0-7", memory="16g"))
    assert out[:10] == [
        "podman",
        "run",
        "--rm",
        "--interactive",
        "--name",
        "c1",
        "--network=host",
        "--user=10001:10001",
        "--pull=never",
        "--log-driver=none",
    ]
    assert out[10:14] == ["--device=nvidia.com/gpu=0", "--device=nvidia.com/gpu=2", "--cpuset-cpus=0-7", "--memory=16g"]
    assert "--privileged" not in out and not any(a.startswith("--cap-add") for a in out)


@pytest.mark.parametrize(("gpus", "flag"), [("all", "--gpus=all"), ("1,3", '--gpus="device=1,3"')])
def test_docker_gpus(gpus: str, flag: str) -> None:
    assert flag in runtime("docker").run_argv(IMG, "c", ARGV, ContainerOptions(gpus=gpus))


def test_numa_pinning_binds_cpus_and_memory_to_the_gpu_node() -> None:
    out = runtime("docker").run_argv(IMG, "c", ARGV, ContainerOptions(numa_node=1, numa_cpus="16-31"))
    assert "--cpuset-cpus=16-31" in out and "--cpuset-mems=1" in out
    with pytest.raises(ConfigError, match="NUMA pinning needs the node's CPUs"):
        runtime("docker").run_argv(IMG, "c", ARGV, ContainerOptions(numa_node=1))


def test_privilege_only_when_asked() -> None:
    out = runtime("docker").run_argv(IMG, "c", ARGV, ContainerOptions(privileged=True, cap_add=("SYS_NICE",)))
    assert "--privileged" in out and "--cap-add=SYS_NICE" in out


def test_env_volumes_and_user_flags_keep_their_order_before_the_image() -> None:
    opts = ContainerOptions(env=(("A", "x y"),), volumes=("/data:/data:ro",), extra=("--shm-size=1g",))
    out = runtime("docker").run_argv(IMG, "c", ARGV, opts)
    i = out.index(IMG)
    assert out[i - 3 : i] == ["--volume=/data:/data:ro", "--env=A=x y", "--shm-size=1g"]
    assert out[i + 1 :] == ARGV


def test_removal_commands() -> None:
    assert runtime("docker").remove_argv("c1") == ["docker", "rm", "--force", "c1"]
    assert runtime("podman").remove_argv("c1") == ["podman", "rm", "--force", "--ignore", "c1"]


def test_unknown_runtime() -> None:
    with pytest.raises(
        ConfigError, match=r"unknown container runtime 'lxc'; known: docker, podman, podman-rootless, charliecloud$"
    ):
        runtime("lxc")


def test_options_from_inventory_variables() -> None:
    from dltestbed.targets.container import options_from_vars

    assert options_from_vars({}) == ContainerOptions(gpus="auto")
    opts = options_from_vars(
        {
            "dltestbed_container_gpus": "none",
            "dltestbed_container_cpuset": "0-3",
            "dltestbed_container_memory": "8g",
            "dltestbed_container_network": "bridge",
            "dltestbed_container_numa_node": 1,
            "dltestbed_container_privileged": True,
            "dltestbed_container_cap_add": ["SYS_NICE"],
            "dltestbed_container_volumes": "/data:/data:ro",
            "dltestbed_container_args": ["--shm-size=2g"],
        }
    )
    assert opts == ContainerOptions(
        gpus=None,
        cpuset="0-3",
        memory="8g",
        network="bridge",
        numa_node=1,
        privileged=True,
        cap_add=("SYS_NICE",),
        volumes=("/data:/data:ro",),
        extra=("--shm-size=2g",),
    )
    with pytest.raises(ConfigError, match="dltestbed_container_numa_node must be a node number"):
        options_from_vars({"dltestbed_container_numa_node": "gpu0"})
    with pytest.raises(ConfigError, match="gpus 'auto' must be resolved"):
        runtime("docker").run_argv(IMG, "c", ARGV, ContainerOptions(gpus="auto"))


def test_auto_gpus_and_numa_cpus_are_resolved_on_the_host() -> None:
    """ContainerTarget asks its host (through the wrapped target) for GPUs and a node's CPUs."""
    from dltestbed.targets.base import CommandResult
    from dltestbed.targets.container import ContainerTarget

    class Host:  # a fake host: only what cannot exist here (a GPU); anything else it does not know fails
        name = host = machine = "n1"
        kind = "bm"
        python = "/usr/bin/python3"
        remote = True
        inner = None
        peer_address = "192.0.2.1"
        data_dir = None
        compile_cache = None

        def __init__(self) -> None:
            self.commands: list[list[str]] = []

        def fingerprint(self) -> dict:
            return {}

        def run(self, argv, *, env=None, timeout=None, on_line=None, stderr_log=None) -> CommandResult:
            self.commands.append(list(argv))
            replies = {
                "nvidia-smi": ["GPU 0: NVIDIA H100 (UUID: GPU-1)", "GPU 1: NVIDIA H100 (UUID: GPU-2)"],
                "cat": ["16-31"],
            }
            if argv[0] in replies:
                for line in replies[argv[0]]:
                    on_line and on_line(line)
                return CommandResult(list(argv), 0, 0.1, [])
            if argv[0] in ("docker",):
                return CommandResult(list(argv), 0, 0.1, [])
            raise AssertionError(f"fake host does not know {argv}")

    host = Host()
    t = ContainerTarget(host, runtime("docker"), IMG, "sha256:x", ContainerOptions(gpus="auto", numa_node=1))
    t.run(ARGV)
    run = next(c for c in host.commands if c[:2] == ["docker", "run"])
    assert "--gpus=all" in run and "--cpuset-cpus=16-31" in run and "--cpuset-mems=1" in run
    assert host.commands[-1][:3] == ["docker", "rm", "--force"]
    t.run(ARGV)
    assert sum(1 for c in host.commands if c[0] == "nvidia-smi") == 1  # resolved once
    assert not any(a.startswith("--volume") for a in run)
    data = ContainerTarget(
        host, runtime("docker"), IMG, "sha256:x", ContainerOptions(gpus="auto"), data_source="/srv/d 1"
    )
    data.run(ARGV)
    run = [c for c in host.commands if c[:2] == ["docker", "run"]][-1]
    assert "--volume=/srv/d 1:/mnt/dltestbed-data:ro" in run and data.data_dir == "/mnt/dltestbed-data"
