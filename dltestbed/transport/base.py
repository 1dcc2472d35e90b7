"""What every transport shares: a command's result, the environment it gets, and an abort that is
never lost and says why it came."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypedDict, Unpack

from dltestbed.secretenv import scrub

STDERR_TAIL_LINES = 40  # stderr lines a CommandResult keeps (the whole stream goes to the run's log)
INTERRUPTED = "interrupted (Ctrl-C or a stop signal)"


@dataclass(frozen=True)
class Abort:
    """Why a command is stopped from outside it. `failure`: the reason its run is stored failed with; None
    ends the run as ok, measured on the steps it made (a co-tenant no longer needed). `interrupted`: the
    user's stop, which also ends whatever comes next (the run is stored, then `Aborted` is raised on)."""

    failure: str | None
    interrupted: bool = False


INTERRUPT = Abort(INTERRUPTED, interrupted=True)  # the user's Ctrl-C or stop signal, passed to other threads
NOT_NEEDED = Abort(None)  # the command's work is done (a co-tenant after its foreground's run)


class Aborted(Exception):
    """A command stopped by `abort(why)`: no failure of the command itself but a decision made elsewhere."""

    def __init__(self, why: Abort) -> None:
        super().__init__(why.failure or "stopped: no longer needed")
        self.why = why


# What points a container runtime's CLI at this machine's own daemon, store or configuration: meaningless on
# another node, so a command started here that runs there (an srun step: Slurm exports the submitter's
# environment) does not carry it; the target's own env (a host's runtime_env) sets what that node needs.
MACHINE_LOCAL = (
    "DOCKER_HOST",
    "DOCKER_CONTEXT",
    "DOCKER_CONFIG",
    "DOCKER_CERT_PATH",
    "DOCKER_TLS_VERIFY",
    "CONTAINERS_CONF",
    "CONTAINERS_STORAGE_CONF",
    "CONTAINERS_REGISTRIES_CONF",
)


def command_env(base: Mapping[str, str], extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a command: the caller's plus `extra`, without secrets (from either)."""
    return scrub({**base, **(extra or {})})


@dataclass(frozen=True)
class CommandResult:
    """How a command on a target ended. `returncode` < 0 means killed by that signal."""

    argv: list[str]
    returncode: int
    duration: float
    stderr_tail: list[str]
    timed_out: bool = False
    ended_by: str | None = None  # what outside the command ended it (a scheduler's time limit), in words

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


# More of a command's environment, known only once it has an address (a pod's on a pod network: a distributed job's
# peers): asked with that address and what says whether the command was stopped meanwhile; None: stopped first.
LateEnv = Callable[[str, Callable[[], bool]], Mapping[str, str] | None]


class RunOptions(TypedDict, total=False):
    """How a command runs, every transport's and target's `run` alike: its environment's additions, its time
    limit (seconds), where each stdout line goes as it comes, the file its stderr is appended to, and (a pod's
    alone) the environment it is given once it has an address."""

    env: Mapping[str, str] | None
    timeout: float | None
    on_line: Callable[[str], None] | None
    stderr_log: Path | None
    late_env: LateEnv | None


class Transport(Protocol):
    """Runs one command at a time on a machine; `abort` stops it from any thread, even while it starts."""

    def run(self, argv: Sequence[str], **options: Unpack[RunOptions]) -> CommandResult:
        """Run argv; stdout lines to on_line as they come, stderr to stderr_log and a tail."""
        ...

    def abort(self, why: Abort = INTERRUPT) -> None:
        """Stop the command in progress, or the next one as soon as it starts; its `run` raises Aborted(why)."""
        ...


class AbortLatch:
    """An abort request for the command in progress or, while none is (it is being started, its
    connection opened), for the one about to start: a request is never lost. The run that sees it
    consumes it, so a cleanup command run afterwards (a container's removal) is not stopped too."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._why: Abort | None = None
        self._stop: Callable[[], None] | None = None

    def request(self, why: Abort = INTERRUPT) -> None:
        """Stop the command in progress now, or the next one as soon as it starts (any thread); a second
        request before the first is consumed keeps the first's reason."""
        with self._lock:
            self._why = self._why or why
            stop = self._stop
        if stop is not None:
            stop()

    def attach(self, stop: Callable[[], None]) -> None:
        """The command has started; `stop` ends it. Called at once when an abort came first."""
        with self._lock:
            self._stop = stop
            requested = self._why is not None
        if requested:
            stop()

    @property
    def requested(self) -> bool:
        """Whether an abort was asked for (not consumed)."""
        with self._lock:
            return self._why is not None

    def detach(self) -> Abort | None:
        """The command is over: why it was aborted, or None when it was not (the request is then consumed)."""
        with self._lock:
            self._stop = None
            why, self._why = self._why, None
        return why
