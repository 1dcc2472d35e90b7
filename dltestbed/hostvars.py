"""What an Ansible inventory says of each host, as Ansible reads it: its variables (group_vars and host_vars, the
connection ones templated), the file checked before Ansible reads it, and what dltestbed reads in the variables:
the options of the host's ssh arguments, its ProxyCommand's tokens expanded, and its connection (SSH, or this
machine). inventory.py makes the hosts of them."""

from __future__ import annotations

import atexit
import os
import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Any

from dltestbed.errors import ConfigError

# Connection variables read from the inventory (templated as Ansible would), with their older aliases.
_ALIASES = {
    "ansible_host": ("ansible_host", "ansible_ssh_host"),
    "ansible_port": ("ansible_port", "ansible_ssh_port"),
    "ansible_user": ("ansible_user", "ansible_ssh_user"),
    "ansible_ssh_private_key_file": ("ansible_ssh_private_key_file", "ansible_private_key_file"),
}
SSH_ARGS = ("ansible_ssh_common_args", "ansible_ssh_extra_args")
CONNECTION_VAR = "ansible_connection"

# ansible_connection values dltestbed honours: Ansible's SSH plugins (dltestbed reaches the host over SSH itself),
# and `local` (the host is this machine: its commands run here, as Ansible runs its tasks). Names may be fully
# qualified (ansible.builtin.local).
SSH_CONNECTIONS = frozenset({"ssh", "smart", "paramiko", "paramiko_ssh"})
LOCAL = "local"


# Variables Ansible adds to every host; not the user's.
_MAGIC = frozenset(
    {
        "inventory_file",
        "inventory_dir",
        "inventory_hostname",
        "inventory_hostname_short",
        "group_names",
        "ansible_facts",
        "playbook_dir",
        "ansible_playbook_python",
        "ansible_config_file",
        "groups",
        "ansible_version",
        "omit",
    }
)


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
    """`-o Key=Value` (or `-o "Key Value"`) options of an ssh argument string (ansible_ssh_common_args and
    friends), keys lower-cased; `-J jump` is read as ProxyJump, `-F file` as `configfile`. The first value
    of a key wins, as in ssh."""
    out: dict[str, str] = {}
    tokens = shlex.split(args or "")
    flags = {"-o": "", "-J": "ProxyJump=", "-F": "ConfigFile="}
    for i, tok in enumerate(tokens):
        opt = None
        if tok in flags and i + 1 < len(tokens):
            opt = flags[tok] + tokens[i + 1]
        elif tok[:2] in flags and len(tok) > 2:
            opt = flags[tok[:2]] + tok[2:]
        if not opt:
            continue
        key, sep, value = opt.partition("=")
        if not sep:
            key, _, value = opt.strip().partition(" ")
        if key.strip() and value.strip():
            out.setdefault(key.strip().lower(), value.strip())
    return out


def precheck(path: Path) -> None:
    if not path.exists():
        raise ConfigError(f"inventory {str(path)!r} does not exist")
    if path.is_file() and path.suffix in (".yml", ".yaml"):
        # PyYAML loads only for the commands that read YAML
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


def expand_proxy_command(command: str, address: str, port: int, user: str | None, name: str) -> str:
    """ssh's %h %p %r %n %% tokens of a ProxyCommand, expanded for this host."""
    tokens = {"h": address, "p": str(port), "r": user or os.environ.get("USER", "root"), "n": name, "%": "%"}
    out, i = [], 0
    while i < len(command):
        if command[i] == "%" and i + 1 < len(command) and command[i + 1] in tokens:
            out.append(tokens[command[i + 1]])
            i += 2
        else:
            out.append(command[i])
            i += 1
    return "".join(out)


def ansible_scratch() -> None:
    """Ansible's local scratch (made when it is imported) in a folder of ours, removed at exit: not ~/.ansible/tmp,
    which reading an inventory would leave in a new user's home. The user's own ANSIBLE_LOCAL_TEMP is kept."""
    if "ANSIBLE_LOCAL_TEMP" not in os.environ:
        scratch = tempfile.mkdtemp(prefix="dltestbed-ansible-")
        atexit.register(shutil.rmtree, scratch, True)
        os.environ["ANSIBLE_LOCAL_TEMP"] = scratch


def ansible_vars(
    p: Path, limit: str | None, where: str
) -> tuple[dict[str, dict[str, Any]], dict[str, list[str]], list[str]]:
    """Each host's variables as Ansible reads them (connection ones templated), each group's hosts, its warnings."""
    # Ansible takes a second to import: only the commands that read an inventory load it
    from ansible.errors import AnsibleError
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar
    from ansible.utils.display import Display
    from ansible.vars.hostvars import HostVars
    from ansible.vars.manager import VariableManager

    warnings: list[str] = []
    original = Display.warning
    Display.warning = lambda self, msg, *a, **k: warnings.append(str(msg))
    try:
        loader = DataLoader()
        inv = InventoryManager(loader=loader, sources=[str(p)])
        all_groups = {g: list(names) for g, names in inv.get_groups_dict().items()}
        if limit:
            inv.subset(limit)
        hosts = inv.get_hosts()
        manager = VariableManager(loader=loader, inventory=inv)
        HostVars(inventory=inv, variable_manager=manager, loader=loader)  # `hostvars[...]` in templates
        raw: dict[str, dict[str, Any]] = {}
        for h in hosts:
            v = manager.get_vars(host=h)
            templar = Templar(loader=loader, variables=v)
            wanted = {k for k in v if k.startswith("dltestbed_")} | {*SSH_ARGS, CONNECTION_VAR}
            wanted |= {a for names in _ALIASES.values() for a in names}
            out = {k: val for k, val in v.items() if k not in _MAGIC}
            for key in wanted & set(v):
                try:
                    out[key] = templar.template(v[key])
                except AnsibleError as exc:
                    raise ConfigError(f"{where}: host {h.name}: {key}: {str(exc).splitlines()[0]}") from None
            out["group_names"] = v.get("group_names") or ()
            raw[h.name] = _plain(out)
    except AnsibleError as exc:
        raise ConfigError(f"{where}: {str(exc).splitlines()[0]}") from None
    finally:
        Display.warning = original
    return raw, all_groups, warnings


def first_var(v: dict[str, Any], key: str) -> Any:
    return next((v[a] for a in _ALIASES[key] if v.get(a) not in (None, "")), None)


def connection_kind(value: Any, name: str, where: str) -> str:
    """A host's ansible_connection as "ssh" or LOCAL (default ssh, as Ansible's); a ConfigError line for one
    dltestbed cannot honour (docker, winrm, …)."""
    given = str(value or "ssh").strip()
    plugin = given.removeprefix("ansible.builtin.").removeprefix("ansible.legacy.")
    if plugin == LOCAL:
        return LOCAL
    if plugin in SSH_CONNECTIONS:
        return "ssh"
    raise ConfigError(
        f"{where}: host {name}: ansible_connection {given!r} is not supported; dltestbed reaches a host over SSH "
        f"({', '.join(sorted(SSH_CONNECTIONS))}) or runs on this machine ({LOCAL})"
    )
