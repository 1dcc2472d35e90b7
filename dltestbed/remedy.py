"""What acceptance does about a node, dry-run unless asked: `--on-fail drain` drains a failed Slurm node with its
reason (`scontrol update nodename=… state=drain reason="dltestbed: …"`), `--on-fail 'CMD {node} {reason}'` runs a
site's own hook, and `--on-pass resume` resumes a node that passes. A hook's words are split as a shell would
split them, each word's {node} and {reason} replaced, and the command run without a shell: a reason never
becomes code."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dltestbed.errors import ConfigError

DRAIN, RESUME = "drain", "resume"  # the built-in remedies, by their option values
PLACEHOLDERS = ("{node}", "{reason}")
REASON_PREFIX = "dltestbed: "
REASON_MAX = 200  # characters of a reason given on: Slurm keeps a node's reason short
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # a host name: nothing a command could take as an option


@dataclass(frozen=True)
class Remedy:
    """One command for one node, and why."""

    node: str
    argv: tuple[str, ...]
    why: str  # "fail: …" or "pass"


def check_spec(spec: str, option: str) -> None:
    """A remedy's option value, checked before anything runs: one ConfigError line."""
    builtin = DRAIN if option == "--on-fail" else RESUME
    if spec == builtin:
        return
    if not spec.strip():
        raise ConfigError(f"{option}: empty; give {builtin!r} or a command such as 'notify-ops {{node}} {{reason}}'")
    try:
        words = shlex.split(spec)
    except ValueError as exc:
        raise ConfigError(f"{option}: {exc} in {spec!r}") from None
    unknown = sorted({m for w in words for m in re.findall(r"\{[^{}]*\}", w)} - set(PLACEHOLDERS))
    if unknown:
        raise ConfigError(f"{option}: unknown placeholder {unknown[0]}; a command may use {' and '.join(PLACEHOLDERS)}")


def found(command: str) -> bool:
    """Whether a remedy's command is there to run: on PATH, or a path to an executable file."""
    return shutil.which(command) is not None


def check_found(spec: str, option: str) -> None:
    """A remedy that will run (--apply): its command must be there, or a ConfigError line says so now."""
    argv = command(spec, "node")
    if not found(argv[0]):
        raise ConfigError(f"{option}: {argv[0]!r} is not a command on this machine (not on PATH, or not executable)")


def _reason(text: str) -> str:
    one_line = " ".join(text.split())
    full = REASON_PREFIX + one_line
    return full if len(full) <= REASON_MAX else full[: REASON_MAX - 1] + "…"


def command(spec: str, node: str, reason: str = "") -> tuple[str, ...]:
    """The argv of a remedy (`check_spec`'s value) for one node: scontrol for drain and resume, else the site's
    command with {node} and {reason} put in its words."""
    if not NODE_NAME.fullmatch(node):
        raise ConfigError(f"node {node!r}: not a host name a remedy may be run for")
    if spec == DRAIN:
        return ("scontrol", "update", f"nodename={node}", "state=drain", f"reason={_reason(reason)}")
    if spec == RESUME:
        return ("scontrol", "update", f"nodename={node}", "state=resume")
    said = _reason(reason)
    return tuple(w.replace("{node}", node).replace("{reason}", said) for w in shlex.split(spec))


@dataclass(frozen=True)
class Done:
    """A remedy run (or, in a dry run, only shown): its exit status and its last line."""

    remedy: Remedy
    ran: bool
    returncode: int | None = None
    said: str = ""

    @property
    def line(self) -> str:
        """For the user: the command, quoted as a shell would need it, and what came of it."""
        shown = shlex.join(self.remedy.argv)
        if not self.ran:
            return f"would run (dry run; --apply runs it): {shown}"
        tail = f": {self.said}" if self.said else ""
        return f"ran {shown}: exit {self.returncode}{tail}"


Runner = Callable[[Sequence[str]], subprocess.CompletedProcess[str]]


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return subprocess.CompletedProcess(list(argv), 127, "", f"{argv[0]}: command not found")
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(list(argv), 124, "", "timed out after 120 s")


def apply(remedies: Sequence[Remedy], dry_run: bool = True, run: Runner = _run) -> list[Done]:
    """Each remedy, in order: shown (dry run) or run; a failed command is reported, the rest still run."""
    out = []
    for r in remedies:
        if dry_run:
            out.append(Done(r, False))
            continue
        proc = run(r.argv)
        lines = [x.strip() for x in (proc.stderr + proc.stdout).splitlines() if x.strip()]
        out.append(Done(r, True, proc.returncode, lines[-1] if lines else ""))
    return out
