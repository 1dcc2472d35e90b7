"""The stream's token, exported by the user, reaches no child process and no file: ansible-runner (which
writes the environment it was given into its artifacts), local commands and container CLIs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dltestbed import secretenv
from dltestbed.provision.ansible import Play, run_playbook
from dltestbed.provision.image import runtime_env
from dltestbed.results import influx
from dltestbed.transport.local import LocalProcess
from tests.secretwatch import SecretWatch, new_token


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch) -> str:
    value = new_token()
    monkeypatch.setenv("INFLUXDB_V2_TOKEN", value)
    monkeypatch.setenv("INFLUXDB_V2_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("INFLUXDB_V2_ORG", "o")
    monkeypatch.setenv("INFLUXDB_V2_BUCKET", "b")
    yield value
    secretenv.take(fresh=True)
    secretenv._taken.clear()


def test_a_real_playbook_writes_no_token_into_its_artifacts(token: str, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "env.yml").write_text(
        "- hosts: all\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.command: env\n      register: out\n"
        "    - ansible.builtin.debug: {var: out.stdout_lines}\n"
    )
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n")
    with SecretWatch(token, cli_children=False) as watch:  # dltestbed runs in this process here
        result = run_playbook(Play(project, "env.yml", inventory), tmp_path / "private", "t1")
    assert result.status == "successful", result
    files = sorted(p.name for p in result.artifacts.rglob("*") if p.is_file())
    assert "command" in files and "stdout" in files  # ansible-runner wrote what it always writes
    assert not watch.files([tmp_path])  # the command's env, stdout (the task's `env`), the events
    assert not watch.leaks and "ansible-playboo" in watch.seen
    assert influx.settings().token == token  # dltestbed still streams with it


def test_a_local_command_never_gets_it_even_when_passed_back(token: str) -> None:
    secretenv.take(fresh=True)
    assert "INFLUXDB_V2_TOKEN" not in os.environ
    lines: list[str] = []
    result = LocalProcess("here").run(["env"], env={"INFLUXDB_V2_TOKEN": token, "KEEP": "1"}, on_line=lines.append)
    assert result.ok and "KEEP=1" in lines
    assert not [line for line in lines if token in line or line.startswith("INFLUXDB_V2_")]
    assert not any(k.startswith("INFLUXDB_V2_") for k in runtime_env("podman"))


def test_settings_read_what_was_taken(token: str) -> None:
    secretenv.take(fresh=True)
    s = influx.settings()
    assert s is not None and s.token == token and s.url == "http://127.0.0.1:9"
    secretenv.take(fresh=True)  # a new command with nothing exported: nothing left from the last one
    assert influx.settings() is None


@pytest.mark.timeout(20)
def test_the_watch_reads_regular_files_alone(tmp_path: Path) -> None:
    """The file check greps what was written under a root, also a container store: a FIFO there (Podman's
    `ctl` and `winsz` of a container not yet removed) is passed over instead of blocking the read forever,
    and a file that holds the secret, a link to it aside, is named once."""
    secret = new_token()
    watch = SecretWatch(secret).__enter__()
    watch.__exit__()
    store = tmp_path / "overlay-containers" / "c1" / "userdata"
    store.mkdir(parents=True)
    os.mkfifo(store / "ctl")
    (store / "config.json").write_text(f'{{"env": ["T={secret}"]}}')
    (store / "link").symlink_to(store / "config.json")
    (store / "clean.json").write_text("{}")
    assert watch.files([tmp_path]) == [str(store / "config.json")]


@pytest.mark.timeout(20)
def test_the_watch_stays_on_the_roots_filesystem(tmp_path: Path) -> None:
    """A chroot being built under a root has proc mounted in it (reading its /proc/kmsg waits for the
    kernel's next message): the file check does not enter another filesystem, a tmpfs included."""
    secret = new_token()
    watch = SecretWatch(secret).__enter__()
    watch.__exit__()
    tree = tmp_path / "guest-root"
    mounts = []
    try:
        for where, fstype in (("proc", "proc"), ("tmp", "tmpfs")):
            (tree / where).mkdir(parents=True)
            subprocess.run(["mount", "-t", fstype, fstype, str(tree / where)], check=True)
            mounts.append(tree / where)
        (tree / "tmp" / "held.json").write_text(secret)
        (tree / "written.json").write_text(secret)
        assert watch.files([tmp_path]) == [str(tree / "written.json")]
    finally:
        for m in reversed(mounts):
            subprocess.run(["umount", str(m)], check=True)


def test_a_child_caught_between_fork_and_exec_is_its_parent() -> None:
    """A short-lived command read only before its exec shows its parent's user and command line: the watch's
    descendants leave it out, and keep what the parent started once it ran as itself."""
    watch = SecretWatch("x")
    watch.procs = {
        10: (1, "python", 0, "python -m dltestbed bench"),
        11: (10, "python", 0, "python -m dltestbed bench"),  # forked, not yet exec'd when last read
        12: (10, "setpriv", 0, "setpriv --reuid=u -- ch-run img -- python -m dltestbed.workload"),
        13: (12, "python", 1000, "python -m dltestbed.workload --spec {}"),
        14: (13, "python", 1000, "python -m dltestbed.workload --spec {}"),  # the workload's own fork
    }
    assert [p[0] for p in watch.descendants(10)] == [12, 13]
