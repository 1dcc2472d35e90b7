"""The Target protocol: one abstraction for bare metal, VMs and containers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

STDERR_TAIL_LINES = 40  # stderr lines a CommandResult keeps (the whole stream goes to the run's log)
SECRET_ENV_PREFIXES = ("INFLUXDB_V2_",)  # the controller's stream settings and token: never passed to a command


def command_env(base: Mapping[str, str], extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a command: the caller's without secrets, plus `extra`."""
    env = {k: v for k, v in base.items() if not k.startswith(SECRET_ENV_PREFIXES)}
    return {**env, **(extra or {})}


@dataclass(frozen=True)
class CommandResult:
    """How a command on a target ended. `returncode` < 0 means killed by that signal."""

    argv: list[str]
    returncode: int
    duration: float
    stderr_tail: list[str]
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        """True when the command exited 0."""
        return self.returncode == 0

    def describe(self) -> str:
        """A short phrase for how it ended, e.g. `exited with code 1`, `killed by signal 9`."""
        if self.timed_out:
            return f"timed out after {self.duration:.0f} s"
        if self.returncode < 0:
            return f"killed by signal {-self.returncode}"
        return f"exited with code {self.returncode}"


@runtime_checkable
class Target(Protocol):
    """Where a workload runs: `kind` is bm, vm, cbm or cvm; `host` the machine it lives on."""

    name: str
    kind: str
    host: str
    python: str  # interpreter on the target that has dltestbed installed

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        on_line: Callable[[str], None] | None = None,
        stderr_log: Path | None = None,
    ) -> CommandResult:
        """Run argv, call on_line for each stdout line as it arrives, write stderr to stderr_log."""
        ...

    def fingerprint(self) -> Mapping[str, str]:
        """Facts about the target that the workload cannot see from inside (layer, image, host)."""
        ...
