"""Workers whose address is known only once they run (cbm's pods on a pod network): the job's rendezvous gives each
its environment once all have said their address, whatever their order, and lets a stopped one go; a pod's command
waits for its late environment and reads it whole, quoting kept (real shells, as the pod's)."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from dltestbed.targets.rendezvous import PORT, Rendezvous
from dltestbed.transport import podspec
from dltestbed.workload.frameworks import framework


def env_of(workers: Sequence[str], index: int) -> Mapping[str, str]:
    return {"WORKERS": ",".join(workers), "INDEX": str(index)}


def test_each_worker_gets_every_address_once_all_have_come_in_any_order() -> None:
    rv = Rendezvous(3, PORT, env_of)
    got: dict[int, Mapping[str, str] | None] = {}

    def arrive(i: int, address: str, delay: float) -> None:
        time.sleep(delay)
        got[i] = rv.env(i, address, lambda: False)

    threads = [threading.Thread(target=arrive, args=(i, f"10.244.{i}.5", d)) for i, d in ((2, 0.0), (0, 0.3), (1, 0.6))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    workers = ",".join(f"10.244.{i}.5:{PORT}" for i in range(3))  # in worker order, not arrival order
    assert got == {i: {"WORKERS": workers, "INDEX": str(i)} for i in range(3)}


def test_a_worker_waiting_for_a_peer_that_never_comes_is_let_go_when_stopped() -> None:
    rv = Rendezvous(2, PORT, env_of)
    stopped = threading.Event()
    threading.Timer(0.3, stopped.set).start()
    started = time.monotonic()
    assert rv.env(0, "10.244.1.5", stopped.is_set) is None
    assert time.monotonic() - started < 5


def test_tensorflows_cluster_from_the_rendezvous() -> None:
    rv = Rendezvous(2, PORT, framework("tensorflow").worker_env)
    other = threading.Thread(target=rv.env, args=(1, "10.244.2.7", lambda: False))
    other.start()
    env = rv.env(0, "10.244.1.3", lambda: False)
    other.join(5)
    assert env is not None
    config = json.loads(env["TF_CONFIG"])
    assert config["cluster"]["worker"] == [f"10.244.1.3:{PORT}", f"10.244.2.7:{PORT}"]
    assert config["task"] == {"type": "worker", "index": 0}


def test_a_pods_command_waits_for_its_late_environment_and_reads_it_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(podspec, "LATE_ENV", str(tmp_path / "late.env"))
    tricky = '{"cluster": {"worker": ["a:1"]}} $(touch pwned) `id` \'quoted\' \\ end'
    argv = podspec.wrapped(["sh", "-c", 'printf "%s|%s\\n" "$TF_CONFIG" "$RANK"'], host_root=False, late=True)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    time.sleep(0.6)
    assert proc.poll() is None  # waiting: no environment yet
    done = subprocess.run(podspec.late_env_argv({"TF_CONFIG": tricky, "RANK": "1"}), cwd=tmp_path)
    assert done.returncode == 0
    out, _ = proc.communicate(timeout=10)
    assert (proc.returncode, out) == (0, f"{tricky}|1\n")
    assert not (tmp_path / "pwned").exists()  # nothing of a value ran


def test_a_worker_whose_peers_never_start_is_told_which_and_an_ipv6_address_is_bracketed() -> None:
    from dltestbed.errors import TargetError

    rv = Rendezvous(3, PORT, env_of)
    with pytest.raises(TargetError, match=r"^worker\(s\) 0, 2 of the job did not start within 1 s$"):
        rv.env(1, "fd00::5", lambda: False, wait_s=1.0)
    rv2 = Rendezvous(2, PORT, env_of)
    threading.Thread(target=rv2.env, args=(1, "fd00::6", lambda: False), daemon=True).start()
    env = rv2.env(0, "fd00::5", lambda: False)
    assert env is not None and env["WORKERS"] == f"[fd00::5]:{PORT},[fd00::6]:{PORT}"


def test_a_late_environment_takes_names_alone_and_never_a_node_root() -> None:
    with pytest.raises(ValueError, match="not an environment variable's name: 'X; rm -rf /'"):
        podspec.late_env_argv({"X; rm -rf /": "1"})
    with pytest.raises(ValueError, match="not the node's root"):
        podspec.wrapped(["true"], host_root=True, late=True)
