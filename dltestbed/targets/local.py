"""The local machine as a bare-metal target: the workload runs as a subprocess. Without an inventory it is
"local"; an inventory host with `ansible_connection: local` is this machine too, under its inventory name."""

from __future__ import annotations

import platform
import socket
import sys
from collections.abc import Mapping

from dltestbed.inventory import Host
from dltestbed.targets.base import OnTransport, Target
from dltestbed.transport.local import LocalProcess
from dltestbed.users import invoking_user


class LocalTarget(OnTransport):
    """Bare metal on this machine. Commands run in their own session and are always reaped. `spec`: the
    inventory host that is this machine (its name, its interpreter, its address for a job's other workers)."""

    kind = "bm"
    remote = False
    inner: Target | None = None

    def __init__(
        self,
        name: str = "local",
        python: str | None = None,
        data_dir: str | None = None,
        spec: Host | None = None,
        compile_cache: str | None = None,
    ) -> None:
        self.spec = spec
        self.name = spec.name if spec is not None else name
        self.data_dir = data_dir
        self.compile_cache = compile_cache
        self.host = spec.name if spec is not None else socket.gethostname()
        self.machine = self.host
        self.python = python or (spec.python if spec is not None else sys.executable)
        # the workers of a job on this machine alone listen on loopback; an inventory host's are reached where
        # its inventory address says (ansible_host, else its name), as the other nodes' are
        self.peer_address = spec.address if spec is not None else "127.0.0.1"
        self._transport = LocalProcess(self.host)

    def fingerprint(self) -> Mapping[str, str]:
        """The layer facts: bare metal on this host (the inventory host's name when it is one), run here."""
        return {
            "target_kind": self.kind,
            "target_host": self.host,
            "target_platform": platform.platform(),
            "transport": "local",
            "run_as_user": invoking_user(),
        }
