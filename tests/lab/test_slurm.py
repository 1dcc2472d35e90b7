"""Slurm as a launcher, on a real Slurm: `lab up --slurm` runs slurmctld here and a slurmd (with its own
munged) in each of two lab hosts. Submit, run, a distributed job over both nodes through srun, Ctrl-C and
a killed controller mid-job, a job killed at its time limit; nothing is left queued or running."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from dltestbed import lab, paths
from dltestbed.lab import slurm as lab_slurm
from dltestbed.lab.state import LabState, netns_name
from dltestbed.requests.lab import LabSpec
from tests.conftest import run_cli
from tests.lab.conftest import leftovers, run_user, this_checkout

NAME = "ts"
TINY = ["--model", "alexnet", "--image-size", "64", "--batch-size", "4", "--repeat", "1"]


@pytest.fixture(scope="module")
def user() -> Iterator[pwd.struct_passwd]:
    """An unprivileged user the nodes know (made before they are up, as a site's directory service has it)."""
    with run_user() as made:
        yield made


@pytest.fixture(scope="module")
def cluster(lab_dir: Path, user: pwd.struct_passwd) -> Iterator[tuple[LabState, dict[str, str]]]:
    """Two Slurm nodes that see this checkout's venv and Charliecloud's image folders (a shared filesystem); the
    env Slurm's commands need."""
    lab.down(NAME)
    images = paths.charliecloud_root()
    images.mkdir(parents=True, exist_ok=True)
    state = lab.up(
        LabSpec(name=NAME, hosts=2, subnet="10.213.86.0/24", shares=(*this_checkout(), str(images)), slurm=True)
    )
    yield state, {"SLURM_CONF": str(lab_slurm.conf_path(state))}
    lab.down(NAME)
    assert not leftovers(NAME)


def slurm(env: dict[str, str], *argv: str) -> str:
    return subprocess.run(
        list(argv), capture_output=True, text=True, env={**os.environ, **env}, check=True, timeout=60
    ).stdout


def ours_running(env: dict[str, str]) -> list[str]:
    """srun steps, salloc holders and workloads of a bench on this cluster, still alive on this machine or in one
    of its lab hosts: a process in a host's network namespace, or one with the cluster's SLURM_CONF in its
    environment (srun and salloc here, and what srun exports it to). Not another pytest's: CI runs one beside this
    (scripts/test.sh), whose workloads run on this machine too."""
    from dltestbed.lab import net

    in_hosts = {pid for ns in net.namespaces() if ns.startswith(netns_name(NAME, "")) for pid in net.pids_in(ns)}
    out = []
    for p in psutil.process_iter(["cmdline", "status"]):
        line = " ".join(p.info["cmdline"] or [])
        if p.info["status"] == psutil.STATUS_ZOMBIE or not any(
            m in line for m in ("srun --jobid", "--job-name=dltestbed-", "-m dltestbed.workload")
        ):
            continue
        with contextlib.suppress(psutil.Error):  # gone meanwhile
            if p.pid in in_hosts or p.environ().get("SLURM_CONF") == env["SLURM_CONF"]:
                out.append(f"{p.pid} {line}")
    return out


def nothing_left(env: dict[str, str], within: float) -> float:
    """Seconds until squeue lists no job and no bench process runs; fails after `within`."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < within:
        if not slurm(env, "squeue", "-h").strip() and not ours_running(env):
            return time.monotonic() - t0
        time.sleep(0.5)
    raise AssertionError(f"after {within:.0f} s: queue {slurm(env, 'squeue', '-h')!r}, running {ours_running(env)}")


def bench(env: dict[str, str], results: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(
        "bench",
        "--launcher",
        "slurm",
        "--venv",
        sys.prefix,
        *args,
        "--format",
        "json",
        "--results",
        str(results),
        env=env,
    )


def test_the_lab_cluster(cluster: tuple[LabState, dict[str, str]]) -> None:
    _, env = cluster
    nodes = slurm(env, "sinfo", "-h", "-N", "-o", "%N %T %P")
    assert nodes.split("\n")[:2] == [f"{NAME}-h1 idle lab*", f"{NAME}-h2 idle lab*"], nodes
    conf = slurm(env, "scontrol", "show", "config")
    assert f"ClusterName             = dltestbed-{NAME}" in conf and "select/linear" in conf
    ran = slurm(env, "srun", "-N2", "hostname").split()
    assert sorted(ran) == [f"{NAME}-h1", f"{NAME}-h2"]  # each slurmd runs its steps inside its own host


def test_a_distributed_job_through_srun_is_stored_under_the_nodes(
    cluster: tuple[LabState, dict[str, str]], results: Path
) -> None:
    _, env = cluster
    out = bench(
        env,
        results,
        "--scenario",
        "distributed",
        "--model",
        "alexnet",
        "--image-size",
        "64",
        "--steps",
        "3",
        "--repeat",
        "1",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    runs = json.loads(out.stdout)
    workers = sorted((r["worker_index"], r["host"], r["fingerprint"]["host"]) for r in runs if r["workers"] == 2)
    assert workers == [(0, f"{NAME}-h1", f"{NAME}-h1"), (1, f"{NAME}-h2", f"{NAME}-h2")]
    assert all(r["status"] == "ok" and r["fingerprint"]["transport"] == "slurm" for r in runs)
    jobs = {r["fingerprint"]["slurm_job_id"] for r in runs}
    assert len(jobs) == 1 and {r["fingerprint"]["slurm_partition"] for r in runs} == {"lab"}
    assert "Relinquishing job allocation" in out.stderr
    nothing_left(env, 30)


@pytest.mark.timeout(1800)  # the Charliecloud folder converted first: ~3 min
def test_charliecloud_through_srun_as_a_user(
    cluster: tuple[LabState, dict[str, str]], user: pwd.struct_passwd, results: Path
) -> None:
    """srun … setpriv … ch-run … in the allocation: bm and cbm on each node as the user, the image folder read
    from the shared filesystem, no root process for the container (the nodes are lab hosts whose root is their
    own, not a chroot: the kernel gives a chrooted process no user namespace)."""
    _, env = cluster
    build = run_cli("image", "build", "--runtime", "charliecloud", "--vm", "no", timeout=1800)
    assert build.returncode == 0, build.stderr[-2000:]
    args = ["--targets", "bm,cbm", "--runtime", "charliecloud", "--as-user", user.pw_name, "--nodes", "2"]
    out = bench(env, results, *TINY, "--warmup", "1", "--steps", "3", *args)
    assert out.returncode == 0, out.stderr[-3000:]
    runs = json.loads(out.stdout)
    assert sorted((r["target_kind"], r["host"]) for r in runs) == [
        (k, f"{NAME}-h{i}") for k in ("bm", "cbm") for i in (1, 2)
    ]
    for r in runs:
        fp = r["fingerprint"]
        assert r["status"] == "ok" and fp["transport"] == "slurm", r.get("reason")
        assert fp["uid"] == user.pw_uid and fp["run_as_user"] == user.pw_name  # inside and outside
        assert r["target_kind"] == "bm" or (fp["container_runtime"] == "charliecloud" and fp["user"] == user.pw_name)
    nothing_left(env, 30)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_a_stop_mid_job_leaves_nothing_queued_or_running(
    cluster: tuple[LabState, dict[str, str]], results: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    _, env = cluster
    err = (tmp_path / "stderr").open("w")
    argv = [
        sys.executable,
        "-m",
        "dltestbed",
        "bench",
        "--launcher",
        "slurm",
        "--venv",
        sys.prefix,
        "--nodes",
        "2",
        *TINY,
        "--steps",
        "100000",
        "--results",
        str(results),
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env={**os.environ, **env})
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and _steps(results) < 4:  # both nodes measuring
            assert proc.poll() is None, (tmp_path / "stderr").read_text()[-2000:]
            time.sleep(0.5)
        assert slurm(env, "squeue", "-h", "-o", "%T %D").split() == ["RUNNING", "2"]
        proc.send_signal(sig)
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    took = nothing_left(env, 60)
    print(f"{sig.name}: nothing queued or running {took:.1f} s after the bench exited")
    if sig == signal.SIGINT:
        assert code == 130
        with sqlite3.connect(results) as db:
            rows = db.execute("select host, status, reason from runs").fetchall()
        assert sorted(rows) == [
            (f"{NAME}-h1", "failed", "interrupted (Ctrl-C or a stop signal)"),
            (f"{NAME}-h2", "failed", "interrupted (Ctrl-C or a stop signal)"),
        ]


def test_a_job_killed_at_its_time_limit_is_stored_failed_with_its_steps(
    cluster: tuple[LabState, dict[str, str]], results: Path
) -> None:
    _, env = cluster
    out = bench(env, results, *TINY, "--steps", "1000000", "--slurm-time", "1")
    assert out.returncode == 1, out.stderr[-3000:]
    (run,) = json.loads(out.stdout)
    assert run["status"] == "failed" and run["host"] == f"{NAME}-h1"
    assert run["reason"].startswith(f"Slurm ended job {run['fingerprint']['slurm_job_id']}: "), run["reason"]
    assert "TimeLimit" in run["reason"] and "due to time limit" in run["reason"], run["reason"]
    assert _steps(results) > 0
    assert "error: 1 of 1 run(s) failed; first: alexnet rep 1: Slurm ended job" in out.stderr
    nothing_left(env, 60)


def _steps(results: Path) -> int:
    """Timed steps stored so far (read while the bench writes)."""
    if not results.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{results}?mode=ro", uri=True, timeout=5) as db:
            return db.execute("select count(*) from steps").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
