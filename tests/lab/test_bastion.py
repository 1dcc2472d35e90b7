"""The inventories users already have (issue 14, item 6): their own group names mapped to dltestbed's
roles, templated variables, and hosts that this machine reaches only through a bastion (a lab host), by
ProxyCommand or by ProxyJump with an `-F` ssh config — provision (Ansible's ssh) and bench (paramiko)
both going through it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from dltestbed import lab
from dltestbed.lab import LabSpec
from dltestbed.lab import host as lab_host
from dltestbed.lab.state import LabState
from tests.conftest import one_error_line, run_cli
from tests.lab.conftest import leftovers

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
NET = "10.213.85"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, lab_dir: Path) -> dict[str, str]:
    return {"DLTESTBED_LAB_DIR": str(lab_dir), "XDG_STATE_HOME": str(tmp_path_factory.mktemp("state"))}


@pytest.fixture(scope="module")
def behind(env: dict[str, str]) -> Iterator[LabState]:
    """Two lab hosts that answer only through a third, the bastion."""
    lab.down("tb")
    state = lab.up(LabSpec(name="tb", hosts=2, subnet=f"{NET}.0/24", bastion=True))
    yield state
    lab.down("tb")
    assert not leftovers("tb")


def _users_ini(state: LabState, ssh_args: str, extra: str = "") -> str:
    """An inventory as a site writes it: its own groups and children, addresses templated from variables."""
    assert state.bastion is not None
    return f"""\
[gpu_nodes]
{state.hosts[0].name} octet={state.hosts[0].ip.rsplit(".", 1)[1]}

[dgx]
{state.hosts[1].name} octet={state.hosts[1].ip.rsplit(".", 1)[1]}

[bastions]
jumphost ansible_host={state.bastion.ip}

[compute:children]
gpu_nodes
dgx

[compute:vars]
ansible_host="{{{{ site_net }}}}.{{{{ octet }}}}"
ansible_ssh_common_args='{ssh_args}'

[all:vars]
site_net={NET}
ansible_user=root
ansible_ssh_private_key_file={state.key}
ansible_python_interpreter=/usr/bin/python3
{extra}"""


def _proxy_command_inventory(behind: LabState, tmp_path: Path) -> Path:
    """The site's inventory reaching its hosts by a ProxyCommand through the bastion (address from hostvars)."""
    hop = (
        f"ssh -i {behind.key} -o UserKnownHostsFile={behind.known_hosts} -o StrictHostKeyChecking=yes "
        "-o BatchMode=yes -W %h:%p root@{{ hostvars.jumphost.ansible_host }}"
    )
    args = f'-o UserKnownHostsFile={behind.known_hosts} -o StrictHostKeyChecking=yes -o ProxyCommand="{hop}"'
    inv = tmp_path / "site.ini"
    inv.write_text(_users_ini(behind, args, 'dltestbed_groups={"bare_metal": "compute"}\n'))
    return inv


def test_provision_and_bench_through_a_proxy_command(
    behind: LabState, env: dict[str, str], tmp_path: Path, results: Path
) -> None:
    """ProxyCommand with the bastion's address templated from hostvars; the roles from dltestbed_groups."""
    for h in behind.hosts:
        assert lab_host.ssh_banner(h.ip, timeout=2) is None, f"{h.name} should not answer this machine directly"
    assert behind.bastion is not None and lab_host.ssh_banner(behind.bastion.ip)
    assert run_cli("lab", "status", "--name", "tb", env=env).returncode == 0  # checked through the bastion
    inv = _proxy_command_inventory(behind, tmp_path)
    proc = run_cli("provision", "--layout", "distributed", "--inventory", str(inv), env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "2 host(s) provisioned" in proc.stderr and "jumphost" not in proc.stderr.split("artifacts:")[0]
    proc = run_cli("bench", "--inventory", str(inv), *BENCH, "--format", "json", "--results", str(results), env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = sorted(json.loads(proc.stdout), key=lambda r: r["host"])
    assert [(r["host"], r["fingerprint"]["host"], r["status"]) for r in runs] == [
        ("tb-h1", "tb-h1", "ok"),
        ("tb-h2", "tb-h2", "ok"),
    ]
    assert all(r["images_per_sec"] > 0 for r in runs)


def test_bench_through_proxy_jump_with_an_ssh_config_and_group_options(
    behind: LabState, env: dict[str, str], tmp_path: Path, results: Path
) -> None:
    """ProxyJump to the bastion's address, whose key and known_hosts only an `-F` ssh config names (as
    OpenSSH passes -F, not -i, to the jump); no dltestbed_groups: --group says which group plays
    bare_metal. Needs the previous test's provisioning."""
    assert behind.bastion is not None
    cfg = tmp_path / "ssh_config"
    cfg.write_text(
        f"Host {behind.bastion.ip}\n  User root\n  IdentityFile {behind.key}\n  UserKnownHostsFile "
        f"{behind.known_hosts}\n  StrictHostKeyChecking yes\n  BatchMode yes\n"
    )
    args = f"-F {cfg} -o UserKnownHostsFile={behind.known_hosts} -o ProxyJump=root@{behind.bastion.ip}"
    inv = tmp_path / "site.ini"
    inv.write_text(_users_ini(behind, args))
    # without a mapping there is no bare_metal group: one line that says how to name one
    line = one_error_line(run_cli("bench", "--inventory", str(inv), *BENCH, "--results", str(results), env=env))
    assert "has no hosts in group bare_metal; --group bare_metal=GROUP names yours" in line
    line = one_error_line(
        run_cli(
            "bench", "--inventory", str(inv), "--group", "bare_metl=dgx", *BENCH, "--results", str(results), env=env
        )
    )
    assert "--group bare_metl=dgx: 'bare_metl' is not a role; roles: bare_metal, container_hosts, libvirt_hosts" in line
    proc = run_cli("provision", "--layout", "single", "--inventory", str(inv), "--group", "bare_metal=dgx", env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "1 host(s) provisioned; nothing changed" in proc.stderr and "tb-h2" in proc.stderr
    proc = run_cli(
        "bench",
        "--inventory",
        str(inv),
        "--group",
        "bare_metal=dgx",
        *BENCH,
        "--format",
        "json",
        "--results",
        str(results),
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = json.loads(proc.stdout)
    assert (run["host"], run["fingerprint"]["host"], run["status"]) == ("tb-h2", "tb-h2", "ok")
    proc = run_cli("teardown", "--inventory", str(inv), "--group", "container_hosts=compute", env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "tb-h" not in proc.stderr, proc.stderr  # both hosts reached through the jump (errors name the host)


def test_a_host_lost_behind_the_bastion_is_noticed(
    behind: LabState, env: dict[str, str], tmp_path: Path, results: Path
) -> None:
    """tb-h2's network is cut mid-bench. This machine's connection is to the bastion, which stays up, so
    TCP never tells: the SSH keep-alives that want an answer do. tb-h2's run is stored failed with its steps and
    why within a bounded time of the cut (whatever the machine's speed: it is timed to that, not to the
    bench's end); tb-h1 finishes; the bench exits 1. Needs the first test's provisioning."""
    import os
    import subprocess
    import sys

    from dltestbed.lab import net
    from dltestbed.transport.ssh import DEAD_PEER_SECONDS
    from tests.conftest import wait_for_steps, wait_while_running

    steps = 60  # the cut comes after 4: the lost host cannot be done by then; tb-h1 then runs ~55 more
    inv = _proxy_command_inventory(behind, tmp_path)
    argv = ["bench", "--inventory", str(inv), *BENCH, "--steps", str(steps), "--format", "json"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "dltestbed", *argv, "--results", str(results)],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lost = behind.hosts[1]
    try:
        assert wait_for_steps(results, 4, runs=2), "both hosts should be measuring"
        net.ip("link", "set", "eth0", "down", netns=lost.netns)
        waited = wait_while_running(results, lost.name, DEAD_PEER_SECONDS + 120)
        out, err = proc.communicate(timeout=900)  # tb-h1's run goes on to its end
    finally:
        proc.kill()
        net.ip("link", "set", "eth0", "up", netns=lost.netns)
    assert proc.returncode == 1, err[-3000:]
    assert waited < DEAD_PEER_SECONDS + 60, waited
    runs = {r["host"]: r for r in json.loads(out)}
    assert runs["tb-h1"]["status"] == "ok" and runs["tb-h1"]["steps_done"] == steps + 1
    gone = runs[lost.name]
    assert gone["status"] == "failed" and 4 < gone["steps_done"] < steps + 1, gone
    assert f"the SSH connection was lost (no answer to SSH keep-alives for {DEAD_PEER_SECONDS} s)" in gone["reason"]
    print(f"network cut behind the bastion: the bench ended {waited:.1f} s later")
