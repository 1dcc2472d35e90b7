"""Commands on this machine: a subprocess in its own session, streamed, always reaped. Its stdin is a
pipe this process holds open and never writes: the command sees end-of-file only when the run is over
or dltestbed is gone (killed, OOM), so a workload that watches its stdin stops with its controller."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from dltestbed.errors import TargetError
from dltestbed.transport.base import (
    INTERRUPT,
    STDERR_TAIL_LINES,
    Abort,
    Aborted,
    AbortLatch,
    CommandResult,
    command_env,
)

TERM_GRACE_SECONDS = 10.0


def stop_process(proc: subprocess.Popen[str]) -> None:
    """SIGTERM the command's process group, then SIGKILL it after a grace period."""
    for sig, wait in ((signal.SIGTERM, TERM_GRACE_SECONDS), (signal.SIGKILL, 5.0)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


class LocalProcess:
    """Runs commands here, one at a time; `abort` stops the current one from any thread."""

    def __init__(self, where: str, drop: Sequence[str] = ()) -> None:
        self.where = where  # for messages: this machine's name
        self.drop = tuple(drop)  # this process's variables a command does not get (its own env may set them)
        self._abort = AbortLatch()

    def abort(self, why: Abort = INTERRUPT) -> None:
        """Stop the command in progress, or the one being started: its `run` raises Aborted(why)."""
        self._abort.request(why)

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        on_line: Callable[[str], None] | None = None,
        stderr_log: Path | None = None,
    ) -> CommandResult:
        """Run argv; stdout lines go to on_line as they come, stderr to the log and a tail.
        Aborted when it was aborted."""
        full_env = command_env({k: v for k, v in os.environ.items() if k not in self.drop}, env)
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                bufsize=1,
                env=full_env,
                start_new_session=True,
            )
        except OSError as exc:
            if (first := self._abort.detach()) is not None:
                raise Aborted(first) from None
            raise TargetError(f"cannot start {argv[0]!r} on {self.where}: {exc.strerror}") from None
        tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        log = stderr_log.open("a", encoding="utf-8") if stderr_log else None
        timed_out = threading.Event()

        def drain_stderr() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                tail.append(line.rstrip("\n"))
                if log:
                    log.write(line)
                    log.flush()

        def watchdog() -> None:
            timed_out.set()
            stop_process(proc)

        err_thread = threading.Thread(target=drain_stderr, daemon=True)
        err_thread.start()
        timer = threading.Timer(timeout, watchdog) if timeout else None
        if timer:
            timer.daemon = True
            timer.start()
        why: Abort | None = None
        try:
            self._abort.attach(lambda: stop_process(proc))
            assert proc.stdout is not None
            for line in proc.stdout:
                if on_line:
                    on_line(line.rstrip("\n"))
            proc.wait()
        finally:
            why = self._abort.detach()
            if timer:
                timer.cancel()
            stop_process(proc)
            with contextlib.suppress(OSError):
                if proc.stdin is not None:
                    proc.stdin.close()
            err_thread.join(5)
            if log:
                log.close()
        if why is not None:
            raise Aborted(why)
        return CommandResult(
            argv=list(argv),
            returncode=proc.returncode,
            duration=time.monotonic() - start,
            stderr_tail=list(tail),
            timed_out=timed_out.is_set(),
        )
