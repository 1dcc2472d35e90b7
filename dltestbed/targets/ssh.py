"""A bare-metal host of the inventory, reached over SSH; host keys are checked, always."""

from __future__ import annotations

from collections.abc import Mapping

from dltestbed.inventory import Host
from dltestbed.targets.base import OnTransport, Target
from dltestbed.transport.ssh import SSH


class SSHTarget(OnTransport):
    """Bare metal over SSH: the workload runs in the host's dltestbed venv."""

    kind = "bm"
    remote = True
    inner: Target | None = None

    def __init__(
        self, host: Host, connect_timeout: float = 15.0, data_dir: str | None = None, compile_cache: str | None = None
    ) -> None:
        self.spec = host
        self.data_dir = data_dir
        self.compile_cache = compile_cache
        self.name = host.name
        self.host = host.name
        self.machine = host.name
        self.python = host.python
        self.peer_address = host.address
        self._transport = SSH(host, connect_timeout=connect_timeout)

    def fingerprint(self) -> Mapping[str, str]:
        """The layer facts: bare metal, reached over SSH."""
        return {
            "target_kind": self.kind,
            "target_host": self.name,
            "target_address": self.spec.address,
            "transport": "ssh",
            **({"run_as_user": self.spec.user} if self.spec.user else {}),
        }
