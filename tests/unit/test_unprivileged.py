"""Unprivileged runs, without running anything: the command lines that drop to a user and that drive rootless
Podman and Charliecloud, the cheap checks of --as-user and the rootless runtimes, and the runtime comparison on
runs with known numbers."""

from __future__ import annotations

import math
import os
import pwd

import pytest

from dltestbed.errors import ConfigError
from dltestbed.orchestrate import unprivileged
from dltestbed.report import runtimes as runtime_table
from dltestbed.report.keys import LayerKey
from dltestbed.report.stats import summarise
from dltestbed.runtimes import ContainerOptions, runtime
from dltestbed.targets.container import ContainerTarget
from dltestbed.users import check_name, drop_argv, drop_here
from dltestbed.workload.events import ResourceEvent
from tests.conftest import make_run


def test_drop_argv_hands_over_the_variables_without_secrets() -> None:
    argv = drop_argv("ops", 1001, ["python", "-m", "x"], {"A": "1", "INFLUXDB_V2_TOKEN": "tok-secret"})
    assert argv[:6] == ["setpriv", "--reuid=ops", "--regid=1001", "--init-groups", "--reset-env", "--"]
    assert argv[6:] == ["env", "A=1", "python", "-m", "x"]
    assert not any("tok-secret" in a for a in argv)
    # nothing to hand over: `env` still starts it, so the command is looked up as the user (not with setpriv's rights)
    assert drop_argv("ops", 1001, ["true"]) == [*argv[:6], "env", "true"]


def test_a_user_runs_with_its_primary_group_whatever_its_name() -> None:
    """nobody's group is nogroup (65534): a group named after the user would not parse."""
    assert drop_here("nobody", ["true"])[2] == f"--regid={pwd.getpwnam('nobody').pw_gid}"
    with pytest.raises(ConfigError, match="no such user on this machine"):
        drop_here("no-such-user-here", ["true"])


@pytest.mark.parametrize(
    ("name", "why"), [("root", "root is what this option avoids"), ("-o", "a user name"), ("A B", "a user name")]
)
def test_user_names_are_checked(name: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        check_name(name)
    assert check_name("dl_bench.1") == "dl_bench.1"


def test_charliecloud_command_line() -> None:
    ch = runtime("charliecloud")
    opts = ContainerOptions(gpus="1,3", cpuset="0-3", volumes=("/data:/mnt/dltestbed-data:ro",), env=(("K", "v"),))
    argv = ch.run_argv("/var/lib/dltestbed/charliecloud/img", "name", ["python", "-V"], opts)
    assert argv == [
        "env",
        "K=v",
        "CUDA_VISIBLE_DEVICES=1,3",
        "taskset",
        "--cpu-list",
        "0-3",
        "ch-run",
        "--private-tmp",
        "--bind=/data:/mnt/dltestbed-data",
        "/var/lib/dltestbed/charliecloud/img",
        "--",
        "python",
        "-V",
    ]
    numa = ch.run_argv("/img", "n", ["true"], ContainerOptions(gpus="all", numa_node=1, numa_cpus="8-15"))
    assert numa[:4] == ["numactl", "--membind=1", "--physcpubind=8-15", "ch-run"]
    assert ch.remove_argv("name") == [] and ch.list_argv([]) == [] and ch.rootless and ch.store == "podman"
    assert ch.cli_env({"HOME": "/root", "INFLUXDB_V2_TOKEN": "t"})["USER"]  # ch-run refuses to start without it
    for bad, why in (
        ({"memory": "4g"}, "memory limit"),
        ({"privileged": True}, "privileged"),
        ({"gpus": "auto"}, "auto"),
    ):
        with pytest.raises(ConfigError, match=why):
            ch.run_argv("/img", "n", ["true"], ContainerOptions(**bad))  # type: ignore[arg-type]


def test_rootless_podman_command_line() -> None:
    rp = runtime("podman-rootless")
    argv = rp.run_argv("dltestbed-workload:x", "c1", ["true"], ContainerOptions(user="1001:1001"))
    assert argv[:4] == ["podman", "--cgroup-manager=cgroupfs", "--runtime=runc", "--events-backend=file"]
    assert "--user=1001:1001" in argv and argv[-2:] == ["dltestbed-workload:x", "true"]
    assert rp.remove_argv("c1")[:5] == [*argv[:4], "rm"]
    assert "pause.pid" in rp.after_argv()[-1] and rp.cli_env({"CONTAINERS_CONF": "/root/x"}) == {}
    assert runtime("podman").after_argv() == [] and not runtime("docker").rootless


class _Recorder:
    """A machine that records the commands run on it (what a container target sends to its host)."""

    name = host = machine = "m"
    kind = "bm"
    python = "python"
    remote = False
    inner = None
    peer_address = "127.0.0.1"
    data_dir = None
    compile_cache = None

    def __init__(self) -> None:
        self.argvs: list[list[str]] = []

    def run(self, argv, **_):  # type: ignore[no-untyped-def]
        from dltestbed.targets.base import CommandResult

        self.argvs.append(list(argv))
        return CommandResult(list(argv), 0, 0.0, [])

    def fingerprint(self):  # type: ignore[no-untyped-def]
        return {"target_kind": "bm"}

    def abort(self, why=None) -> None:  # type: ignore[no-untyped-def]
        pass

    def confine(self, gpu: str, cpus: str | None) -> None:
        pass


def test_a_charliecloud_container_removes_nothing_and_a_rootless_podman_ends_its_pause_process() -> None:
    host = _Recorder()
    ContainerTarget(host, runtime("charliecloud"), "/img", "sha256:x", ContainerOptions()).run(["true"])
    assert [a[a.index("ch-run")] for a in host.argvs] == ["ch-run"]  # the run, and no removal after it
    host = _Recorder()
    ContainerTarget(host, runtime("podman-rootless"), "t", "sha256:x", ContainerOptions()).run(["true"])
    assert [a[4] for a in host.argvs[:2]] == ["run", "rm"] and "pause.pid" in host.argvs[2][-1]


def test_the_rootless_runtimes_and_as_user_are_checked_first() -> None:
    from dltestbed.inventory import Host

    if os.geteuid() == 0:
        with pytest.raises(ConfigError, match="name the user with --as-user NAME"):
            unprivileged.check(None, ("bm", "cbm"), "charliecloud", (None,))
    host = Host("h1", "10.0.0.1", 22, None, None, (), ("bare_metal",))
    with pytest.raises(ConfigError, match="on this machine only"):
        unprivileged.check("ops", ("cbm",), "podman-rootless", (host,))
    with pytest.raises(ConfigError, match="bm and cbm only"):
        unprivileged.check("ops", ("bm", "vm"), None, (host,))
    with pytest.raises(ConfigError, match="no such user on this machine"):
        unprivileged.check("nobody-here-xyz", ("bm",), None, (None,))
    unprivileged.check(None, ("bm", "cbm"), "docker", (None,))  # a rootful runtime needs no user


def test_a_runtime_is_a_layer_of_its_own() -> None:
    r = make_run(target_kind="cbm", fingerprint={"container_runtime": "charliecloud"})
    assert LayerKey.of_run(r).layer == "cbm (charliecloud)"
    assert LayerKey.of_run(make_run(target_kind="bm")).layer == "bm"


def _runs(kind: str, runtime_name: str, ips: float, uid: int) -> list:  # type: ignore[type-arg]
    fp = {
        "uid": uid,
        "user": "ops",
        "run_as_user": "ops",
        **({"container_runtime": runtime_name} if runtime_name else {}),
    }
    return [
        make_run(
            bench_id="b1",
            target_kind=kind,
            repetition=i,
            status="ok",
            images_per_sec=ips * (1 + 0.01 * i),
            wall_seconds=10.0 + i,
            fingerprint=fp,
        )
        for i in (1, 2, 3)
    ]


def test_the_runtime_table_on_known_numbers() -> None:
    runs = _runs("bm", "", 100.0, 1001) + _runs("cbm", "charliecloud", 90.0, 1001) + _runs("cbm", "docker", 80.0, 10001)
    rss = {
        r.id: [
            ResourceEvent(t=0.0, rss_bytes=2**30, cpu_percent=1.0, gpus=[]),
            ResourceEvent(t=1.0, rss_bytes=3 * 2**30, cpu_percent=1.0, gpus=[]),
        ]
        for r in runs
    }
    rows = runtime_table.table(summarise(runs), runs, rss)
    assert [r.runtime for r in rows] == ["native", "charliecloud", "docker"]
    native, ch, docker = rows
    assert native.effect is None and native.runs == 3 and native.wall_seconds == pytest.approx(12.0)
    assert ch.effect is not None and math.isclose(ch.effect.overhead_pct, 10.0, abs_tol=0.01)  # 90 against 100
    assert docker.effect is not None and math.isclose(docker.effect.overhead_pct, 20.0, abs_tol=0.01)
    assert (
        ch.host_memory_peak_bytes == 3 * 2**30 and ch.inside == "uid 1001 (ops)" and docker.inside == "uid 10001 (ops)"
    )
    md = "\n".join(runtime_table.markdown(rows))
    assert "## Container runtimes against native" in md and "| native (bm) | 3 |" in md and "cbm (charliecloud)" in md
    assert runtime_table.table(summarise(runs[:3]), runs[:3], rss) == []  # bare metal alone: no comparison


def test_charliecloud_folders_are_found_by_their_source_digest(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from dltestbed.provision import image, userstore

    monkeypatch.setenv("DLTESTBED_CH_DIR", str(tmp_path))
    img = image.Image("podman", "dltestbed-workload:abc", "sha256:1")
    assert userstore.folder(img) == tmp_path / "dltestbed-workload-abc" and userstore.converted(img) is None
    (userstore.folder(img) / "ch").mkdir(parents=True)
    (userstore.folder(img) / userstore.SOURCE_FILE).write_text("sha256:2\n")
    assert userstore.converted(img) is None  # converted from another build of that tag: not this image
    (userstore.folder(img) / userstore.SOURCE_FILE).write_text("sha256:1\n")
    assert userstore.converted(img) == userstore.folder(img)
    assert unprivileged.local_tag("charliecloud", img) == str(userstore.folder(img))
    assert unprivileged.local_tag("podman-rootless", img) == img.tag and unprivileged.local_tag("docker", None) is None
