"""Commands on this machine: a subprocess in its own session, streamed, always reaped. Its stdin is a
pipe this process holds open and never writes: the command sees end-of-file only when the run is over
or dltestbed is gone (killed, OOM), so a workload that watches its stdin stops with its controller."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from dltestbed.errors import TargetError
from dltestbed.transport.base import RunOptions, command_env
from dltestbed.transport.command import Ended, Stderr, Streamed

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


@dataclass
class _Running:
    """A local command while it runs: its process, the thread that drains its stderr, its time limit's timer."""

    proc: subprocess.Popen[str]
    drain: threading.Thread | None = None
    timer: threading.Timer | None = None


class LocalProcess(Streamed[_Running]):
    """Runs commands here, one at a time; `abort` stops the current one from any thread."""

    def __init__(self, where: str, drop: Sequence[str] = ()) -> None:
        super().__init__()
        self.where = where  # for messages: this machine's name
        self.drop = tuple(drop)  # this process's variables a command does not get (its own env may set them)

    def _start(self, argv: Sequence[str], options: RunOptions) -> _Running:
        """The command's process, in a session of its own, its stdin a pipe held open here."""
        full_env = command_env({k: v for k, v in os.environ.items() if k not in self.drop}, options.get("env"))
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
            raise TargetError(f"cannot start {argv[0]!r} on {self.where}: {exc.strerror}") from None
        return _Running(proc)

    def _follow(self, held: _Running, argv: Sequence[str], options: RunOptions, err: Stderr) -> Ended:
        """stdout's lines to on_line, stderr's to `err` (a thread of its own), the time limit a watchdog."""
        proc, timed_out, timeout, on_line = held.proc, threading.Event(), options.get("timeout"), options.get("on_line")

        def drain_stderr() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                err.line(line.rstrip("\n"))

        def watchdog() -> None:
            timed_out.set()
            stop_process(proc)

        held.drain = threading.Thread(target=drain_stderr, daemon=True)
        held.drain.start()
        if timeout:
            held.timer = threading.Timer(timeout, watchdog)
            held.timer.daemon = True
            held.timer.start()
        self._abort.attach(lambda: stop_process(proc))
        assert proc.stdout is not None
        for line in proc.stdout:
            if on_line:
                on_line(line.rstrip("\n"))
        proc.wait()
        return Ended(proc.returncode, timed_out.is_set())

    def _let_go(self, held: _Running, reusable: bool) -> None:
        """The process group stopped if it still runs, its stdin closed, its stderr drained."""
        if held.timer:
            held.timer.cancel()
        stop_process(held.proc)
        with contextlib.suppress(OSError):
            if held.proc.stdin is not None:
                held.proc.stdin.close()
        if held.drain:
            held.drain.join(5)
