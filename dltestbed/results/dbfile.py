"""The store's file as SQLite sees it: why it cannot be written, a write retried while another process holds it,
and a snapshot read into memory that changes nothing beside the file."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from dltestbed.errors import StoreError


def why(exc: sqlite3.DatabaseError) -> str:
    text = str(exc)
    return "it is not an SQLite database" if "file is not a database" in text else text


def read_only_folder(p: Path) -> str | None:
    """Why the store's folder (or the nearest one that exists) cannot take writes, or None."""

    d = p.parent
    while not d.exists() and d != d.parent:
        d = d.parent
    if os.statvfs(d).f_flag & os.ST_RDONLY:
        return f"{d} is on a read-only filesystem"
    if not os.access(d, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        return f"{p if p.exists() and not os.access(p, os.W_OK) else d} is not writable by this user"
    return None


def when_free(step: Callable[[], object], wait: float = 30.0) -> None:
    """Run `step`, again while another process holds the database: switching to WAL and a first
    write can fail at once with "database is locked" instead of waiting (SQLite avoids a deadlock)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            step()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _stamp(p: Path) -> tuple[int, int, int, bool]:
    """What says the file changed: its inode, size, modification time, and whether a -wal file is beside it."""
    st = p.stat()
    return st.st_ino, st.st_size, st.st_mtime_ns, Path(f"{p}-wal").exists()


def snapshot(p: Path, tries: int = 5) -> sqlite3.Connection:
    """The store at `p` copied into memory (SQLite's backup), reading it without changing anything: no -wal,
    -shm or -journal file made beside it, nothing checkpointed or upgraded in it.

    A store with no -wal beside it (no process holds it: a writer's last close checkpoints and removes it) is
    read as immutable: SQLite then takes no lock and makes no file (a read-only open of a WAL store would make
    its -wal and -shm, and leave them). Should a writer start meanwhile, the file's stamp changes and it is read
    again. A store a writer holds (its -wal is there) is opened read-only through the files that writer made: a
    consistent snapshot with what the -wal holds, the file itself untouched. On a read-only filesystem it is
    always immutable: nothing can change it there."""
    uri = f"file:{quote(str(p.resolve()))}"
    frozen = read_only_folder(p)
    on_ro_fs = bool(frozen and "read-only filesystem" in frozen)
    for _ in range(tries):
        before = _stamp(p)
        flags = "mode=ro" if before[3] and not on_ro_fs else "mode=ro&immutable=1"
        mem = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        try:
            src = sqlite3.connect(f"{uri}?{flags}", uri=True, timeout=30, isolation_level=None)
            try:
                src.backup(mem)
            finally:
                src.close()
        except sqlite3.DatabaseError as exc:
            mem.close()
            if "immutable" in flags and _stamp(p) != before:
                continue  # it changed under an immutable read (a writer started): read it again
            raise StoreError(f"results store {str(p)!r} cannot be read ({why(exc)})") from None
        if "immutable" not in flags or on_ro_fs or _stamp(p) == before:
            return mem
        mem.close()  # a writer started while it was read: read it again
    raise StoreError(f"results store {str(p)!r} cannot be read (it kept changing while it was read); try again")
