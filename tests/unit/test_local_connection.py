"""`ansible_connection: local` in an inventory: the host is this machine. Read from INI and YAML (templated, fully
qualified), its venv and interpreter, the target made for it (this machine's processes, never SSH), what a bench
does around it (no key check, no dataset copy, this machine's libvirtd) and what provisioning tells Ansible of
it; a connection dltestbed cannot honour is one line."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import pytest

from dltestbed import dataset, inventory
from dltestbed.errors import ConfigError
from dltestbed.inventory import DEFAULT_VENV, Host
from dltestbed.orchestrate import dataplace, prepare
from dltestbed.provision import local_host_vars
from dltestbed.targets import ContainerImage, Site, make
from dltestbed.targets.container import ContainerTarget
from dltestbed.targets.local import LocalTarget
from dltestbed.vms import hypervisor
from tests.conftest import one_error_line, run_cli

CLOSED_PORT = 1  # nothing listens on 127.0.0.1:1: SSH there is refused at once


def _closed() -> None:
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", CLOSED_PORT)) != 0, "something listens on 127.0.0.1:1"


def test_ini_localhost_with_a_local_connection_is_this_machine(tmp_path: Path) -> None:
    (tmp_path / "hosts.ini").write_text(
        "[bare_metal]\nlocalhost ansible_connection=local\nn2 ansible_host=10.2.0.2 ansible_connection=ssh\n"
        "n3 ansible_host=10.2.0.3 ansible_connection=paramiko\n"
    )
    inv = inventory.load(tmp_path / "hosts.ini")
    here, n2, n3 = (inv.hosts[n] for n in ("localhost", "n2", "n3"))
    assert here.local and here.connection == "local" and here.this_install
    assert (here.venv, here.python) == (sys.prefix, sys.executable)  # the dltestbed running now
    assert not n2.local and not n3.local and n3.connection == "ssh"
    assert (n2.venv, n2.python) == (DEFAULT_VENV, f"{DEFAULT_VENV}/bin/python")
    assert [inventory.over_ssh(h) for h in (here, n2)] == [None, n2]
    assert inventory.this_machine(None) and inventory.this_machine(here) and not inventory.this_machine(n2)


def test_yaml_templated_and_fully_qualified_with_its_own_venv(tmp_path: Path) -> None:
    (tmp_path / "hosts.yml").write_text(
        "all:\n  vars:\n    how: ansible.builtin.local\n  children:\n    bare_metal:\n      hosts:\n"
        "        gpu07:\n          ansible_connection: '{{ how }}'\n          ansible_host: 10.3.0.7\n"
        "          dltestbed_venv: /srv/dlt\n"
        "          ansible_ssh_common_args: -o ProxyCommand='ssh -W %h:%p gw'\n"
    )
    gpu07 = inventory.load(tmp_path / "hosts.yml").hosts["gpu07"]
    assert gpu07.local and not gpu07.this_install
    assert (gpu07.venv, gpu07.python, gpu07.address) == ("/srv/dlt", "/srv/dlt/bin/python", "10.3.0.7")
    assert gpu07.proxy_command is None and gpu07.jump is None  # nothing to go through to reach this machine


@pytest.mark.parametrize("value", ["docker", "community.docker.docker", "winrm", "ansible.builtin.psrp"])
def test_a_connection_dltestbed_cannot_honour_is_one_line(tmp_path: Path, value: str) -> None:
    (tmp_path / "hosts.ini").write_text(f"[bare_metal]\nc1 ansible_connection={value}\n")
    with pytest.raises(ConfigError) as err:
        inventory.load(tmp_path / "hosts.ini")
    said = str(err.value)
    assert f"host c1: ansible_connection {value!r} is not supported" in said and "(local)" in said
    assert "\n" not in said


def test_the_cli_says_it_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "hosts.ini").write_text("[bare_metal]\nc1 ansible_connection=docker\n")
    for args in (["bench", "--dry-run"], ["provision", "--layout", "single"], ["teardown"]):
        line = one_error_line(run_cli(*args, "--inventory", str(tmp_path / "hosts.ini")))
        assert "host c1: ansible_connection 'docker' is not supported" in line, args


def _local(name: str = "gpu07", **vars: object) -> Host:
    """A host with a local connection, in bare_metal and container_hosts, at an address where SSH is refused."""
    roles = ("bare_metal", "container_hosts")
    return Host(name, "127.0.0.1", CLOSED_PORT, None, None, (), roles, dict(vars), connection="local")


def test_the_target_of_a_local_host_is_this_machine_under_its_name() -> None:
    host = _local()
    bm = make("bm", Site(host=host))
    assert isinstance(bm, LocalTarget)
    assert (bm.name, bm.host, bm.machine, bm.python, bm.peer_address) == (
        "gpu07",
        "gpu07",
        "gpu07",
        sys.executable,
        "127.0.0.1",
    )
    fp = bm.fingerprint()
    assert fp["transport"] == "local" and fp["target_host"] == "gpu07"
    lines: list[str] = []
    _closed()  # SSH to its address would fail: the command runs all the same
    res = bm.run([bm.python, "-c", "import socket; print(socket.gethostname())"], on_line=lines.append)
    assert res.ok and lines == [socket.gethostname()]
    img = ContainerImage("podman", "dltestbed-workload:x", "sha256:0")
    cbm = make("cbm", Site(host=host, container=img))
    assert isinstance(cbm, ContainerTarget) and isinstance(cbm.inner, LocalTarget)  # its runtime's CLI runs here
    assert cbm.machine == "gpu07"


def test_no_key_is_checked_for_a_local_host_and_an_ssh_one_is_tried() -> None:
    _closed()
    here, there = _local(), Host("n2", "127.0.0.1", CLOSED_PORT, None, None, (), ("bare_metal",))
    started = time.monotonic()
    assert prepare.check_host_keys([here]) == {}
    assert time.monotonic() - started < 1
    down = prepare.check_host_keys([here, there])
    assert list(down) == ["n2"] and "unreachable" in down["n2"]


def test_a_local_host_reads_the_dataset_where_it_is(tmp_path: Path) -> None:
    source = tmp_path / "data"
    dataset.make(source, classes=2, images_per_class=2, size=16)
    ds = dataplace.Dataset(source, dataset.identify(dataset.scan(source), tmp_path / "ids"))
    # no inventory to run the dataset role with: a copy would be one ConfigError
    (site,) = dataplace.place(ds, [Site(host=_local())], ["bm"], inventory=None)
    assert site.data.host == str(source)


def test_a_local_libvirt_host_is_this_machines_libvirtd() -> None:
    hv = hypervisor.for_host(_local())
    assert (hv.uri, hv.pool_dir, hv.local, hv.via) == (hypervisor.LOCAL_URI, hypervisor.local().pool_dir, True, None)
    assert hv.shell("echo $((6 * 7))").strip() == "42"  # here, not over SSH
    n2 = Host(
        "n2", "10.2.0.2", 22, "ops", None, (), ("libvirt_hosts",), {"dltestbed_libvirt_uri": "qemu+ssh://n2/system"}
    )
    remote = hypervisor.for_host(n2)
    assert (remote.local, remote.via, remote.pool_dir) == (False, n2, hypervisor.REMOTE_POOL_DIR)
    given = hypervisor.for_host(_local(dltestbed_libvirt_uri="qemu:///session", dltestbed_libvirt_pool="/srv/pool"))
    assert (given.uri, given.pool_dir, given.local) == ("qemu:///session", "/srv/pool", True)


def test_provisioning_tells_ansible_the_interpreter_and_venv_of_local_hosts(tmp_path: Path) -> None:
    (tmp_path / "hosts.ini").write_text(
        "[bare_metal]\nlocalhost ansible_connection=local\n"
        "gpu07 ansible_connection=local dltestbed_venv=/srv/dlt ansible_python_interpreter=/usr/bin/python3\n"
        "n2 ansible_host=10.2.0.2\n"
    )
    given = local_host_vars(inventory.load(tmp_path / "hosts.ini"))
    assert given == {
        "localhost": {
            "dltestbed_python": sys.executable,
            "ansible_python_interpreter": sys.executable,
            "dltestbed_venv": sys.prefix,
            "dltestbed_venv_shared": True,  # checked, never installed into: dltestbed runs from it
            "dltestbed_shared_imports": [],  # no framework named: what the machine has (PyTorch alone, say)
        },
        "gpu07": {"dltestbed_python": "/srv/dlt/bin/python"},  # installed there; its own interpreter kept
    }
    asked = local_host_vars(inventory.load(tmp_path / "hosts.ini"), ("pytorch",))
    assert asked["localhost"]["dltestbed_shared_imports"] == ["torch", "PIL"]  # the framework named must be there
