"""`dltestbed lab`: real hosts (network namespaces + sshd) on this machine, and nothing left behind."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from dltestbed import lab
from dltestbed.lab import LabSpec
from dltestbed.lab.state import LabState
from tests.conftest import one_error_line, run_cli
from tests.lab.conftest import leftovers, ssh


def test_up_gives_separate_ssh_hosts_and_down_removes_everything(fresh_lab: str, lab_dir) -> None:
    proc = run_cli(
        "lab",
        "up",
        "--hosts",
        "3",
        "--name",
        fresh_lab,
        "--subnet",
        "10.213.91.0/24",
        env={"DLTESTBED_LAB_DIR": str(lab_dir)},
    )
    assert proc.returncode == 0, proc.stderr
    inventory = proc.stdout.strip().splitlines()[-1]
    state = LabState.load(fresh_lab)
    assert state is not None and inventory == str(state.inventory)
    inv = yaml.safe_load(Path(inventory).read_text())
    hosts = inv["all"]["children"]["bare_metal"]["hosts"]
    assert list(hosts) == [f"{fresh_lab}-h1", f"{fresh_lab}-h2", f"{fresh_lab}-h3"]
    assert hosts[f"{fresh_lab}-h2"]["ansible_host"] == "10.213.91.12"
    assert "StrictHostKeyChecking=yes" in inv["all"]["vars"]["ansible_ssh_common_args"]

    for h in state.hosts:
        out = ssh(
            state,
            h.name,
            "hostname; cat /etc/hostname; echo mine > /etc/dlt-test; echo t > /tmp/dlt-t; "
            f"ls {lab_dir} | wc -l; getent hosts {state.hosts[0].name}",
        )
        assert out.returncode == 0, out.stderr
        lines = out.stdout.split()
        assert lines[0] == lines[1] == h.name  # own hostname
        assert lines[2] == "0"  # the lab's keys are hidden from its hosts
        assert state.hosts[0].ip in out.stdout  # peers resolve by name
    # writes stay on their host: /etc and /tmp are private
    check = ssh(state, state.hosts[1].name, "cat /etc/dlt-test /tmp/dlt-t; ls /etc/dlt-test")
    assert check.stdout.split()[:2] == ["mine", "t"]
    assert subprocess.run(["test", "-e", "/etc/dlt-test"]).returncode == 1

    status = run_cli("lab", "status", "--name", fresh_lab, env={"DLTESTBED_LAB_DIR": str(lab_dir)})
    assert status.returncode == 0 and status.stdout.count("running") == 3

    down = run_cli("lab", "teardown", "--name", fresh_lab, env={"DLTESTBED_LAB_DIR": str(lab_dir)})
    assert down.returncode == 0 and "removed" in down.stdout
    assert not leftovers(fresh_lab)
    assert not (lab_dir / fresh_lab).exists()
    again = run_cli("lab", "teardown", "--name", fresh_lab, env={"DLTESTBED_LAB_DIR": str(lab_dir)})
    assert again.returncode == 0 and "nothing to remove" in again.stdout
    gone = run_cli("lab", "status", "--name", fresh_lab, env={"DLTESTBED_LAB_DIR": str(lab_dir)})
    assert gone.returncode == 1 and "not up" in gone.stdout


def test_a_wrong_key_or_host_key_is_refused(fresh_lab: str, tmp_path) -> None:
    state = lab.up(LabSpec(name=fresh_lab, hosts=1, subnet="10.213.92.0/24"))
    h = state.hosts[0]
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    argv = [
        "ssh",
        "-i",
        str(other),
        "-o",
        f"UserKnownHostsFile={state.known_hosts}",
        "-o",
        "BatchMode=yes",
        f"root@{h.ip}",
        "true",
    ]
    wrong_key = subprocess.run(argv, capture_output=True, text=True)
    assert wrong_key.returncode == 255 and "Permission denied" in wrong_key.stderr
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    unknown = subprocess.run(
        [
            "ssh",
            "-i",
            str(state.key),
            "-o",
            f"UserKnownHostsFile={empty}",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "BatchMode=yes",
            f"root@{h.ip}",
            "true",
        ],
        capture_output=True,
        text=True,
    )
    assert unknown.returncode == 255 and "Host key verification failed" in unknown.stderr


def test_up_again_keeps_a_healthy_lab(fresh_lab: str) -> None:
    first = lab.up(LabSpec(name=fresh_lab, hosts=2, subnet="10.213.93.0/24"))
    pids = [h.pid for h in first.hosts]
    again = lab.up(LabSpec(name=fresh_lab, hosts=2, subnet="10.213.93.0/24"))
    assert [h.pid for h in again.hosts] == pids
    bigger = lab.up(LabSpec(name=fresh_lab, hosts=3, subnet="10.213.93.0/24"))
    assert len(bigger.hosts) == 3 and all(ssh(bigger, h.name, "true").returncode == 0 for h in bigger.hosts)


def test_a_crashed_up_is_cleaned_by_down(fresh_lab: str, lab_dir) -> None:
    lab.up(LabSpec(name=fresh_lab, hosts=2, subnet="10.213.94.0/24"))
    # the state file is lost, as after a crash at the worst moment: down finds the rest by name
    (lab_dir / fresh_lab / "state.json").unlink()
    assert leftovers(fresh_lab)
    lab.down(fresh_lab)
    assert not leftovers(fresh_lab)


def test_down_kills_no_process_that_reused_a_hosts_pid(fresh_lab: str, lab_dir) -> None:
    """The host's sshd died and its pid went to an unrelated process (pids are reused within minutes on a
    busy machine): down, status and up must not take that process for the host."""
    state = lab.up(LabSpec(name=fresh_lab, hosts=1, subnet="10.213.97.0/24"))
    h = state.hosts[0]
    os.kill(h.pid, signal.SIGKILL)
    bystander = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        doc = json.loads((lab_dir / fresh_lab / "state.json").read_text())
        doc["hosts"][0]["pid"] = bystander.pid
        (lab_dir / fresh_lab / "state.json").write_text(json.dumps(doc))
        (status,) = lab.status(fresh_lab)[1]
        assert not status.sshd
        lab.down(fresh_lab)
        assert bystander.poll() is None, "lab down killed a process that was not the lab's"
        assert not leftovers(fresh_lab)
    finally:
        bystander.kill()
        bystander.wait()


def test_a_workload_started_over_ssh_dies_with_the_lab(fresh_lab: str) -> None:
    state = lab.up(LabSpec(name=fresh_lab, hosts=1, subnet="10.213.95.0/24"))
    h = state.hosts[0]
    subprocess.run(
        [
            "ssh",
            "-f",
            "-i",
            str(state.key),
            "-o",
            f"UserKnownHostsFile={state.known_hosts}",
            "-o",
            "BatchMode=yes",
            f"root@{h.ip}",
            "nohup sleep 300 >/dev/null 2>&1 &",
        ],
        check=True,
        timeout=30,
    )
    from dltestbed.lab import net

    deadline = time.monotonic() + 10

    def sleep_300(pids: list[int]) -> list[int]:
        """Those of `pids` that are a live `sleep 300` (a zombie's command line is empty, as pgrep -f sees it)."""
        live = []
        for pid in pids:
            with contextlib.suppress(OSError):
                if Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip() == "sleep 300":
                    live.append(pid)
        return live

    while not sleep_300(net.pids_in(h.netns)) and time.monotonic() < deadline:
        time.sleep(0.1)
    started = sleep_300(net.pids_in(h.netns))  # this host's: not any `sleep 300` on the machine (CI runs two pytests)
    assert started, "the workload did not start in the host"
    lab.down(fresh_lab)
    gone = time.monotonic() + 5  # killed: gone once the kernel has reaped it
    while left := sleep_300(started):
        if time.monotonic() > gone:
            seen = subprocess.run(
                ["ps", "-o", "pid,ppid,stat,etimes,args", "-p", str(left[0])], capture_output=True, text=True
            ).stdout
            raise AssertionError(f"still running 5 s after lab down:\n{seen}")
        time.sleep(0.1)


def test_bad_lab_input_is_one_line(lab_dir) -> None:
    env = {"DLTESTBED_LAB_DIR": str(lab_dir)}
    cases = [
        (["lab", "up", "--hosts", "0"], "--hosts must be between 1 and 64 (got 0)"),
        (["lab", "up", "--name", "Bad_Name"], "lab name 'Bad_Name': 1-6 lowercase letters or digits"),
        (["lab", "up", "--subnet", "8.8.8.0/24"], "a private IPv4 network of /24 or larger is needed"),
        (["lab", "up", "--subnet", "nonsense"], "is not an IPv4 network"),
        (["lab", "up", "--host-cpus", "2"], "--host-cpus: HOST=CPUS, e.g. 4=0 or 2=0-1 (got '2')"),
        (["lab", "up", "--host-cpus", "3=0"], "--host-cpus 3=0: no host '3' in a lab of 2 (give 1-2 or a name)"),
        (["lab", "up", "--host-cpus", "1=x"], "--host-cpus 1=x: CPU list 'x' is not like 0-3,8"),
        (["lab", "up", "--host-cpus", "1=999"], "--host-cpus 1=999: CPU 999 is not one of this machine's"),
        (["lab", "up", "--share", "venv"], "--share venv: not an absolute path to a folder of this machine"),
    ]
    for args, message in cases:
        assert message in one_error_line(run_cli(*args, env=env))


def test_the_inventory_reads_in_ansible(fresh_lab: str) -> None:
    state = lab.up(LabSpec(name=fresh_lab, hosts=2, subnet="10.213.96.0/24"))
    tool = str(Path(sys.executable).parent / "ansible-inventory")
    out = subprocess.run([tool, "-i", str(state.inventory), "--list"], capture_output=True, text=True, check=True)
    listed = json.loads(out.stdout)
    assert sorted(listed["bare_metal"]["hosts"]) == sorted(h.name for h in state.hosts)
