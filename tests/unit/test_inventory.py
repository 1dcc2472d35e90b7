"""Inventories read the way Ansible reads them, layouts resolved on them, and their errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from dltestbed import inventory, layout
from dltestbed.errors import ConfigError
from dltestbed.inventory import ssh_options
from dltestbed.transport.ssh import LineStream

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def inv_dir(tmp_path: Path) -> Path:
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "hosts.yml").write_text(
        "all:\n  vars:\n    ansible_user: ops\n  children:\n"
        "    bare_metal:\n      hosts:\n        n1: {ansible_host: 10.1.0.1}\n        n2:\n"
        "    container_hosts:\n      hosts:\n        n1:\n"
    )
    (tmp_path / "group_vars" / "bare_metal.yml").write_text(
        "dltestbed_venv: /srv/dlt\n"
        "ansible_ssh_common_args: '-o UserKnownHostsFile=/etc/dlt/kh -o StrictHostKeyChecking=yes'\n"
    )
    (tmp_path / "host_vars" / "n2.yml").write_text("ansible_port: 2222\nansible_ssh_private_key_file: ~/.ssh/n2\n")
    return tmp_path


def test_group_and_host_vars_are_honoured(inv_dir: Path) -> None:
    inv = inventory.load(inv_dir / "hosts.yml")
    n1, n2 = inv.hosts["n1"], inv.hosts["n2"]
    assert (n1.address, n1.port, n1.user) == ("10.1.0.1", 22, "ops")
    assert (n2.address, n2.port, n2.key_file) == ("n2", 2222, "~/.ssh/n2")
    assert n1.venv == "/srv/dlt" and n1.python == "/srv/dlt/bin/python"
    assert n1.known_hosts_files == ("/etc/dlt/kh",)
    assert n1.kinds() == ("bm", "cbm") and n2.kinds() == ("bm",)
    assert [h.name for h in inv.in_group("bare_metal")] == ["n1", "n2"]
    assert "inventory_dir" not in n1.vars and n1.vars["dltestbed_venv"] == "/srv/dlt"


def test_ini_inventories_work_too(tmp_path: Path) -> None:
    (tmp_path / "hosts.ini").write_text("[bare_metal]\nw1 ansible_host=10.2.0.1\nw2 ansible_host=10.2.0.2\n")
    inv = inventory.load(tmp_path / "hosts.ini")
    assert [h.address for h in inv.in_group("bare_metal")] == ["10.2.0.1", "10.2.0.2"]


def test_limit(inv_dir: Path) -> None:
    assert list(inventory.load(inv_dir / "hosts.yml", limit="n2").hosts) == ["n2"]
    with pytest.raises(ConfigError, match="--limit 'nope' matches no host"):
        inventory.load(inv_dir / "hosts.yml", limit="nope")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("all:\n  hosts: [unclosed\n", "is not valid YAML at line 3"),
        ("- just\n- a list\n", "expected a mapping of groups"),
        ("all:\n  children: {}\n", "has no hosts"),
    ],
)
def test_bad_inventories(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "inv.yml").write_text(text)
    with pytest.raises(ConfigError, match=message):
        inventory.load(tmp_path / "inv.yml")


def test_missing_inventory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        inventory.load(tmp_path / "nope.yml")


def test_layouts(inv_dir: Path) -> None:
    inv = inventory.load(inv_dir / "hosts.yml")
    (single,) = layout.resolve("single", inv)
    assert single.host.name == "n1" and single.kinds == ("bm", "cbm")
    assert [p.host.name for p in layout.resolve("distributed", inv)] == ["n1", "n2"]
    (shared,) = layout.resolve("shared", inv)
    assert shared.host.name == "n1"
    with pytest.raises(ConfigError, match="unknown layout 'mesh'; known: single, distributed, shared"):
        layout.resolve("mesh", inv)


def test_layout_needs(tmp_path: Path) -> None:
    (tmp_path / "one.yml").write_text("all:\n  children:\n    bare_metal:\n      hosts:\n        a:\n")
    inv = inventory.load(tmp_path / "one.yml")
    with pytest.raises(ConfigError, match="layout distributed needs at least 2 hosts in group bare_metal"):
        layout.resolve("distributed", inv)
    with pytest.raises(ConfigError, match="layout shared needs a host that can hold several target kinds"):
        layout.resolve("shared", inv)
    (tmp_path / "none.yml").write_text("all:\n  children:\n    gpu_nodes:\n      hosts:\n        a:\n")
    with pytest.raises(ConfigError, match=r"needs hosts in group bare_metal; .* has none \(groups: gpu_nodes\)"):
        layout.resolve("single", inventory.load(tmp_path / "none.yml"))


@pytest.mark.parametrize("name", ["single.yml", "distributed.yml", "shared.yml"])
def test_the_example_inventories_parse_and_fit_their_layout(name: str) -> None:
    inv = inventory.load(REPO / "inventory" / name)
    assert layout.resolve(name.removesuffix(".yml"), inv)


def test_ssh_options() -> None:
    opts = ssh_options("-o UserKnownHostsFile=/a -oStrictHostKeyChecking=yes -o 'ProxyJump=bastion' -C")
    assert opts == {"userknownhostsfile": "/a", "stricthostkeychecking": "yes", "proxyjump": "bastion"}


def test_line_stream_splits_and_flushes() -> None:
    seen: list[str] = []
    s = LineStream(seen.append)
    s.write('{"a":')
    s.write('1}\n{"b":2}\r\npart')
    assert seen == ['{"a":1}', '{"b":2}']
    s.close()
    assert seen[-1] == "part"
