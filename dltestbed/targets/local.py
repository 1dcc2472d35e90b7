"""The local machine as a bare-metal target: the workload runs as a subprocess."""

from __future__ import annotations

import platform
import socket
import sys
from collections.abc import Mapping

from dltestbed.targets.base import OnTransport, Target
from dltestbed.transport.local import LocalProcess
from dltestbed.users import invoking_user


class LocalTarget(OnTransport):
    """Bare metal on this machine. Commands run in their own session and are always reaped."""

    kind = "bm"
    remote = False
    inner: Target | None = None
    peer_address = "127.0.0.1"  # the workers of a job on this machine listen on loopback

    def __init__(self, name: str = "local", python: str | None = None, data_dir: str | None = None) -> None:
        self.name = name
        self.data_dir = data_dir
        self.host = socket.gethostname()
        self.machine = self.host
        self.python = python or sys.executable
        self._transport = LocalProcess(self.host)

    def fingerprint(self) -> Mapping[str, str]:
        """The layer facts: bare metal on this host."""
        return {
            "target_kind": self.kind,
            "target_host": self.host,
            "target_platform": platform.platform(),
            "run_as_user": invoking_user(),
        }
