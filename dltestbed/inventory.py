"""Read a user's Ansible inventory the way Ansible reads it (group_vars, host_vars included)."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dltestbed.errors import ConfigError

DEFAULT_VENV = "/opt/dltestbed/venv"

# The inventory groups dltestbed understands, and the target kinds their hosts can hold.
GROUPS: dict[str, tuple[str, ...]] = {
    "bare_metal": ("bm",),
    "container_hosts": ("cbm",),
    "libvirt_hosts": ("vm", "cvm"),
}


# Variables Ansible adds to every host; not the user's.
_MAGIC = frozenset({"inventory_file", "inventory_dir", "inventory_hostname", "inventory_hostname_short",
                    "group_names", "ansible_facts", "playbook_dir", "ansible_playbook_python",
                    "ansible_config_file", "groups", "ansible_version", "omit"})  # fmt: skip


def _plain(value: Any) -> Any:
    """Ansible's tagged strings and containers as plain Python values."""
    if isinstance(value, str):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def ssh_options(args: str) -> dict[str, str]:
    """`-o Key=Value` options of an ssh argument string (ansible_ssh_common_args and friends)."""
    out: dict[str, str] = {}
    tokens = shlex.split(args or "")
    for i, tok in enumerate(tokens):
        opt = None
        if tok == "-o" and i + 1 < len(tokens):
            opt = tokens[i + 1]
        elif tok.startswith("-o") and len(tok) > 2:
            opt = tok[2:]
        if opt and "=" in opt:
            key, value = opt.split("=", 1)
            out[key.strip().lower()] = value.strip()
    return out


@dataclass(frozen=True)
class Host:
    """An inventory host and how to reach it over SSH."""

    name: str
    address: str
    port: int
    user: str | None
    key_file: str | None
    known_hosts_files: tuple[str, ...]
    groups: tuple[str, ...]
    vars: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def venv(self) -> str:
        """Where dltestbed's venv lives on the host (inventory variable `dltestbed_venv`)."""
        return str(self.vars.get("dltestbed_venv") or DEFAULT_VENV)

    @property
    def python(self) -> str:
        """The venv's interpreter on the host."""
        return f"{self.venv}/bin/python"

    def kinds(self) -> tuple[str, ...]:
        """Target kinds this host can hold, from its groups."""
        return tuple(k for g, kinds in GROUPS.items() if g in self.groups for k in kinds)


@dataclass(frozen=True)
class Inventory:
    """Hosts in inventory order, and group membership."""

    path: Path
    hosts: dict[str, Host]
    groups: dict[str, list[str]]

    def in_group(self, group: str) -> list[Host]:
        """Hosts of a group, in inventory order."""
        return [self.hosts[n] for n in self.groups.get(group, []) if n in self.hosts]


def _precheck(path: Path) -> None:
    if not path.exists():
        raise ConfigError(f"inventory {str(path)!r} does not exist")
    if path.is_file() and path.suffix in (".yml", ".yaml"):
        import yaml

        try:
            doc = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise ConfigError(f"inventory {str(path)!r} is not valid YAML{where}: {problem}") from None
        if not isinstance(doc, dict):
            raise ConfigError(
                f"inventory {str(path)!r}: expected a mapping of groups (like `all:`), got {type(doc).__name__}"
            )


def load(path: str | Path, limit: str | None = None) -> Inventory:
    """Parse an inventory (YAML or INI, with group_vars/host_vars) into hosts, or a ConfigError line."""
    p = Path(path).expanduser().resolve()
    _precheck(p)
    os.environ.setdefault("ANSIBLE_LOCALHOST_WARNING", "False")
    os.environ.setdefault("ANSIBLE_INVENTORY_UNPARSED_WARNING", "False")
    from ansible.errors import AnsibleError
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.utils.display import Display
    from ansible.vars.manager import VariableManager

    warnings: list[str] = []
    original = Display.warning
    Display.warning = lambda self, msg, *a, **k: warnings.append(str(msg))  # type: ignore[method-assign]
    try:
        loader = DataLoader()
        inv = InventoryManager(loader=loader, sources=[str(p)])
        if limit:
            inv.subset(limit)
        hosts = inv.get_hosts()
        manager = VariableManager(loader=loader, inventory=inv)
        parsed = {}
        for h in hosts:
            v = _plain(manager.get_vars(host=h))
            opts = ssh_options(" ".join(str(v.get(k) or "") for k in
                                        ("ansible_ssh_common_args", "ansible_ssh_extra_args")))  # fmt: skip
            known = tuple(os.path.expanduser(f) for f in opts.get("userknownhostsfile", "").split() if f)
            parsed[h.name] = Host(
                name=h.name, address=str(v.get("ansible_host") or h.name), port=int(v.get("ansible_port") or 22),
                user=v.get("ansible_user"), key_file=v.get("ansible_ssh_private_key_file"),
                known_hosts_files=known, groups=tuple(v.get("group_names") or ()),
                vars={k: val for k, val in v.items() if k not in _MAGIC},
            )  # fmt: skip
        groups = {g: list(names) for g, names in inv.get_groups_dict().items()}
    except AnsibleError as exc:
        raise ConfigError(f"inventory {str(p)!r}: {str(exc).splitlines()[0]}") from None
    finally:
        Display.warning = original  # type: ignore[method-assign]
    if not parsed:
        why = next((w.splitlines()[0] for w in warnings if "parse" in w.lower()), None)
        if limit:
            raise ConfigError(f"--limit {limit!r} matches no host of inventory {str(p)!r}")
        raise ConfigError(f"inventory {str(p)!r} has no hosts" + (f" ({why})" if why else ""))
    return Inventory(p, parsed, groups)
