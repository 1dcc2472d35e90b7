"""Who made a container: this installation's id (user@host and a random part, kept in the state
folder), put on every container as a label with the bench and run, so that `teardown` removes what
this installation made and nothing of another operator sharing the host."""

from __future__ import annotations

import getpass
import secrets
import socket
from pathlib import Path

from dltestbed import locks, paths

OWNER_LABEL, BENCH_LABEL, RUN_LABEL = "dltestbed.owner", "dltestbed.bench", "dltestbed.run"

_known: dict[Path, str] = {}


def installation_id() -> str:
    """This installation's id, made the first time it is asked for."""
    path = paths.state_dir() / "owner"
    if path not in _known:
        with locks.beside(path, "the installation id"):
            if not path.exists():
                path.write_text(f"{getpass.getuser()}@{socket.gethostname()}-{secrets.token_hex(4)}\n")
            _known[path] = path.read_text().strip()
    return _known[path]
