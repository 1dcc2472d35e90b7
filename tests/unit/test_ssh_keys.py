"""Known-hosts keys given to a connection (parsed once per file version, the first file's key of each
type wins, as paramiko's load_host_keys of the files in order did) and kept connections: known answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import paramiko

from dltestbed.transport import hostkeys, sshlink


def _key() -> paramiko.PKey:
    return paramiko.ECDSAKey.generate()


def test_the_first_files_key_wins_and_hashed_names_match(tmp_path: Path) -> None:
    a, b = _key(), _key()
    first, second = tmp_path / "first", tmp_path / "second"
    first.write_text(f"10.0.0.1 {a.get_name()} {a.get_base64()}\n[10.0.0.2]:2222 {a.get_name()} {a.get_base64()}\n")
    hashed = paramiko.HostKeys.hash_host("10.0.0.3")
    second.write_text(f"10.0.0.1 {b.get_name()} {b.get_base64()}\n{hashed} {b.get_name()} {b.get_base64()}\n")
    client = paramiko.SSHClient()
    hostkeys.add_host_keys(client, [first, second], "10.0.0.1", 22)
    assert client.get_host_keys().lookup("10.0.0.1")["ecdsa-sha2-nistp256"] == a  # not b: the first file's
    client = paramiko.SSHClient()
    hostkeys.add_host_keys(client, [second, first], "10.0.0.1", 22)
    assert client.get_host_keys().lookup("10.0.0.1")["ecdsa-sha2-nistp256"] == b
    client = paramiko.SSHClient()
    hostkeys.add_host_keys(client, [first, second], "10.0.0.2", 2222)  # a port other than 22: [address]:port
    assert client.get_host_keys().lookup("[10.0.0.2]:2222")["ecdsa-sha2-nistp256"] == a
    client = paramiko.SSHClient()
    hostkeys.add_host_keys(client, [first, second], "10.0.0.3", 22)
    assert client.get_host_keys().lookup("10.0.0.3")["ecdsa-sha2-nistp256"] == b
    client = paramiko.SSHClient()
    hostkeys.add_host_keys(client, [first, second, tmp_path / "missing"], "10.0.0.9", 22)
    assert client.get_host_keys().lookup("10.0.0.9") is None


def test_a_file_is_parsed_again_only_when_it_changes(tmp_path: Path) -> None:
    a, b = _key(), _key()
    f = tmp_path / "known_hosts"
    f.write_text(f"h1 {a.get_name()} {a.get_base64()}\n")
    once = hostkeys.parsed_keys(f)
    assert hostkeys.parsed_keys(f) is once
    f.write_text(f"h1 {b.get_name()} {b.get_base64()}\nh2 {b.get_name()} {b.get_base64()}\n")
    again = hostkeys.parsed_keys(f)
    assert again is not once and again.lookup("h1")["ecdsa-sha2-nistp256"] == b


class _Transport:
    def __init__(self, active: bool) -> None:
        self.active = active

    def is_active(self) -> bool:
        return self.active


class _Conn:
    """What the pool reads of a fabric Connection: its client's transport; close is recorded."""

    gateway = None

    def __init__(self, active: bool) -> None:
        self.client: Any = type("C", (), {"get_transport": lambda _s, t=_Transport(active): t})()
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_the_pool_gives_a_live_connection_once_and_closes_dead_ones() -> None:
    pool = sshlink.Pool()
    live, dead = _Conn(True), _Conn(False)
    pool.put(("h1",), live)
    pool.put(("h1",), dead)
    assert pool.take(("h2",)) is None
    assert pool.take(("h1",)) is live and dead.closed  # the dead one (taken first) is closed, not given
    assert pool.take(("h1",)) is None
    other = _Conn(True)
    pool.put(("h3",), other)
    pool.close_all()
    assert other.closed and pool.take(("h3",)) is None
