"""What acceptance does about a node, dry-run unless asked. Built in, by name: Slurm's `--on-fail drain` (with the
reason) and `--on-pass resume` (remedy/slurm.py); Kubernetes' `--on-fail taint` (its reason in an annotation),
`--on-pass untaint` and `label` for either (remedy/kubernetes.py). Else `--on-fail 'CMD {node} {reason}'` runs a
site's own hook: its words split as a shell would split them, each word's {node} and {reason} replaced, and the
command run without a shell: a reason never becomes code."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from dltestbed.errors import ConfigError
from dltestbed.remedy.base import (
    ON_FAIL,
    ON_PASS,
    REASON_MAX,
    REASON_PREFIX,
    Action,
    Builtin,
    Command,
    Where,
    checked_node,
    reason,
)
from dltestbed.remedy.kubernetes import Label, OnCluster, Taint, Untaint
from dltestbed.remedy.slurm import Drain, Resume

__all__ = ["ON_FAIL", "ON_PASS", "REASON_MAX", "REASON_PREFIX", "Where", "checked_node"]

BUILTINS: dict[str, Builtin] = {b.name: b for b in (Drain(), Resume(), Taint(), Untaint(), Label())}
ON_A_CLUSTER = {name for name, b in BUILTINS.items() if isinstance(b, OnCluster)}  # they need a kubeconfig
PLACEHOLDERS = ("{node}", "{reason}")


def builtins_for(option: str) -> list[str]:
    """The built-in remedies' names that `option` takes."""
    return [name for name, b in BUILTINS.items() if option in b.options]


def check_spec(spec: str, option: str) -> None:
    """A remedy's option value, checked before anything runs: one ConfigError line."""
    builtin = BUILTINS.get(spec)
    if builtin is not None:
        if option not in builtin.options:
            raise ConfigError(f"{option} {spec}: {spec} is for {' and '.join(builtin.options)}")
        return
    if not spec.strip():
        names = " or ".join(repr(n) for n in builtins_for(option))
        raise ConfigError(f"{option}: empty; give {names}, or a command such as 'notify-ops {{node}} {{reason}}'")
    try:
        words = shlex.split(spec)
    except ValueError as exc:
        raise ConfigError(f"{option}: {exc} in {spec!r}") from None
    unknown = sorted({m for w in words for m in re.findall(r"\{[^{}]*\}", w)} - set(PLACEHOLDERS))
    if unknown:
        raise ConfigError(f"{option}: unknown placeholder {unknown[0]}; a command may use {' and '.join(PLACEHOLDERS)}")


def action(spec: str, node: str, failed: bool = False, why: str = "", where: Where = Where()) -> Action:
    """What a remedy (`check_spec`'s value) does for one node that failed (with why) or passed: a built-in's
    action, else the site's command with {node} and {reason} put in its words."""
    checked_node(node)
    builtin = BUILTINS.get(spec)
    if builtin is not None:
        return builtin.action(node, failed, why, where)
    said = reason(why)
    return Command(tuple(w.replace("{node}", node).replace("{reason}", said) for w in shlex.split(spec)))


def check_found(spec: str, option: str, nodes: tuple[str, ...], where: Where) -> None:
    """A remedy that will run (--apply), before any node is measured: what this machine lacks to run it, and the
    nodes a built-in could not act on, each a ConfigError line."""
    lacking = action(spec, nodes[0], option == ON_FAIL, "", where).missing()
    if lacking is not None:
        raise ConfigError(lacking if lacking.startswith(option) else f"{option}: {lacking}")
    builtin = BUILTINS.get(spec)
    unknown = builtin.unknown(nodes, where, option) if builtin is not None else None
    if unknown is not None:
        raise ConfigError(unknown)


@dataclass(frozen=True)
class Remedy:
    """What is done for one node, and why."""

    node: str
    action: Action
    why: str  # "fail: …" or "pass: "


@dataclass(frozen=True)
class Done:
    """A remedy done (or, in a dry run, only shown): its exit status and its last line."""

    remedy: Remedy
    ran: bool
    returncode: int | None = None
    said: str = ""

    @property
    def line(self) -> str:
        """For the user: what was done (a command quoted as a shell would need it), and what came of it."""
        shown = self.remedy.action.shown
        if not self.ran:
            return f"would run (dry run; --apply runs it): {shown}"
        tail = f": {self.said}" if self.said else ""
        return f"ran {shown}: exit {self.returncode}{tail}"


def apply(remedies: Sequence[Remedy], dry_run: bool = True) -> list[Done]:
    """Each remedy, in order: shown (dry run) or done; a failed one is reported, the rest still done."""
    out = []
    for r in remedies:
        if dry_run:
            out.append(Done(r, False))
            continue
        code, said = r.action.run()
        out.append(Done(r, True, code, said))
    return out
