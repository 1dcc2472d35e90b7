"""Host keys, checked always: the known_hosts files a host's key is read from (dltestbed's, the user's, the
lab's), each parsed once while it is unchanged, and the keys given to a client for one address and port."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dltestbed import paths
from dltestbed.inventory import Host

PARSED_LOCK = threading.Lock()


PARSED: dict[str, tuple[tuple[int, int], Any]] = {}  # path → (its mtime and size when parsed, its keys)


def parsed_keys(path: Path) -> Any | None:
    """A known_hosts file parsed once per version of it (paramiko's parser takes the logging module's
    lock for every line: a fleet's connections parsing the same files at once queued on it)."""
    # SSH libraries load only where a command connects
    import paramiko

    try:
        st = path.stat()
    except OSError:
        return None
    version = (st.st_mtime_ns, st.st_size)
    with PARSED_LOCK:
        seen = PARSED.get(str(path))
        if seen is None or seen[0] != version:
            try:
                seen = PARSED[str(path)] = (version, paramiko.HostKeys(str(path)))
            except OSError:
                return None
        return seen[1]


def add_host_keys(client: Any, files: Sequence[Path], address: str, port: int) -> None:
    """Give the client the keys these files record for address:port (hashed names included), as its
    load_host_keys would, for the one host it is about to check: of each key type, the first file's."""
    name = address if port == 22 else f"[{address}]:{port}"
    have = client.get_host_keys()
    for f in files:
        keys = parsed_keys(Path(f))
        found = (keys.lookup(name) if keys is not None else None) or {}
        for keytype in list(found):
            if keytype not in (have.lookup(name) or {}):
                have.add(name, keytype, found[keytype])


def known_hosts_files(host: Host) -> list[Path]:
    """Where this host's key may be recorded: the inventory's UserKnownHostsFile, dltestbed's
    record from provisioning, and the user's ~/.ssh/known_hosts."""
    files = [Path(f) for f in host.known_hosts_files]
    files += [paths.known_hosts_file(), Path.home() / ".ssh" / "known_hosts"]
    return [f for f in files if f.exists()]
