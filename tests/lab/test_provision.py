"""Provisioning with ansible-runner and bench over SSH, for real, on lab hosts."""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from dltestbed import lab
from dltestbed.lab import LabSpec, net
from dltestbed.lab.state import LabState
from tests.conftest import one_error_line, run_cli, start_endless_bench, wait_for_steps
from tests.lab.conftest import ansible_task, leftovers, ssh

BENCH = [
    "--model",
    "alexnet",
    "--image-size",
    "32",
    "--batch-size",
    "4",
    "--steps",
    "3",
    "--warmup",
    "1",
    "--repeat",
    "1",
]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, lab_dir: Path) -> dict[str, str]:
    state = tmp_path_factory.mktemp("state")
    return {"DLTESTBED_LAB_DIR": str(lab_dir), "XDG_STATE_HOME": str(state)}


@pytest.fixture(scope="module")
def cluster(env: dict[str, str]) -> Iterator[LabState]:
    """A 2-host lab, provisioned once for the module (`distributed`, the real thing)."""
    lab.down("tp")
    state = lab.up(LabSpec(name="tp", hosts=2, subnet="10.213.81.0/24"))
    proc = run_cli("provision", "--layout", "distributed", "--inventory", str(state.inventory), env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stderr.count("provisioned") >= 2
    yield state
    lab.down("tp")
    assert not leftovers("tp")


def test_the_workload_is_installed_on_every_host(cluster: LabState, env: dict[str, str]) -> None:
    tf = md.version("tensorflow-cpu")
    for h in cluster.hosts:
        out = ssh(
            cluster,
            h.name,
            "/opt/dltestbed/venv/bin/python -c "
            "'import tensorflow as tf, dltestbed.workload.loop; print(tf.__version__)'; "
            "cat /opt/dltestbed/venv/dltestbed-manifest.txt; ls /opt/dltestbed",
        )
        assert out.returncode == 0, out.stderr
        version, manifest, *listing = out.stdout.split()
        assert version == tf and len(manifest) == 64
        assert listing == ["venv"]  # the wheelhouse copy is gone
    # the host keys that provisioning recorded are the ones the hosts really serve
    recorded = (Path(env["XDG_STATE_HOME"]) / "dltestbed" / "known_hosts").read_text()
    for line in cluster.known_hosts.read_text().splitlines():
        assert line in recorded


def test_a_second_provision_changes_nothing(cluster: LabState, env: dict[str, str]) -> None:
    proc = run_cli("provision", "--layout", "distributed", "--inventory", str(cluster.inventory), env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2 host(s) provisioned; nothing changed" in proc.stderr
    assert proc.stderr.count("unchanged") == 2
    report = max((Path(env["XDG_STATE_HOME"]) / "dltestbed" / "provision").glob("p-*/report.json"))
    assert [h["changed"] for h in json.loads(report.read_text())["hosts"]] == [0, 0]


def test_a_venv_holding_the_dependencies_gets_dltestbeds_wheel_alone(cluster: LabState, env: dict[str, str]) -> None:
    """A host whose venv holds every pinned dependency but not this build's manifest (an older dltestbed, a
    venv baked into an image): provision copies dltestbed's wheel alone, not the wheelhouse, and records
    this build's manifest again."""
    manifest = "/opt/dltestbed/venv/dltestbed-manifest.txt"
    before = ssh(cluster, "tp-h1", f"cat {manifest} && rm {manifest}")
    assert before.returncode == 0, before.stderr
    proc = run_cli("provision", "--layout", "single", "--inventory", str(cluster.inventory), env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = Path(env["XDG_STATE_HOME"]) / "dltestbed" / "provision"

    def task(name: str) -> str:
        return ansible_task(runs, "p-*/artifacts/*/stdout", name)

    assert "changed: [tp-h1]" in task("Copy dltestbed's wheel alone (the venv holds every pinned dependency)")
    assert "skipping: [tp-h1]" in task("Copy and unpack the wheelhouse (one tar file)")
    assert "skipping: [tp-h1]" in task("Install the dependencies (offline)")
    assert "changed: [tp-h1]" in task("Install dltestbed (offline, this exact build)")
    after = ssh(cluster, "tp-h1", f"cat {manifest}; ls /opt/dltestbed")
    assert after.stdout.split() == [before.stdout.strip(), "venv"]  # the manifest back, no wheelhouse left


def test_single_layout_uses_one_host(cluster: LabState, env: dict[str, str]) -> None:
    proc = run_cli("provision", "--layout", "single", "--inventory", str(cluster.inventory), env=env)
    assert proc.returncode == 0 and "1 host(s) provisioned; nothing changed" in proc.stderr
    assert "tp-h1" in proc.stderr and "tp-h2" not in proc.stderr


def test_bench_over_ssh_stores_a_run_per_host(cluster: LabState, env: dict[str, str], results: Path) -> None:
    proc = run_cli(
        "bench", "--inventory", str(cluster.inventory), *BENCH, "--format", "json", "--results", str(results), env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads(proc.stdout)
    assert sorted(r["host"] for r in runs) == ["tp-h1", "tp-h2"]
    for r in runs:
        assert r["status"] == "ok" and r["target_kind"] == "bm" and r["images_per_sec"] > 0
        assert r["fingerprint"]["host"] == r["host"]  # the workload really ran on that host
        assert r["fingerprint"]["transport"] == "ssh"


def test_provision_makes_the_run_user_and_bm_runs_as_it_over_ssh(
    cluster: LabState, env: dict[str, str], results: Path
) -> None:
    """provision --as-user makes the user on every host (home, subordinate ids) and checks it can start the
    workload; bench --as-user then runs bare metal as that user over SSH, seen inside and outside."""
    user = "dltb-ops"
    inv = str(cluster.inventory)
    proc = run_cli("provision", "--layout", "distributed", "--as-user", user, "--inventory", inv, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    uids = {}
    for h in cluster.hosts:
        out = ssh(cluster, h.name, f"id -u {user} && grep -c '^{user}:' /etc/subuid /etc/subgid && ls -d ~{user}")
        assert out.returncode == 0, out.stderr
        uids[h.name] = int(out.stdout.split()[0])
        assert out.stdout.split()[1:3] == ["/etc/subuid:1", "/etc/subgid:1"]
    assert user not in Path("/etc/passwd").read_text()  # made on the hosts, not on this machine
    proc = run_cli(
        "bench", "--inventory", inv, *BENCH, "--as-user", user, "--format", "json", "--results", str(results), env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for r in json.loads(proc.stdout):
        fp = r["fingerprint"]
        assert r["status"] == "ok" and fp["uid"] == uids[r["host"]] and fp["user"] == user, r.get("reason")
        assert fp["run_as_user"] == user and fp["transport"] == "ssh"


def test_distributed_over_two_lab_hosts_streamed(cluster: LabState, env: dict[str, str], results: Path, tsdb) -> None:
    """One real MultiWorkerMirroredStrategy job with a worker on each host, then (--suite full) the probes
    between them, net and allreduce; every point counted back, the probes' measures included."""
    from tests.tsdb import expected

    proc = run_cli(
        "bench",
        "--inventory",
        str(cluster.inventory),
        "--scenario",
        "distributed",
        *BENCH,
        "--suite",
        "full",
        "--format",
        "json",
        "--results",
        str(results),
        env={**env, **tsdb.env()},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads(proc.stdout)
    probes = sorted((r for r in runs if r["model"] == "micro"), key=lambda r: r["worker_index"])
    assert [(p["host"], p["status"], p["spec"]["probes"]) for p in probes] == [
        ("tp-h1", "ok", ["net", "allreduce"]),
        ("tp-h2", "ok", ["net", "allreduce"]),
    ]
    runs = [r for r in runs if r["model"] != "micro"]
    workers = sorted((r for r in runs if r["worker_index"] is not None), key=lambda r: r["worker_index"])
    assert [(w["host"], w["fingerprint"]["host"], w["status"]) for w in workers] == [
        ("tp-h1", "tp-h1", "ok"),
        ("tp-h2", "tp-h2", "ok"),
    ]
    assert all(w["fingerprint"]["workers"] == 2 and w["images_per_sec"] > 0 for w in workers)
    report = json.loads(run_cli("report", "--format", "json", "--results", str(results)).stdout)
    (dist,) = report["distributed"]
    assert dist["total_images_per_sec"]["mean"] == pytest.approx(sum(w["images_per_sec"] for w in workers))
    cases = {(c["key"]["probe"], c["key"]["case"]) for c in report["micro"]["cases"] if c["runs"] == 2}
    assert ("net", "all-gather 4 MiB a worker: received") in cases and ("allreduce", "4 MiB busbw") in cases
    bench_id = runs[0]["bench_id"]
    counts = expected(results, bench_id)
    assert counts["dltestbed_measure"] == 2 * (1 + 3) * 8  # 2 workers x (1 warm-up + 3 timed calls) x 8 cases
    assert tsdb.count(bench_id, counts) == counts
    assert {lab["host"] for lab in tsdb.series_labels(bench_id)} == {"tp-h1", "tp-h2"}


@pytest.mark.torch
def test_pytorch_provisioned_then_a_ddp_job_across_the_hosts(
    cluster: LabState, env: dict[str, str], results: Path
) -> None:
    """provision --framework pytorch puts PyTorch's CPU build beside TensorFlow in every host's venv, from the
    wheelhouse that carries both; then a DDP job over gloo with a worker on each host, the rendezvous on the
    first (each worker's gloo on the interface that routes to it), every step's averaged loss the same on both."""
    from dltestbed.results.store import Store

    proc = run_cli(
        "provision", "--layout", "distributed", "--framework", "pytorch", "--inventory", str(cluster.inventory),
        env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    for h in cluster.hosts:
        check = "import torch, tensorflow; print(torch.__version__)"
        out = ssh(cluster, h.name, f"/opt/dltestbed/venv/bin/python -c '{check}'")
        assert out.returncode == 0 and out.stdout.strip() == md.version("torch"), out.stderr[-2000:]
    proc = run_cli(
        "bench", "--inventory", str(cluster.inventory), "--framework", "pytorch", "--scenario", "distributed", *BENCH,
        "--format", "json", "--results", str(results), env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads(proc.stdout)
    workers = sorted((r for r in runs if r["worker_index"] is not None), key=lambda r: r["worker_index"])
    alone = [(r["framework"], r["status"], r["workers"]) for r in runs if r["worker_index"] is None]
    assert alone == [("pytorch", "ok", 1)]  # the scaling efficiency's one-worker run
    assert [(w["host"], w["fingerprint"]["host"], w["framework"], w["status"]) for w in workers] == [
        ("tp-h1", "tp-h1", "pytorch", "ok"),
        ("tp-h2", "tp-h2", "pytorch", "ok"),
    ]
    assert all((w["fingerprint"]["collective"], w["fingerprint"]["workers"]) == ("gloo", 2) for w in workers)
    store = Store.open(results)
    losses = [[s.result for s in store.steps(w["id"])] for w in workers]
    store.close()
    assert losses[0] == losses[1] and len(losses[0]) == 4


def test_layouts_that_do_not_fit(cluster: LabState, env: dict[str, str]) -> None:
    line = one_error_line(run_cli("provision", "--layout", "shared", "--inventory", str(cluster.inventory), env=env))
    assert "layout shared needs a host that can hold several target kinds" in line
    line = one_error_line(run_cli("provision", "--layout", "mesh", "--inventory", str(cluster.inventory), env=env))
    assert "--layout: one of single, distributed, shared (got 'mesh')" in line
    line = one_error_line(
        run_cli(
            "provision", "--layout", "distributed", "--inventory", str(cluster.inventory), "--limit", "tp-h1", env=env
        )
    )
    assert "layout distributed needs at least 2 hosts in group bare_metal" in line


def _with_extra_host(cluster: LabState, tmp_path: Path, **hostvars: object) -> Path:
    doc = yaml.safe_load(cluster.inventory.read_text())
    doc["all"]["children"]["bare_metal"]["hosts"]["ghost"] = hostvars
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_an_unreachable_host_is_named_and_the_others_still_provisioned(cluster: LabState, env, tmp_path) -> None:
    inv = _with_extra_host(cluster, tmp_path, ansible_host="10.213.81.99")
    proc = run_cli("provision", "--layout", "distributed", "--inventory", str(inv), env=env)
    line = one_error_line(proc)
    assert proc.returncode == 2
    assert "1 of 3 host(s) not provisioned (ghost: unreachable: ssh: connect to host 10.213.81.99 port 22" in line
    assert line.endswith("provisioned: tp-h1, tp-h2")


def test_bench_one_host_failing_does_not_hide_the_others(cluster: LabState, env, tmp_path, results) -> None:
    inv = _with_extra_host(cluster, tmp_path, ansible_host="10.213.81.99")
    proc = run_cli("bench", "--inventory", str(inv), *BENCH, "--format", "json", "--results", str(results), env=env)
    assert proc.returncode == 1
    runs = {r["host"]: r for r in json.loads(proc.stdout)}
    assert runs["tp-h1"]["status"] == runs["tp-h2"]["status"] == "ok"
    assert runs["ghost"]["status"] == "failed" and "unreachable" in runs["ghost"]["reason"]
    assert "1 of 3 run(s) failed" in one_error_line(proc)
    assert proc.stderr.count("ghost does not answer (") == 1  # said once, when the bench began
    assert runs["ghost"]["reason"].startswith("ghost did not answer when the bench began: ")


@pytest.mark.parametrize("key", ["not recorded", "changed since it was recorded"])
def test_a_host_key_not_recorded_or_changed_stops_the_bench_before_it_runs(
    cluster: LabState, tmp_path: Path, results: Path, key: str
) -> None:
    """Neither the inventory's known_hosts file nor a provisioning record knows tp-h2's key, or the one
    they know is another (as after a reinstall, or a host in the middle): one line, nothing run on
    any host — tp-h1, whose key is fine, included."""
    import subprocess

    doc = yaml.safe_load(cluster.inventory.read_text())
    known = tmp_path / "known_hosts"
    h1, h2 = cluster.hosts
    lines = [line for line in cluster.known_hosts.read_text().splitlines() if line.startswith(f"{h1.ip},")]
    if key == "changed since it was recorded":
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
        lines.append(f"{h2.ip} " + " ".join((tmp_path / "other.pub").read_text().split()[:2]))
    known.write_text("\n".join(lines) + "\n")
    doc["all"]["vars"]["ansible_ssh_common_args"] = f"-o UserKnownHostsFile={known}"
    inv = tmp_path / "inventory.yml"
    inv.write_text(yaml.safe_dump(doc))
    fresh_state = {"XDG_STATE_HOME": str(tmp_path / "state"), "HOME": str(tmp_path)}
    proc = run_cli(
        "bench", "--inventory", str(inv), *BENCH, "--format", "json", "--results", str(results), env=fresh_state
    )
    line = one_error_line(proc)
    assert proc.returncode == 2 and f"host tp-h2 ({h2.ip}:22)" in line
    assert (
        f"its host key changed since it was recorded; check the host, then remove the old key from {known}"
        if key.startswith("changed")
        else "host key not recorded; run `dltestbed provision --layout single --inventory INVENTORY --limit tp-h2`"
    ) in line
    assert proc.stdout == "" and "bench b-" not in proc.stderr  # nothing announced, nothing run
    if results.exists():
        with sqlite3.connect(results) as db:
            assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == 0


def test_ctrl_c_over_ssh_leaves_no_workload_behind(cluster: LabState, env: dict[str, str], results: Path) -> None:
    proc = start_endless_bench(results, "--inventory", str(cluster.inventory), env=env)
    assert wait_for_steps(results, 4, runs=2), "both hosts should be measuring"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 130, err[-2000:]
    with sqlite3.connect(results) as db:
        rows = db.execute("SELECT host, status, reason, steps_done FROM runs").fetchall()
    assert sorted(r[0] for r in rows) == ["tp-h1", "tp-h2"]
    assert all(r[1] == "failed" and r[2] == "interrupted (Ctrl-C or a stop signal)" and r[3] > 4 for r in rows), rows
    assert _none_left_within(cluster, 30) is not None, _workloads_on(cluster)


def _workloads_on(cluster: LabState) -> list[str]:
    """The workload processes running on the lab's hosts."""
    out = []
    for h in cluster.hosts:
        for pid in net.pids_in(h.netns):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "dltestbed.workload" in cmd:
                out.append(f"{h.name}: {cmd}")
    return out


def _none_left_within(cluster: LabState, seconds: float) -> float | None:
    """Seconds until no workload runs on any lab host, or None when some still do after `seconds`."""
    t0 = time.monotonic()
    while _workloads_on(cluster):
        if time.monotonic() - t0 > seconds:
            return None
        time.sleep(0.2)
    return time.monotonic() - t0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_a_host_frozen_when_the_bench_begins_then_a_stop(
    cluster: LabState, env: dict[str, str], results: Path, sig: signal.Signals
) -> None:
    """tp-h2's sshd is frozen: the kernel accepts its connection, but the SSH handshake never comes. The
    bench's key check waits for it once (10 s, every host at once), says so in one line and stores tp-h2's
    runs failed with that reason, without a connection of their own; tp-h1 measures. Ctrl-C then ends the
    bench at once (tp-h1's run stored interrupted); a SIGKILLed controller leaves nothing running on tp-h1,
    and nothing starts on tp-h2 once its sshd wakes."""
    h2 = cluster.hosts[1]
    assert h2.pid is not None
    os.kill(h2.pid, signal.SIGSTOP)
    try:
        proc = start_endless_bench(results, "--inventory", str(cluster.inventory), env=env)
        assert wait_for_steps(results, 2), "tp-h1 should be measuring"
        t0 = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - t0
    finally:
        os.kill(h2.pid, signal.SIGCONT)
    with sqlite3.connect(results) as db:
        rows = dict(db.execute("SELECT host, status || ': ' || coalesce(reason, '') FROM runs").fetchall())
    assert rows["tp-h2"].startswith("failed: tp-h2 did not answer when the bench began: "), rows
    if sig == signal.SIGINT:
        assert proc.returncode == 130, err[-2000:]
        assert rows["tp-h1"] == "failed: interrupted (Ctrl-C or a stop signal)", rows
        assert err.count("tp-h2 does not answer (") == 1, err[-2000:]
        assert took < 10, f"Ctrl-C took {took:.1f} s"
    else:
        assert rows["tp-h1"] == "running: "
    gone = _none_left_within(cluster, 30)
    assert gone is not None, _workloads_on(cluster)
    print(f"{sig.name}: bench ended {took:.1f} s after the signal; no workload {gone:.1f} s later")


@pytest.mark.parametrize("how", ["network cut", "its SSH session killed"])
def test_a_host_lost_mid_bench(how: str, cluster: LabState, env: dict[str, str], results: Path) -> None:
    """A host lost while it measures: the lost host's run is stored failed with the steps it streamed and why
    within a bounded time instead of waiting on a read that never returns (timed to that, not to the bench's
    end, which waits for the other host's run: minutes on a slow machine); the other host finishes; exit 1."""
    import os
    import subprocess
    import sys

    from dltestbed.transport.ssh import DEAD_PEER_SECONDS
    from tests.conftest import wait_while_running

    steps = 60  # the cut comes after 4 steps of each: the lost host cannot be done by then
    argv = [
        "bench",
        "--inventory",
        str(cluster.inventory),
        *BENCH,
        "--steps",
        str(steps),
        "--format",
        "json",
        "--results",
        str(results),
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "dltestbed", *argv],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lost = cluster.hosts[1]
    try:
        assert wait_for_steps(results, 4, runs=2), "both hosts should be measuring"
        if how == "network cut":
            net.ip("link", "set", "eth0", "down", netns=lost.netns)
        else:  # the session's sshd processes (not the listener, which later tests use)
            for pid in net.pids_in(lost.netns):
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
                if cmd.startswith("sshd:") and "[listener]" not in cmd:
                    os.kill(pid, signal.SIGKILL)
        waited = wait_while_running(results, lost.name, DEAD_PEER_SECONDS + 120)
        out, err = proc.communicate(timeout=900)  # tp-h1's run goes on to its end
    finally:
        proc.kill()
        net.ip("link", "set", "eth0", "up", netns=lost.netns)
    assert proc.returncode == 1, err[-3000:]
    assert waited < DEAD_PEER_SECONDS + 60, waited  # the loss noticed in bounded time
    runs = {r["host"]: r for r in json.loads(out)}
    assert runs["tp-h1"]["status"] == "ok" and runs["tp-h1"]["steps_done"] == steps + 1
    gone = runs[lost.name]
    assert gone["status"] == "failed" and 4 < gone["steps_done"] < steps + 1, gone
    assert "the SSH connection was lost" in gone["reason"] or "the SSH session broke" in gone["reason"], gone
    assert "()" not in gone["reason"], gone  # the cause is named (an EOFError says nothing of itself)
    assert "1 of 2 run(s) failed" in err


def test_a_host_without_python(env: dict[str, str]) -> None:
    lab.down("tn")
    state = lab.up(LabSpec(name="tn", hosts=1, subnet="10.213.82.0/24"))
    try:
        gone = ssh(state, "tn-h1", "rm -f /usr/bin/python3 /usr/bin/python3.11 && ! test -e /usr/bin/python3")
        assert gone.returncode == 0, gone.stderr
        proc = run_cli("provision", "--layout", "single", "--inventory", str(state.inventory), env=env)
        line = one_error_line(proc)
        assert "tn-h1: Gathering Facts: no Python 3 at /usr/bin/python3" in line
        assert line.endswith("provisioned: none")
    finally:
        lab.down("tn")
    assert not leftovers("tn")


def test_an_inventory_that_does_not_parse(tmp_path: Path, env: dict[str, str]) -> None:
    bad = tmp_path / "inv.yml"
    bad.write_text("all:\n  children:\n    bare_metal: [\n")
    for cmd in (["provision", "--layout", "single"], ["bench", *BENCH]):
        line = one_error_line(run_cli(*cmd, "--inventory", str(bad), env=env))
        assert f"inventory '{bad}' is not valid YAML at line 4" in line
