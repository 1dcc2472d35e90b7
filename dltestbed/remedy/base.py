"""What every remedy shares: the reason as a node's record keeps it, the node name checked, and an action, what
is done for one node (a command run without a shell, or a change made through a cluster's API)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from typing import ClassVar, Protocol

from dltestbed.errors import ConfigError

ON_FAIL, ON_PASS = "--on-fail", "--on-pass"
REASON_PREFIX = "dltestbed: "
REASON_MAX = 200  # characters of a reason given on, where nothing else says: Slurm keeps a node's reason short
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # a host name: nothing a command could take as an option
COMMAND_SECONDS = 120


def reason(text: str, limit: int = REASON_MAX) -> str:
    """A failed node's reason on one line, marked as dltestbed's, cut at `limit` characters."""
    full = REASON_PREFIX + " ".join(text.split())
    return full if len(full) <= limit else full[: limit - 1] + "…"


def checked_node(node: str) -> str:
    """The node's name, refused in one line where a command could read it as an option or code."""
    if not NODE_NAME.fullmatch(node):
        raise ConfigError(f"node {node!r}: not a host name a remedy may be run for")
    return node


class Action(Protocol):
    """What a remedy does for one node."""

    @property
    def shown(self) -> str:
        """What it does, as the user reads it (a command, quoted as a shell would need it)."""
        ...

    def missing(self) -> str | None:
        """What this machine lacks to do it (read here, nothing asked of the network), or None."""
        ...

    def run(self) -> tuple[int, str]:
        """Do it: its exit status (0: done) and the last line it said."""
        ...


@dataclass(frozen=True)
class Where:
    """What a built-in remedy needs to know of the site: the kubeconfig of Kubernetes' (None: $KUBECONFIG, else
    ~/.kube/config)."""

    kubeconfig: str | None = None


class Builtin(Protocol):
    """A built-in remedy, by its option value (`--on-fail drain`): for which options it is, and its action."""

    name: ClassVar[str]
    options: ClassVar[tuple[str, ...]]  # ON_FAIL, ON_PASS: where it may be given

    def action(self, node: str, failed: bool, why: str, where: Where) -> Action:
        """Its action for a node that failed (with why) or passed."""
        ...

    def unknown(self, nodes: tuple[str, ...], where: Where, option: str) -> str | None:
        """Before any node is measured, with --apply: the nodes it could not act on (one line), or None."""
        ...


@dataclass(frozen=True)
class Command:
    """A command, run without a shell: a reason in its words stays one argument."""

    argv: tuple[str, ...]

    @property
    def shown(self) -> str:
        return shlex.join(self.argv)

    def missing(self) -> str | None:
        if shutil.which(self.argv[0]) is not None:  # on PATH, or a path to an executable file
            return None
        return f"{self.argv[0]!r} is not a command on this machine: not on PATH, or not executable"

    def run(self) -> tuple[int, str]:
        try:
            proc = subprocess.run(
                list(self.argv), capture_output=True, text=True, timeout=COMMAND_SECONDS, stdin=subprocess.DEVNULL
            )
        except FileNotFoundError:
            return 127, f"{self.argv[0]}: command not found"
        except subprocess.TimeoutExpired:
            return 124, f"timed out after {COMMAND_SECONDS} s"
        lines = [x.strip() for x in (proc.stderr + proc.stdout).splitlines() if x.strip()]
        return proc.returncode, lines[-1] if lines else ""
