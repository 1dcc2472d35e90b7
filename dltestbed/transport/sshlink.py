"""An SSH connection's life under dltestbed: output read as lines, a peer whose network is cut noticed within
DEAD_PEER_SECONDS, a connection closed or cut at once, and the pool that keeps connections for reuse."""

from __future__ import annotations

import atexit
import contextlib
import socket
import threading
from collections.abc import Callable
from typing import Any


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


DEAD_PEER_SECONDS = 30  # a host whose network is cut is noticed within this (plus a keep-alive period)


def notice_a_dead_peer(transport: Any) -> None:
    """Make a lost host an error within about DEAD_PEER_SECONDS instead of a read that waits forever:
    SSH keep-alives every 5 s give TCP something to deliver, TCP_USER_TIMEOUT fails the connection when
    it stays undelivered, and TCP keep-alive probes cover an idle socket."""
    if transport is None:
        return
    transport.set_keepalive(5)
    sock = transport.sock
    if not isinstance(sock, socket.socket):  # a channel through a jump host: its own transport is set
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (
        ("TCP_KEEPIDLE", 10),
        ("TCP_KEEPINTVL", 5),
        ("TCP_KEEPCNT", 4),
        ("TCP_USER_TIMEOUT", DEAD_PEER_SECONDS * 1000),
    ):
        if hasattr(socket, name):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)


class Liveness:
    """While a command runs, ask the host for an answer every few seconds (a keep-alive that wants a
    reply, like ssh's ServerAliveInterval); with none for DEAD_PEER_SECONDS the connection is closed and
    the command reads as lost. TCP alone cannot tell through a jump host or a ProxyCommand: the
    connection it sees is the one to the bastion, which stays up when the host behind it is gone."""

    INTERVAL = 5.0

    def __init__(self, transport: Any, close: Callable[[], None]) -> None:
        self._transport = transport
        self._close = close
        self._stop = threading.Event()
        self.dead = False
        self._thread = threading.Thread(target=self._watch, name="dltestbed-ssh-liveness", daemon=True)

    def __enter__(self) -> Liveness:
        if self._transport is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()

    def _probe(self, answered: threading.Event) -> None:
        with contextlib.suppress(Exception):  # OpenSSH answers a request it does not know with a failure
            self._transport.global_request("keepalive@openssh.com", wait=True)
        answered.set()

    def _watch(self) -> None:
        while not self._stop.wait(self.INTERVAL):
            answered = threading.Event()
            threading.Thread(target=self._probe, args=(answered,), name="dltestbed-ssh-probe", daemon=True).start()
            if not answered.wait(DEAD_PEER_SECONDS) and not self._stop.is_set():
                self.dead = True
                self._close()
                return


def cut(sock: Any) -> None:
    """Cut a connection being opened (a socket or a ProxyCommand): the SSH handshake on it fails at once."""
    with contextlib.suppress(Exception):
        if isinstance(sock, socket.socket):
            sock.shutdown(socket.SHUT_RDWR)
        elif sock is not None:
            sock.close()


def close_conn(conn: Any) -> None:
    """Close a connection and the gateways it jumped through (fabric leaves them open)."""
    conn.close()
    if conn.gateway and not isinstance(conn.gateway, str):
        close_conn(conn.gateway)


def is_live(conn: Any) -> bool:
    """Whether a connection's SSH transport is still up."""
    transport = conn.client.get_transport()
    return transport is not None and transport.is_active()


class Pool:
    """Open connections kept for the next command to the same host: the preflight's key check hands
    its connection to the bench's first run on that host, and a run that ended cleanly hands its own to
    the next, so a bench makes one SSH handshake per host (and kind) instead of one per run. An entry is
    taken by one command at a time; a dead one is closed, not given."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conns: dict[tuple[Any, ...], list[Any]] = {}

    def put(self, key: tuple[Any, ...], conn: Any) -> None:
        """Keep an open connection for the next command with this key."""
        with self._lock:
            self._conns.setdefault(key, []).append(conn)

    def take(self, key: tuple[Any, ...]) -> Any | None:
        """A live kept connection for this key (now the caller's), or None."""
        while True:
            with self._lock:
                kept = self._conns.get(key)
                conn = kept.pop() if kept else None
            if conn is None:
                return None
            if is_live(conn):
                return conn
            with contextlib.suppress(Exception):
                close_conn(conn)

    def close_all(self) -> None:
        """Close every kept connection (at exit)."""
        with self._lock:
            conns = [c for kept in self._conns.values() for c in kept]
            self._conns.clear()
        for conn in conns:
            with contextlib.suppress(Exception):
                close_conn(conn)


POOL = Pool()
atexit.register(POOL.close_all)
