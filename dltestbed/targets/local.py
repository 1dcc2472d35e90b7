"""The local machine as a bare-metal target: the workload runs as a subprocess."""

from __future__ import annotations

import platform
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from dltestbed.targets.base import CommandResult, Target
from dltestbed.transport.local import LocalProcess


class LocalTarget:
    """Bare metal on this machine. Commands run in their own session and are always reaped."""

    kind = "bm"
    remote = False
    watch_stdin = False  # stdin is /dev/null here
    inner: Target | None = None
    peer_address = "127.0.0.1"  # the workers of a job on this machine listen on loopback

    def __init__(self, name: str = "local", python: str | None = None) -> None:
        self.name = name
        self.host = socket.gethostname()
        self.machine = self.host
        self.python = python or sys.executable
        self._proc = LocalProcess(self.host)

    def abort(self) -> None:
        """Stop the command in progress, or the one being started (from another thread)."""
        self._proc.abort()

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
        return self._proc.run(argv, env=env, timeout=timeout, on_line=on_line, stderr_log=stderr_log)
