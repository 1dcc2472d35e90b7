"""Inventories read the way Ansible reads them, layouts resolved on them, and their errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from dltestbed import inventory, layout
from dltestbed.errors import ConfigError
from dltestbed.hostvars import ssh_options
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
    assert [h.name for h in inv.in_role("bare_metal")] == ["n1", "n2"]
    assert "inventory_dir" not in n1.vars and n1.vars["dltestbed_venv"] == "/srv/dlt"


def test_ini_inventories_work_too(tmp_path: Path) -> None:
    (tmp_path / "hosts.ini").write_text("[bare_metal]\nw1 ansible_host=10.2.0.1\nw2 ansible_host=10.2.0.2\n")
    inv = inventory.load(tmp_path / "hosts.ini")
    assert [h.address for h in inv.in_role("bare_metal")] == ["10.2.0.1", "10.2.0.2"]


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
    with pytest.raises(
        ConfigError,
        match=r"needs hosts in group bare_metal; .* has none \(groups: gpu_nodes; "
        r"--group bare_metal=GROUP names yours\)",
    ):
        layout.resolve("single", inventory.load(tmp_path / "none.yml"))


@pytest.mark.parametrize("name", ["single.yml", "distributed.yml", "shared.yml"])
def test_the_example_inventories_parse_and_fit_their_layout(name: str) -> None:
    inv = inventory.load(REPO / "inventory" / name)
    assert layout.resolve(name.removesuffix(".yml"), inv)


def test_ssh_options() -> None:
    opts = ssh_options("-o UserKnownHostsFile=/a -oStrictHostKeyChecking=yes -o 'ProxyJump=bastion' -C")
    assert opts == {"userknownhostsfile": "/a", "stricthostkeychecking": "yes", "proxyjump": "bastion"}
    assert ssh_options("-J ops@gw:2200 -o 'ProxyCommand ssh -W %h:%p gw'") == {
        "proxyjump": "ops@gw:2200",
        "proxycommand": "ssh -W %h:%p gw",
    }
    assert ssh_options("-o ProxyJump=a -o ProxyJump=b")["proxyjump"] == "a"  # ssh: the first one wins


# A user's inventory as sites write them: their own groups, children, a bastion, templated addresses.
USER_INI = """\
[gpu_nodes]
node1 octet=12
node2 octet=13 ansible_port=2222

[dgx]
node3 octet=14

[bastions]
gw ansible_host=192.0.2.10 ansible_user=jump ansible_ssh_private_key_file=/keys/gw

[compute:children]
gpu_nodes
dgx

[compute:vars]
ansible_host="{{ site_net }}.{{ octet }}"
ansible_ssh_common_args='-o ProxyCommand="ssh -i /keys/gw -W %h:%p jump@{{ hostvars.gw.ansible_host }}" \
-o UserKnownHostsFile=/kh'

[all:vars]
site_net=192.0.2
ansible_user=ops
"""


def test_templated_variables_and_a_proxy_command(tmp_path: Path) -> None:
    (tmp_path / "hosts.ini").write_text(USER_INI)
    inv = inventory.load(tmp_path / "hosts.ini", groups={"bare_metal": ["compute"]})
    n1, n2, gw = inv.hosts["node1"], inv.hosts["node2"], inv.hosts["gw"]
    assert (n1.address, n1.port, n1.user) == ("192.0.2.12", 22, "ops")
    assert n1.proxy_command == "ssh -i /keys/gw -W 192.0.2.12:22 jump@192.0.2.10"
    assert n2.proxy_command == "ssh -i /keys/gw -W 192.0.2.13:2222 jump@192.0.2.10"
    assert n1.known_hosts_files == ("/kh",) and n1.jump is None
    assert gw.proxy_command is None and gw.roles == ()
    assert [h.name for h in inv.in_role("bare_metal")] == ["node1", "node2", "node3"]


def test_proxy_jump_through_an_inventory_host_takes_its_user_and_key(tmp_path: Path) -> None:
    text = USER_INI.replace(
        """-o ProxyCommand="ssh -i /keys/gw -W %h:%p jump@{{ hostvars.gw.ansible_host }}" """, "-o ProxyJump=gw "
    )
    (tmp_path / "hosts.ini").write_text(text)
    n1 = inventory.load(tmp_path / "hosts.ini").hosts["node1"]
    assert n1.proxy_command is None and n1.jump is not None
    assert (n1.jump.name, n1.jump.address, n1.jump.user, n1.jump.key_file) == ("gw", "192.0.2.10", "jump", "/keys/gw")
    (tmp_path / "hosts.ini").write_text(text.replace("-o ProxyJump=gw ", "-J root@outer:2022,gw "))
    n1 = inventory.load(tmp_path / "hosts.ini").hosts["node1"]
    assert n1.jump is not None and n1.jump.name == "gw"  # the hop next to the target
    outer = n1.jump.jump
    assert outer is not None
    assert (outer.address, outer.port, outer.user, outer.key_file) == ("outer", 2022, "root", None)


def test_roles_from_the_inventory_variable_and_from_group_options(tmp_path: Path) -> None:
    (tmp_path / "hosts.ini").write_text(
        USER_INI + 'dltestbed_groups={"bare_metal": "gpu_nodes", "container_hosts": ["dgx", "gpu_nodes"]}\n'
    )
    inv = inventory.load(tmp_path / "hosts.ini")
    assert [h.name for h in inv.in_role("bare_metal")] == ["node1", "node2"]
    assert inv.hosts["node1"].kinds() == ("bm", "cbm") and inv.hosts["node3"].kinds() == ("cbm",)
    assert inv.role_help("bare_metal") == "group(s) gpu_nodes (playing bare_metal)"
    # --group wins over the variable, role by role
    inv = inventory.load(tmp_path / "hosts.ini", groups=inventory.parse_group_options(["bare_metal=dgx"]))
    assert [h.name for h in inv.in_role("bare_metal")] == ["node3"]
    assert [h.name for h in inv.in_role("container_hosts")] == ["node1", "node2", "node3"]
    assert [
        p.host.name
        for p in layout.resolve(
            "distributed", inventory.load(tmp_path / "hosts.ini", groups={"bare_metal": ["dgx", "gpu_nodes"]})
        )
    ] == ["node1", "node2", "node3"]


@pytest.mark.parametrize(
    ("options", "extra", "message"),
    [
        (["bare_metal"], "", r"--group 'bare_metal': ROLE=GROUP"),
        (["bare_metl=gpu_nodes"], "", r"--group bare_metl=gpu_nodes: 'bare_metl' is not a role; roles: bare_metal, "),
        (["bare_metal=gpu_node"], "", r"--group bare_metal=gpu_node: .* has no group 'gpu_node' \(groups: bastions, "),
        ([], "dltestbed_groups=gpu_nodes\n", r"dltestbed_groups must map roles to groups"),
        ([], 'dltestbed_groups={"bare_metal": "nope"}\n', r"dltestbed_groups bare_metal=nope: .* has no group 'nope'"),
        ([], "[gpu_nodes:vars]\nansible_port=http\n", r"host node1: ansible_port 'http' is not a port number"),
        ([], "[gpu_nodes:vars]\nansible_host={{ undefined_thing }}\n", r"host node1: ansible_host: .*undefined_thing"),
    ],
)
def test_bad_group_options_and_variables_are_one_line(
    tmp_path: Path, options: list[str], extra: str, message: str
) -> None:
    (tmp_path / "hosts.ini").write_text(USER_INI + extra)
    with pytest.raises(ConfigError, match=message) as err:
        inventory.load(tmp_path / "hosts.ini", groups=inventory.parse_group_options(options))
    assert "\n" not in str(err.value)


def test_line_stream_splits_and_flushes() -> None:
    seen: list[str] = []
    s = LineStream(seen.append)
    s.write('{"a":')
    s.write('1}\n{"b":2}\r\npart')
    assert seen == ['{"a":1}', '{"b":2}']
    s.close()
    assert seen[-1] == "part"
