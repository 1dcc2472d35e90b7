"""The skeleton of every transport's `run`: one command at a time, its stdout streamed a line at a time, its stderr
to the run's log and a tail, its end a CommandResult, and an abort from any thread, even while the command starts,
that ends it and makes `run` raise Aborted(why). A transport (a local process, an SSH session; Slurm's steps are
local processes) says only how a command starts, how it is followed to its end, and how what ran it is let go."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar, Unpack

from dltestbed.errors import TargetError
from dltestbed.transport.base import INTERRUPT, STDERR_TAIL_LINES, Abort, Aborted, AbortLatch, CommandResult, RunOptions

H = TypeVar("H")  # what a transport holds while its command runs (a process, a connection)


class Stderr:
    """Where a command's stderr goes, a line at a time: the run's log (appended, flushed each line) and a tail of
    its last STDERR_TAIL_LINES lines, which the result keeps."""

    def __init__(self, log: Path | None) -> None:
        self.tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self._log = log.open("a", encoding="utf-8") if log else None

    def line(self, text: str) -> None:
        """One line of stderr (without its newline)."""
        self.tail.append(text)
        if self._log:
            self._log.write(text + "\n")
            self._log.flush()

    def close(self) -> None:
        """The log closed: the command is over."""
        if self._log:
            self._log.close()


@dataclass(frozen=True)
class Ended:
    """How a command that was followed to its end ended: its exit code (< 0: killed by that signal; 124: its time
    limit), whether its time limit ended it, and whether what ran it may serve the next command."""

    code: int
    timed_out: bool = False
    reusable: bool = False


class Streamed(ABC, Generic[H]):
    """A transport's `run` and `abort`: the shape every transport shares, around its own start, follow and let go."""

    def __init__(self) -> None:
        self._abort = AbortLatch()

    def abort(self, why: Abort = INTERRUPT) -> None:
        """Stop the command in progress, or the one being started: its `run` raises Aborted(why)."""
        self._abort.request(why)

    def run(self, argv: Sequence[str], **options: Unpack[RunOptions]) -> CommandResult:
        """Run argv; stdout lines go to on_line as they come, stderr to the log and a tail. Aborted when it was
        aborted (an error while it was being stopped is the abort)."""
        start = time.monotonic()
        try:
            held = self._start(argv, options)
        except TargetError:
            if (first := self._abort.detach()) is not None:
                raise Aborted(first) from None
            raise
        err = Stderr(options.get("stderr_log"))
        ended: Ended | None = None
        why: Abort | None = None
        try:
            ended = self._follow(held, argv, options, err)
        except Exception:
            why = self._abort.detach()
            if why is not None:
                raise Aborted(why) from None
            raise
        finally:
            why = self._abort.detach() or why
            self._let_go(held, ended is not None and ended.reusable and why is None)
            err.close()
        if why is not None:
            raise Aborted(why)
        return CommandResult(list(argv), ended.code, time.monotonic() - start, list(err.tail), ended.timed_out)

    @abstractmethod
    def _start(self, argv: Sequence[str], options: RunOptions) -> H:
        """Start the command, or what will run it (a connection); a TargetError line when it cannot start."""

    @abstractmethod
    def _follow(self, held: H, argv: Sequence[str], options: RunOptions, err: Stderr) -> Ended:
        """Attach the abort, stream the command's output until it ends, and say how it ended."""

    @abstractmethod
    def _let_go(self, held: H, reusable: bool) -> None:
        """After the command, whatever happened: stop what may still run, keep what may serve again."""
