"""The local machine as a bare-metal target: the workload runs as a subprocess."""

from __future__ import annotations

import os
import platform
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from dltestbed.errors import TargetError
from dltestbed.targets import register
from dltestbed.targets.base import STDERR_TAIL_LINES, CommandResult, command_env

TERM_GRACE_SECONDS = 10.0


def _stop(proc: subprocess.Popen[str]) -> None:
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


@register("bm")
class LocalTarget:
    """Bare metal on this machine. Commands run in their own session and are always reaped."""

    kind = "bm"
    remote = False

    def __init__(self, name: str = "local", python: str | None = None) -> None:
        self.name = name
        self.host = socket.gethostname()
        self.python = python or sys.executable
        self._proc: subprocess.Popen[str] | None = None
        self._aborted = threading.Event()

    def abort(self) -> None:
        """Stop the command in progress (from another thread)."""
        self._aborted.set()
        if self._proc is not None:
            _stop(self._proc)

    def fingerprint(self) -> Mapping[str, str]:
        """The layer facts: bare metal on this host."""
        return {"target_kind": self.kind, "target_host": self.host, "target_platform": platform.platform()}

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        on_line: Callable[[str], None] | None = None,
        stderr_log: Path | None = None,
    ) -> CommandResult:
        """Run argv locally; stdout lines go to on_line as they come, stderr to the log and a tail."""
        full_env = command_env(os.environ, env)
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True, bufsize=1, env=full_env, start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            raise TargetError(f"cannot start {argv[0]!r} on {self.host}: {exc.strerror}") from None
        self._proc = proc
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
            _stop(proc)

        err_thread = threading.Thread(target=drain_stderr, daemon=True)
        err_thread.start()
        timer = threading.Timer(timeout, watchdog) if timeout else None
        if timer:
            timer.daemon = True
            timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                if on_line:
                    on_line(line.rstrip("\n"))
            proc.wait()
        finally:
            self._proc = None
            if timer:
                timer.cancel()
            _stop(proc)
            err_thread.join(5)
            if log:
                log.close()
        if self._aborted.is_set():
            raise KeyboardInterrupt
        return CommandResult(
            argv=list(argv), returncode=proc.returncode, duration=time.monotonic() - start,
            stderr_tail=list(tail), timed_out=timed_out.is_set(),
        )  # fmt: skip
