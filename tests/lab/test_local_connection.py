"""`ansible_connection: local`: a node that is the machine dltestbed runs on (a GPU node with no sshd) is benched
with no SSH, alone or beside SSH hosts, and provisioned by Ansible's local connection. Each local node has an
address and port where no sshd listens: any SSH to it would fail its runs."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from dltestbed import lab, paths
from dltestbed.lab.state import LabState
from dltestbed.provision import wheelhouse
from dltestbed.requests.lab import LabSpec
from tests.conftest import run_cli
from tests.lab.conftest import leftovers, ssh, this_checkout

NAME = "tl"
CLOSED_PORT = "1"  # nothing listens there: SSH to the local node is refused at once
SMALL = ["--targets", "bm", "-m", "alexnet", "--image-size", "32", "--batch-size", "4", "--warmup", "1", "--steps", "3"]
SMALL += ["--repeat", "1", "--format", "json"]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory, lab_dir: Path) -> Iterator[tuple[LabState, Path]]:
    """Two lab hosts sharing this checkout's venv and the CPU wheelhouse (built first: provisioning inside a host
    finds it there), and this machine as a third node `here` (a local connection, at the lab bridge's address:
    where the other workers of a job reach it)."""
    wheelhouse.build("cpu")
    lab.down(NAME)
    state = lab.up(
        LabSpec(name=NAME, hosts=2, subnet="10.213.98.0/24", shares=[*this_checkout(), str(paths.wheelhouse_root())])
    )
    doc = yaml.safe_load(state.inventory.read_text())
    nodes = doc["all"]["children"]["bare_metal"]["hosts"]
    for h in nodes.values():
        h["dltestbed_venv"] = sys.prefix
    nodes["here"] = {"ansible_connection": "local", "ansible_host": state.bridge_ip, "ansible_port": CLOSED_PORT}
    inv = tmp_path_factory.mktemp("mixed") / "inventory.yml"
    inv.write_text(yaml.safe_dump(doc))
    yield state, inv
    lab.down(NAME)
    assert not leftovers(NAME)


def test_bench_on_a_local_node_alone_runs_here_with_no_ssh(tmp_path: Path, results: Path) -> None:
    inv = tmp_path / "node.ini"
    node = f"localhost ansible_connection=local ansible_host=127.0.0.1 ansible_port={CLOSED_PORT}"
    inv.write_text(f"[bare_metal]\n{node}\n")
    proc = run_cli("bench", "--inventory", str(inv), *SMALL, "--results", str(results))
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = json.loads(proc.stdout)
    assert (run["status"], run["host"], run["target_kind"]) == ("ok", "localhost", "bm"), run.get("reason")
    fp = run["fingerprint"]
    assert fp["transport"] == "local" and fp["target_host"] == "localhost" and "target_address" not in fp
    assert "not on this machine" not in proc.stderr  # --preset auto read this machine's GPUs


def test_a_mixed_inventory_runs_a_job_over_the_local_node_and_two_ssh_hosts(
    mixed: tuple[LabState, Path], results: Path
) -> None:
    _, inv = mixed
    job = ["--scenario", "distributed", "--no-baseline"]  # one job: every node a worker, the local one reached too
    proc = run_cli("bench", "--inventory", str(inv), *SMALL, *job, "--results", str(results))
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads(proc.stdout)
    assert sorted(r["host"] for r in runs) == ["here", f"{NAME}-h1", f"{NAME}-h2"]
    for r in runs:
        assert r["status"] == "ok" and r["workers"] == 3, r.get("reason")
        assert r["fingerprint"]["transport"] == ("local" if r["host"] == "here" else "ssh")


def test_a_mixed_inventory_with_the_defaults_runs_each_node_on_its_own_transport(
    mixed: tuple[LabState, Path], results: Path
) -> None:
    """The same inventory with bench's defaults (a single run on each node, the nodes at once)."""
    _, inv = mixed
    proc = run_cli("bench", "--inventory", str(inv), *SMALL, "--results", str(results))
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads(proc.stdout)
    assert sorted(r["host"] for r in runs) == ["here", f"{NAME}-h1", f"{NAME}-h2"]
    for r in runs:
        assert r["status"] == "ok", r.get("reason")
        assert r["fingerprint"]["transport"] == ("local" if r["host"] == "here" else "ssh")


def test_provision_of_a_local_node_installs_inside_it_only(mixed: tuple[LabState, Path]) -> None:
    """`dltestbed provision` run inside a lab host (its own root filesystem) on an inventory of its localhost:
    the workload installed there by Ansible's local connection, nothing on this machine; then the node's own
    dltestbed (no dltestbed_venv) is checked and nothing is installed."""
    state, _ = mixed
    host = state.hosts[0].name
    venv = "/opt/dltestbed-local-test/venv"
    assert not Path(venv).exists()
    cache = f"XDG_CACHE_HOME={shlex.quote(str(paths.cache_dir().parent))}"  # where the shared wheelhouse is

    def provision(line: str) -> str:
        write = f"printf '[bare_metal]\\n{line}\\n' > /tmp/node.ini"
        run = f"{cache} {sys.executable} -m dltestbed provision --layout single --inventory /tmp/node.ini"
        out = ssh(state, host, f"{write} && cd /tmp && {run}", timeout=600)
        assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
        return out.stderr

    said = provision(f"localhost ansible_connection=local dltestbed_venv={venv}")
    assert "1 host(s) provisioned;" in said and "Install dltestbed (offline, this exact build)" in said
    there = ssh(state, host, f"{venv}/bin/python -c 'import dltestbed.workload' && cat {venv}/dltestbed-manifest.txt")
    assert there.returncode == 0 and len(there.stdout.strip()) == 64, there.stderr[-2000:]
    assert not Path(venv).exists()  # installed inside the host alone
    said = provision("localhost ansible_connection=local")
    assert "The shared venv holds this dltestbed" in said and "nothing changed" in said
