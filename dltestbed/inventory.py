"""Read a user's Ansible inventory the way Ansible reads it: group_vars and host_vars, templated
variables (`ansible_host: "{{ net }}.12"`), the proxy in `ansible_ssh_common_args` (ProxyJump, ProxyCommand),
`ansible_connection: local` (the node is this machine: no SSH), and the user's own group names mapped to
dltestbed's roles (`--group bare_metal=gpu_nodes`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dltestbed.errors import ConfigError
from dltestbed.hostvars import (
    CONNECTION_VAR,
    LOCAL,
    SSH_ARGS,
    ansible_scratch,
    ansible_vars,
    connection_kind,
    expand_proxy_command,
    first_var,
    precheck,
    ssh_options,
)

DEFAULT_VENV = "/opt/dltestbed/venv"

# dltestbed's roles, and the target kinds their hosts can hold. A role is played by the hosts of the
# inventory group of the same name, or of the groups mapped to it (--group ROLE=GROUP, dltestbed_groups).
GROUPS: dict[str, tuple[str, ...]] = {
    "bare_metal": ("bm",),
    "container_hosts": ("cbm",),
    "libvirt_hosts": ("vm", "cvm"),
}
GROUPS_VAR = "dltestbed_groups"  # inventory variable: {role: group or [groups]}, e.g. {bare_metal: gpu_nodes}


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
    roles: tuple[str, ...] | None = None  # dltestbed roles it plays (None: the role-named groups it is in)
    proxy_command: str | None = None  # ProxyCommand, %h %p %r %n already expanded
    jump: Host | None = None  # ProxyJump: the host to go through (itself possibly behind another)
    ssh_config: str | None = None  # `-F file` of its ssh arguments: read instead of ~/.ssh/config
    connection: str = "ssh"  # ansible_connection: "ssh" (any of SSH_CONNECTIONS) or LOCAL

    @property
    def local(self) -> bool:
        """`ansible_connection: local`: the host is this machine; its commands run here, with no SSH."""
        return self.connection == LOCAL

    @property
    def this_install(self) -> bool:
        """A local host without `dltestbed_venv`: its workload is the dltestbed running now, started by this
        very interpreter (provision checks it and installs nothing there)."""
        return self.local and not self.vars.get("dltestbed_venv")

    @property
    def venv(self) -> str:
        """Where dltestbed's venv lives on the host: the inventory variable `dltestbed_venv`; else, on a local
        host, the prefix of the interpreter dltestbed runs from (sys.prefix: the node is this machine, and
        this machine's dltestbed is installed there); else DEFAULT_VENV, where `provision` installs it."""
        given = self.vars.get("dltestbed_venv")
        return str(given) if given else sys.prefix if self.local else DEFAULT_VENV

    @property
    def python(self) -> str:
        """The interpreter that has dltestbed on the host: the venv's (sys.executable for this_install)."""
        return sys.executable if self.this_install else f"{self.venv}/bin/python"

    def plays(self, role: str) -> bool:
        """Whether the host plays a role (bare_metal, container_hosts, libvirt_hosts)."""
        return role in (self.roles if self.roles is not None else self.groups)

    def kinds(self) -> tuple[str, ...]:
        """Target kinds this host can hold, from its roles."""
        return tuple(k for g, kinds in GROUPS.items() if self.plays(g) for k in kinds)


def this_machine(host: Host | None) -> bool:
    """Whether a bench's machine is this one: no inventory host (None), or a host with a local connection."""
    return host is None or host.local


def over_ssh(host: Host | None) -> Host | None:
    """The host when dltestbed reaches it over SSH (to go through it to its VMs); None when it is this machine."""
    return None if this_machine(host) else host


@dataclass(frozen=True)
class Inventory:
    """Hosts in inventory order, and group membership."""

    path: Path
    hosts: dict[str, Host]
    groups: dict[str, list[str]]
    role_groups: dict[str, tuple[str, ...]] = field(default_factory=dict)  # role → the groups that play it

    def in_role(self, role: str) -> list[Host]:
        """Hosts that play a role, in inventory order."""
        return [h for h in self.hosts.values() if h.plays(role)]

    def site_var(self, var: str, option: str) -> str | None:
        """A site's setting (for group `all`, so every host has the same value), or None where no host has it; hosts
        that disagree are one ConfigError line, which names `option`, what gives it instead."""
        values = {str(h.vars[var]) for h in self.hosts.values() if h.vars.get(var) not in (None, "")}
        if len(values) > 1:
            raise ConfigError(
                f"inventory {str(self.path)!r}: {var} differs between hosts ({', '.join(sorted(values))});"
                f" set it once, for group all, or give {option}"
            )
        return values.pop() if values else None

    def role_help(self, role: str) -> str:
        """`group bare_metal` or `group(s) gpu_nodes (bare_metal)`: where the role's hosts come from, for messages."""
        mapped = self.role_groups.get(role, (role,))
        return f"group {role}" if mapped == (role,) else f"group(s) {', '.join(mapped)} (playing {role})"


def parse_group_options(items: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """`--group ROLE=GROUP[,GROUP]` items (repeatable; a role given twice takes both) as role → groups;
    a ConfigError line naming the item otherwise."""
    out: dict[str, tuple[str, ...]] = {}
    for item in items:
        role, sep, names = item.partition("=")
        groups = tuple(g.strip() for g in names.split(",") if g.strip())
        if not sep or not groups:
            raise ConfigError(f"--group {item!r}: ROLE=GROUP, e.g. bare_metal=gpu_nodes")
        out[role.strip()] = (*out.get(role.strip(), ()), *groups)
    return {role: tuple(dict.fromkeys(g)) for role, g in out.items()}


def _groups_var(value: Any, where: str) -> dict[str, tuple[str, ...]]:
    """The inventory's dltestbed_groups value as role → groups, or a ConfigError line."""
    if not isinstance(value, dict):
        raise ConfigError(
            f"{where}: {GROUPS_VAR} must map roles to groups, e.g. {{bare_metal: gpu_nodes}} "
            f"(got {type(value).__name__})"
        )
    out = {}
    for role, groups in value.items():
        names = [groups] if isinstance(groups, str) else groups
        if not isinstance(names, list) or not names or not all(isinstance(g, str) and g for g in names):
            raise ConfigError(f"{where}: {GROUPS_VAR}.{role} must be a group name or a list of them")
        out[str(role)] = tuple(names)
    return out


def _check_roles(mapping: dict[str, tuple[str, ...]], known: set[str], source: str, where: str) -> None:
    for role, groups in mapping.items():
        if role not in GROUPS:
            raise ConfigError(f"{source} {role}={','.join(groups)}: {role!r} is not a role; roles: {', '.join(GROUPS)}")
        for g in groups:
            if g not in known:
                have = ", ".join(sorted(known - {"all", "ungrouped"})) or "none"
                raise ConfigError(f"{source} {role}={g}: {where} has no group {g!r} (groups: {have})")


def _jump_host(spec: str, parsed: dict[str, Host], target: Host, depth: int = 0) -> Host:
    """A ProxyJump spec `[user@]host[:port][,next…]` as the Host to go through: an inventory host when it
    names one (its user, key and own proxy), else one reached as ssh would: the target's `-F` config (or
    the user's), its keys and known_hosts files."""
    first, _, rest = spec.rpartition(",")  # the last hop is the one next to the target
    target_spec = rest or first
    user, _, hostport = target_spec.rpartition("@")
    host, _, port = hostport.partition(":")
    if hostport.startswith("["):
        host, _, port = hostport[1:].partition("]")
        port = port.lstrip(":")
    match = parsed.get(host) or next((h for h in parsed.values() if h.address == host), None)
    cfg = _lookup(target.ssh_config, host)
    known = tuple(os.path.expanduser(f) for f in str(cfg.get("userknownhostsfile") or "").split())
    if match is not None:  # its key may be recorded where the target's -F config or the target's say
        files = tuple(dict.fromkeys((*match.known_hosts_files, *known, *target.known_hosts_files)))
        base = replace(
            match,
            port=int(port) if port.isdigit() else match.port,
            user=user or match.user,
            key_file=match.key_file or (cfg.get("identityfile") or [None])[0],
            known_hosts_files=files,
            ssh_config=match.ssh_config or target.ssh_config,
        )
    else:
        base = Host(
            name=host,
            address=str(cfg.get("hostname") or host),
            port=int(port) if port.isdigit() else int(cfg.get("port") or 22),
            user=user or cfg.get("user") or None,
            key_file=(cfg.get("identityfile") or [None])[0],
            known_hosts_files=known or target.known_hosts_files,
            groups=(),
            ssh_config=target.ssh_config,
        )
    if rest and first:
        if depth > 8:
            raise ConfigError(f"ProxyJump {spec!r}: more than 8 hops")
        base = replace(base, jump=_jump_host(first, parsed, target, depth + 1), proxy_command=None)
    return base


def _lookup(config: str | None, host: str) -> dict[str, Any]:
    """What an ssh config file (`-F`) says of a host; {} without one. Tokens like %d are left to ssh."""
    if not config:
        return {}
    # SSH libraries load only where a command connects
    import paramiko

    try:
        return dict(paramiko.SSHConfig.from_path(config).lookup(host))
    except (OSError, paramiko.SSHException) as exc:
        raise ConfigError(f"ssh config {config!r} (from -F): {exc}") from None


def load(path: str | Path, limit: str | None = None, groups: Mapping[str, Sequence[str]] | None = None) -> Inventory:
    """Parse an inventory (YAML or INI, with group_vars/host_vars) into hosts, or a ConfigError line.
    `groups`: role → the user's groups that play it (`--group`), over the inventory's dltestbed_groups."""
    p = Path(path).expanduser().resolve()
    precheck(p)
    os.environ.setdefault("ANSIBLE_LOCALHOST_WARNING", "False")
    os.environ.setdefault("ANSIBLE_INVENTORY_UNPARSED_WARNING", "False")
    ansible_scratch()
    where = f"inventory {str(p)!r}"
    raw, all_groups, warnings = ansible_vars(p, limit, where)
    if not raw:
        why = next((w.splitlines()[0] for w in warnings if "parse" in w.lower()), None)
        if limit:
            raise ConfigError(f"--limit {limit!r} matches no host of inventory {str(p)!r}")
        raise ConfigError(f"inventory {str(p)!r} has no hosts" + (f" ({why})" if why else ""))
    role_groups = _role_groups(raw, all_groups, dict(groups or {}), where)
    members = {role: {n for g in gs for n in all_groups.get(g, ())} for role, gs in role_groups.items()}
    parsed: dict[str, Host] = {}
    jumps: dict[str, str] = {}
    for name, v in raw.items():
        parsed[name], jump = _host(name, v, where, tuple(r for r in GROUPS if name in members[r]))
        if jump:
            jumps[name] = jump
    for name, spec in jumps.items():
        parsed[name] = replace(parsed[name], jump=_jump_host(spec, parsed, parsed[name]))
    return Inventory(p, parsed, all_groups, role_groups)


def _host(name: str, v: dict[str, Any], where: str, roles: tuple[str, ...]) -> tuple[Host, str | None]:
    """A Host from its templated variables, and its ProxyJump spec (resolved once all hosts are read)."""
    opts = ssh_options(" ".join(str(v.get(k) or "") for k in SSH_ARGS))
    known = tuple(os.path.expanduser(f) for f in opts.get("userknownhostsfile", "").split() if f)
    address = str(first_var(v, "ansible_host") or name)
    port_value = first_var(v, "ansible_port") or 22
    try:
        port = int(port_value)
        if not 0 < port < 65536:
            raise ValueError
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: host {name}: ansible_port {port_value!r} is not a port number (1-65535)") from None
    user = first_var(v, "ansible_user")
    command = opts.get("proxycommand")
    jump = opts.get("proxyjump")
    command = None if (command or "").lower() == "none" else command
    jump = None if (jump or "").lower() == "none" else jump
    host = Host(
        name=name,
        address=address,
        port=port,
        user=str(user) if user else None,
        key_file=first_var(v, "ansible_ssh_private_key_file"),
        known_hosts_files=known,
        groups=tuple(v.get("group_names") or ()),
        vars={k: val for k, val in v.items() if k != "group_names"},
        roles=roles,
        proxy_command=expand_proxy_command(command, address, port, user, name) if command else None,
        ssh_config=os.path.expanduser(opts["configfile"]) if opts.get("configfile") else None,
        connection=connection_kind(v.get(CONNECTION_VAR), name, where),
    )
    if host.local:  # nothing to go through: it is this machine
        return replace(host, proxy_command=None), None
    return host, (jump if not command else None)  # ssh: ProxyCommand wins over ProxyJump


def _role_groups(
    raw: dict[str, dict[str, Any]], known: dict[str, list[str]], given: dict[str, Sequence[str]], where: str
) -> dict[str, tuple[str, ...]]:
    """role → groups: --group, else the inventory's dltestbed_groups (the same on every host that has it),
    else the group named as the role."""
    values = {n: v[GROUPS_VAR] for n, v in raw.items() if v.get(GROUPS_VAR) is not None}
    from_inv: dict[str, tuple[str, ...]] = {}
    if values:
        first_name, first = next(iter(values.items()))
        other = next((n for n, val in values.items() if val != first), None)
        if other:
            raise ConfigError(
                f"{where}: {GROUPS_VAR} differs between hosts {first_name} and {other}; set it once, under all:vars"
            )
        from_inv = _groups_var(first, f"{where}: host {first_name}")
        _check_roles(from_inv, set(known), GROUPS_VAR, where)
    cli = {role: tuple(g) for role, g in given.items()}
    _check_roles(cli, set(known), "--group", where)
    return {role: cli.get(role) or from_inv.get(role) or (role,) for role in GROUPS}
