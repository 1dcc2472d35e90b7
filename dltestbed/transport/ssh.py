"""Commands on another machine over SSH with fabric: host keys are checked, always; a machine behind
another is reached through it: a VM through its libvirt host, an inventory host through its ProxyJump
host or its ProxyCommand (from ansible_ssh_common_args, as Ansible's ssh would)."""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import select
import shlex
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dltestbed import hints
from dltestbed.errors import HostKeyError, TargetError
from dltestbed.inventory import Host
from dltestbed.transport.base import RunOptions
from dltestbed.transport.command import Ended, Stderr, Streamed
from dltestbed.transport.hostkeys import add_host_keys, known_hosts_files
from dltestbed.transport.sshlink import (
    DEAD_PEER_SECONDS,
    POOL,
    LineStream,
    Liveness,
    close_conn,
    cut,
    is_live,
    notice_a_dead_peer,
)

# paramiko logs refused jump channels ("Secsh channel 0 open FAILED") while a VM boots; failures
# reach the user as TargetError lines, so its log records are not printed (Python's last-resort handler would).
logging.getLogger("paramiko").addHandler(logging.NullHandler())


def _give_up(conn: Any, gateway: Any) -> None:
    """Close what a connection that failed to open left: its gateway, and its socket (cut first)."""
    if gateway is not None:
        close_conn(gateway)
    sock = conn.connect_kwargs.get("sock")
    cut(sock)
    with contextlib.suppress(Exception):
        sock is not None and sock.close()


class SSH(Streamed[Any]):
    """SSH to `host`, through `via` when given; host keys from `known_hosts` (default: the host's
    recorded ones, see known_hosts_files). One command at a time (transport/command.py's `run`, held by a fabric
    Connection); `abort` closes its session, or the connection being opened for one."""

    def __init__(
        self,
        host: Host,
        *,
        via: Host | None = None,
        known_hosts: Sequence[Path] | None = None,
        connect_timeout: float = 15.0,
    ) -> None:
        self.host = host
        self.via = via
        self.known_hosts = list(known_hosts) if known_hosts is not None else None
        self.connect_timeout = connect_timeout
        super().__init__()

    @property
    def _key(self) -> tuple[Any, ...]:
        """What a kept connection must match to be reused: the same host, reached the same way."""
        h = self.host
        files = tuple(self.known_hosts) if self.known_hosts is not None else None
        return (
            h.name,
            h.address,
            h.port,
            h.user,
            h.key_file,
            h.proxy_command,
            h.jump and h.jump.name,
            self.via and self.via.name,
            files,
        )

    def _connection(self, hop: Host | None) -> tuple[Any, Any]:
        """A fabric Connection to the host, not yet open, and the open one to the hop it goes through (or None)."""
        # SSH libraries load only where a command connects
        from fabric import Connection

        h = self.host
        gateway: Any = None
        if hop is not None:
            through = SSH(hop, connect_timeout=self.connect_timeout)
            through._abort = self._abort  # one abort stops the whole way there
            gateway = through.connect()
        kwargs: dict[str, Any] = {"banner_timeout": self.connect_timeout, "auth_timeout": self.connect_timeout}
        if h.key_file:
            kwargs["key_filename"] = os.path.expanduser(h.key_file)
        extra: dict[str, Any] = {"gateway": gateway} if gateway is not None else {}  # else ssh config may name one
        if h.ssh_config:  # the inventory's `-F file`: read instead of ~/.ssh/config, as ssh would
            # SSH libraries load only where a command connects
            from fabric import Config

            extra["config"] = Config(runtime_ssh_path=h.ssh_config)
        conn = Connection(
            h.address,
            user=h.user or None,
            port=h.port,
            connect_timeout=int(self.connect_timeout),
            connect_kwargs=kwargs,
            **extra,
        )
        return conn, gateway

    def connect(self) -> Any:
        """An open fabric Connection; a TargetError line when the host cannot be reached or its key is wrong."""
        # SSH libraries load only where a command connects
        import paramiko

        h = self.host
        hop = self.via if self.via is not None else h.jump
        conn, gateway = self._connection(hop)
        conn.client.set_missing_host_key_policy(paramiko.RejectPolicy())
        where = f"host {h.name} ({h.address}:{h.port}" + (f" via {hop.name}" if hop else "") + ")"
        if conn.gateway is None:  # no jump (ours or the ssh config's): our own socket, so an abort can cut it
            sock = self._proxy(h.proxy_command) if h.proxy_command else self._dial(conn.host, conn.port, where)
            conn.connect_kwargs["sock"] = sock
        files = self.known_hosts if self.known_hosts is not None else known_hosts_files(h)
        add_host_keys(conn.client, files, conn.host, conn.port)
        try:
            try:
                conn.open()
            except BaseException:
                _give_up(conn, gateway)
                raise
        except paramiko.BadHostKeyException:
            raise HostKeyError(
                f"{where}: its host key changed since it was recorded; check the host, then "
                f"remove the old key from {', '.join(map(str, files))}"
            ) from None
        except paramiko.SSHException as exc:
            if "not found in known_hosts" in str(exc):
                raise HostKeyError(
                    f"{where}: host key not recorded; run `{hints.provision(host=h.name)}` first"
                ) from None
            raise TargetError(f"{where}: SSH failed: {exc}") from None
        except OSError as exc:
            raise TargetError(f"{where}: unreachable: {exc.strerror or exc}") from None
        except EOFError:  # a ProxyCommand that ended before SSH began
            raise TargetError(f"{where}: unreachable: its ProxyCommand ended ({h.proxy_command})") from None
        notice_a_dead_peer(conn.client.get_transport())
        if gateway is not None:
            notice_a_dead_peer(gateway.client.get_transport())
        return conn

    def _dial(self, address: str, port: int, where: str) -> socket.socket:
        """A TCP connection to the host, opened without blocking so that an abort gives it up at once (a
        blocking connect to a host that does not answer waits its full timeout); the socket is then cut
        by an abort until the command's session takes over."""
        deadline = time.monotonic() + self.connect_timeout
        error: OSError = OSError(errno.EHOSTUNREACH, f"no address for {address}")
        try:
            infos = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise TargetError(f"{where}: unreachable: {exc.strerror or exc}") from None
        for family, kind, proto, _, sockaddr in infos:
            sock = socket.socket(family, kind, proto)
            sock.setblocking(False)
            code = sock.connect_ex(sockaddr)
            while code in (errno.EINPROGRESS, errno.EALREADY, errno.EWOULDBLOCK):
                if self._abort.requested or time.monotonic() > deadline:
                    code = errno.ECANCELED if self._abort.requested else errno.ETIMEDOUT
                    break
                if select.select([], [sock], [], 0.1)[1]:
                    code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code == 0:
                sock.setblocking(True)
                self._abort.attach(functools.partial(cut, sock))
                return sock
            sock.close()
            error = OSError(code, os.strerror(code))
            if code == errno.ECANCELED:
                break
        raise TargetError(f"{where}: unreachable: {error.strerror}")

    def _proxy(self, command: str) -> Any:
        """The host's ProxyCommand running (through sh, as ssh runs it), cut by an abort."""
        # SSH libraries load only where a command connects
        import paramiko

        proxy = paramiko.ProxyCommand(shlex.join(["sh", "-c", "exec " + command]))
        self._abort.attach(lambda: cut(proxy))
        return proxy

    def check_key(self) -> str | None:
        """Connect: a HostKeyError when the host's key changed or was never recorded; why, when the host
        cannot be reached now (None when it can). The connection is kept for the first command to the host."""
        try:
            conn = self.connect()
        except HostKeyError:
            raise
        except TargetError as exc:
            return str(exc)
        POOL.put(self._key, conn)
        return None

    def _start(self, argv: Sequence[str], options: RunOptions) -> Any:
        """A connection to the host: one kept from its last command, or a new one."""
        return POOL.take(self._key) or self.connect()

    def _follow(self, held: Any, argv: Sequence[str], options: RunOptions, err: Stderr) -> Ended:
        """The command in a session of the connection, its output streamed as it comes; closing the session ends
        the command (and the workload, which watches its stdin)."""
        # SSH libraries load only where a command connects
        from invoke.exceptions import CommandTimedOut

        conn, env = held, options.get("env")
        envs = [f"{k}={v}" for k, v in (env or {}).items()]
        command = "cd /tmp && exec " + shlex.join(["env", *envs, *argv] if envs else list(argv))
        out, errs = LineStream(options.get("on_line")), LineStream(err.line)
        alive: Liveness | None = None
        transport = conn.client.get_transport()
        lost = f"host {self.host.name}: the SSH connection was lost"
        silent = f" (no answer to SSH keep-alives for {DEAD_PEER_SECONDS} s)"
        try:
            self._abort.attach(lambda: close_conn(conn))
            # only through a jump or a ProxyCommand: directly, TCP_USER_TIMEOUT notices a lost host, and
            # probes every few seconds disturb what a lab machine's hosts measure (seen in tests/lab/test_fleet.py)
            behind = self.via is not None or self.host.jump is not None or bool(self.host.proxy_command)
            with Liveness(transport if behind else None, lambda: close_conn(conn)) as alive:
                result = conn.run(
                    command,
                    hide=True,
                    warn=True,
                    pty=False,
                    in_stream=False,
                    out_stream=out,
                    err_stream=errs,
                    timeout=options.get("timeout"),
                )
            code = result.exited
            if code == -1 and not (transport and transport.is_active()) and not self._abort.requested:
                cause = getattr(transport, "saved_exception", None)
                said = (str(cause) or type(cause).__name__) if cause is not None else ""  # EOFError() says ""
                how = silent if alive.dead else f" ({said})" if said else ""
                raise TargetError(f"{lost}{how} before the command ended")
            return Ended(code, reusable=code >= 0 and not alive.dead)
        except CommandTimedOut:
            return Ended(124, timed_out=True)
        except TargetError:
            raise
        except Exception as exc:
            if self._abort.requested:
                raise  # the skeleton says Aborted, with the abort's reason
            if alive is not None and alive.dead:
                raise TargetError(lost + silent + " before the command ended") from None
            raise TargetError(f"host {self.host.name}: the SSH session broke: {exc}") from None
        finally:
            out.close()
            errs.close()

    def _let_go(self, held: Any, reusable: bool) -> None:
        """The connection kept for the next command when the command ran to its end and it still lives, else
        closed: the remote workload sees its stdin close and stops (--watch-stdin)."""
        if reusable and is_live(held):
            POOL.put(self._key, held)  # the command is over; its channel (the workload's stdin) is closed
        else:
            close_conn(held)
