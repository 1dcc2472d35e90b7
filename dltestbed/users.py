"""Running a command as an unprivileged user (--as-user): the name checked, and the command line that drops to it.

As root, `setpriv` (util-linux) changes to the user's uid, gid and groups, clears the environment but for the
user's HOME, USER, LOGNAME, SHELL and PATH, and execs the command as that user: no root process stays behind it.
The variables the command needs are handed over by `env` after the drop, without secrets. Pure: nothing here runs
a command."""

from __future__ import annotations

import os
import pwd
import re
from collections.abc import Mapping, Sequence

from dltestbed.errors import ConfigError
from dltestbed.secretenv import scrub

# POSIX portable user names, as useradd takes them (no leading dash: it would read as an option)
NAME_RE = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$")


def check_name(name: str, option: str = "--as-user") -> str:
    """The name, or a ConfigError line: a user name, and never root (the point is to run unprivileged)."""
    if not NAME_RE.match(name):
        raise ConfigError(f"{option}: a user name like ops or dl_bench (got {name!r})")
    if name == "root":
        raise ConfigError(f"{option} root: name an unprivileged user (root is what this option avoids)")
    return name


def local_uid(name: str, option: str = "--as-user") -> int:
    """The uid of a user of this machine, or a ConfigError saying how to make one (never root's)."""
    try:
        uid = pwd.getpwnam(check_name(name, option)).pw_uid
    except KeyError:
        raise ConfigError(
            f"{option} {name}: no such user on this machine; create one (useradd --create-home {name}) "
            "or let provisioning make it on inventory hosts (dltestbed provision --as-user)"
        ) from None
    if uid == 0:
        raise ConfigError(f"{option} {name}: that user has uid 0 (root); name an unprivileged one")
    return uid


def invoking_user() -> str:
    """The name of the user this process runs as."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def primary_gid(name: str, option: str = "--as-user") -> int:
    """The primary group of a user of this machine (nobody's is nogroup: a group need not share its user's name)."""
    local_uid(name, option)
    return pwd.getpwnam(name).pw_gid


def drop_argv(name: str, gid: int, argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
    """argv run as `name` (from root): setpriv to its uid, its primary group `gid` (as the machine the command runs
    on knows it) and its groups, with a fresh login environment; then `env` sets the command's variables (secrets
    removed) and starts it. `env` always starts it: the command is then looked up as the user, not with root's
    rights to setpriv's own exec (which reaches an interpreter in a folder the user cannot enter)."""
    handed = [f"{k}={v}" for k, v in scrub(dict(env or {})).items()]
    drop = ["setpriv", f"--reuid={name}", f"--regid={gid}", "--init-groups", "--reset-env", "--"]
    return [*drop, "env", *handed, *argv]


def drop_here(name: str, argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
    """drop_argv for a command run on this machine: the user's primary group from this machine's passwd."""
    return drop_argv(name, primary_gid(name), argv, env)
