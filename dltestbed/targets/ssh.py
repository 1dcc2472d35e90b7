"""A bare-metal host of the inventory, reached over SSH with fabric; host keys are checked, always."""

from __future__ import annotations

import logging
import os
import shlex
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dltestbed.errors import TargetError
from dltestbed.inventory import Host
from dltestbed.targets.base import STDERR_TAIL_LINES, CommandResult

# paramiko logs refused jump channels ("Secsh channel 0 open FAILED") while a VM boots; failures
# reach the user as TargetError lines, so its log records are not printed (Python's last-resort handler would).
logging.getLogger("paramiko").addHandler(logging.NullHandler())


class LineStream:
    """A file-like sink that calls on_line for each complete line written to it."""

    def __init__(self, on_line: Callable[[str], None] | None) -> None:
        self._on_line = on_line
        self._buf = ""

    def write(self, data: str) -> int:
        """Split into lines; keep the unfinished rest."""
        self._buf += data
        *lines, self._buf = self._buf.split("\n")
        for line in lines:
            if self._on_line:
                self._on_line(line.rstrip("\r"))
        return len(data)

    def flush(self) -> None:
        """Lines are delivered as they complete; nothing to do."""

    def close(self) -> None:
        """Deliver a last line that had no newline."""
        if self._buf and self._on_line:
            self._on_line(self._buf)
        self._buf = ""


class _ErrStream(LineStream):
    def __init__(self, log: Any, tail: deque[str]) -> None:
        super().__init__(self._keep)
        self._log = log
        self._tail = tail

    def _keep(self, line: str) -> None:
        self._tail.append(line)
        if self._log:
            self._log.write(line + "\n")
            self._log.flush()


def _close(conn: Any) -> None:
    """Close a connection and the gateway it jumped through (fabric leaves that open)."""
    conn.close()
    if conn.gateway and not isinstance(conn.gateway, str):
        conn.gateway.close()


def known_hosts_files(host: Host) -> list[Path]:
    """Where this host's key may be recorded: the inventory's UserKnownHostsFile, dltestbed's
    record from provisioning, and the user's ~/.ssh/known_hosts."""
    from dltestbed.provision import known_hosts_file

    files = [Path(f) for f in host.known_hosts_files]
    files += [known_hosts_file(), Path.home() / ".ssh" / "known_hosts"]
    return [f for f in files if f.exists()]


class SSHTarget:
    """Bare metal over SSH: the workload runs in the host's dltestbed venv."""

    kind = "bm"
    remote = True

    def __init__(self, host: Host, connect_timeout: float = 15.0) -> None:
        self.spec = host
        self.name = host.name
        self.host = host.name
        self.python = host.python
        self.connect_timeout = connect_timeout
        self._aborted = threading.Event()
        self._conn: Any = None

    def abort(self) -> None:
        """Stop the command in progress (from another thread): its session is closed."""
        self._aborted.set()
        if self._conn is not None:
            _close(self._conn)

    def fingerprint(self) -> Mapping[str, str]:
        """The layer facts: bare metal, reached over SSH."""
        return {"target_kind": self.kind, "target_host": self.name, "target_address": self.spec.address,
                "transport": "ssh"}  # fmt: skip

    def _known_hosts(self) -> list[Path]:
        return known_hosts_files(self.spec)

    def _gateway(self) -> Any:
        """An open connection to jump through (None: connect directly)."""
        return None

    def _connect(self) -> Any:
        import paramiko
        from fabric import Connection

        h = self.spec
        gateway = self._gateway()
        kwargs: dict[str, Any] = {"banner_timeout": self.connect_timeout, "auth_timeout": self.connect_timeout}
        if h.key_file:
            kwargs["key_filename"] = os.path.expanduser(h.key_file)
        jump = {"gateway": gateway} if gateway is not None else {}  # else the user's ssh config may name one
        conn = Connection(h.address, user=h.user or None, port=h.port, connect_timeout=int(self.connect_timeout),
                          connect_kwargs=kwargs, **jump)  # fmt: skip
        conn.client.set_missing_host_key_policy(paramiko.RejectPolicy())
        files = self._known_hosts()
        for f in files:
            conn.client.load_host_keys(str(f))
        where = f"host {h.name} ({h.address}:{h.port})"
        try:
            try:
                conn.open()
            except BaseException:
                if gateway is not None:
                    gateway.close()
                raise
        except paramiko.BadHostKeyException:
            raise TargetError(f"{where}: its host key changed since it was recorded; check the host, then "
                              f"remove the old key from {', '.join(map(str, files))}") from None  # fmt: skip
        except paramiko.SSHException as exc:
            if "not found in known_hosts" in str(exc):
                raise TargetError(f"{where}: host key not recorded; run `dltestbed provision` for it first") from None
            raise TargetError(f"{where}: SSH failed: {exc}") from None
        except OSError as exc:
            raise TargetError(f"{where}: unreachable: {exc.strerror or exc}") from None
        return conn

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        on_line: Callable[[str], None] | None = None,
        stderr_log: Path | None = None,
    ) -> CommandResult:
        """Run argv on the host, streaming stdout lines; closing the session ends the command."""
        from invoke.exceptions import CommandTimedOut

        envs = [f"{k}={v}" for k, v in (env or {}).items()]
        command = "cd /tmp && exec " + shlex.join(["env", *envs, *argv] if envs else list(argv))
        tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        log = stderr_log.open("a", encoding="utf-8") if stderr_log else None
        out, err = LineStream(on_line), _ErrStream(log, tail)
        start = time.monotonic()
        timed_out = False
        conn = self._connect()
        self._conn = conn
        try:
            result = conn.run(command, hide=True, warn=True, pty=False, in_stream=False, out_stream=out,
                              err_stream=err, timeout=timeout)  # fmt: skip
            code = result.exited
        except CommandTimedOut:
            timed_out, code = True, 124
        except Exception as exc:
            if self._aborted.is_set():
                raise KeyboardInterrupt from None
            raise TargetError(f"host {self.name}: the SSH session broke: {exc}") from None
        finally:
            self._conn = None
            _close(conn)  # the remote workload sees stdin close and stops (--watch-stdin)
            out.close()
            err.close()
            if log:
                log.close()
        if self._aborted.is_set():
            raise KeyboardInterrupt
        return CommandResult(list(argv), code, time.monotonic() - start, list(tail), timed_out)
