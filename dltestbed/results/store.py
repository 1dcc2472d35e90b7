"""The local results store: SQLite, written as results arrive, so nothing measured is lost.

Durability: WAL with synchronous=FULL (with NORMAL a commit in WAL mode can be rolled back by a power loss
until the next checkpoint: the last steps of a run would vanish). One writer thread commits the writes in
order, as many as have arrived in one transaction (results/writer.py): a result is on disk one commit after
it arrived, and the thread that hands it over (reading a workload's output) never waits for the disk, so a
slow disk cannot slow the workload it measures. `flush` waits for every write so far; every read does.
Foreign keys are enforced. A time-series point waiting to be sent (the outbox) is written in the same
transaction as the result it comes from, so a controller killed at any moment leaves each result either
stored with its point waiting, or not stored at all."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from dltestbed import paths
from dltestbed.errors import StoreError
from dltestbed.results.dbfile import read_only_folder, snapshot, when_free, why
from dltestbed.results.records import RunRecord
from dltestbed.results.runevents import Outbox, RunEvents
from dltestbed.results.schema import JSON_FIELDS, RUN_COLUMNS, SCHEMA_VERSION, UPSERT_SET, migrate
from dltestbed.results.writer import Apply, Writer, each

ENV_VAR = paths.RESULTS_ENV


def default_path() -> Path:
    """$DLTESTBED_RESULTS, else $XDG_DATA_HOME/dltestbed/results.sqlite (~/.local/share/...)."""
    return paths.results_file()


class Store(RunEvents):
    """Runs, their steps and resource samples. Results are committed (and synced) by the store's writer thread,
    in order; the outbox's writes wait for their commit."""

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self._db = conn
        self.upgraded_from: int | None = None  # the schema a write-opening brought up to date (upgrade_notice)
        self._lock = threading.RLock()  # the writer thread's transactions and the readers take turns
        self.writer = Writer(conn, self._lock, self._failed)
        self.read_only = False  # opened for reading (`open(read_only=True)`): a write is refused at once

    @staticmethod
    def where(path: str | Path | None = None) -> Path:
        """The store's path: `path`, else the default."""
        return Path(path).expanduser() if path else default_path()

    @classmethod
    def open(cls, path: str | Path | None = None, *, read_only: bool = False) -> Store:
        """Open (creating if needed) the store, or raise StoreError saying why it cannot be written; a store of
        an older schema is brought up to date, with a notice on stderr.
        read_only (report, runs, validate): the store must exist, and is read as it is: copied into memory
        (an older schema brought up to date in the copy), so the file and its folder are left as they were."""
        p = cls.where(path)
        hint = f"choose another with --results PATH or {ENV_VAR}"
        if p.exists() and p.is_dir():
            raise StoreError(f"results path {str(p)!r} is a folder, not a file; {hint}")
        if read_only:
            return cls._open_existing(p, hint)
        frozen = read_only_folder(p)
        if frozen:
            raise StoreError(f"results store {str(p)!r} cannot be written ({frozen}); {hint}")
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(p, timeout=30, isolation_level=None, check_same_thread=False)
            when_free(lambda: conn.execute("PRAGMA journal_mode=WAL"))
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
            upgraded: list[int | None] = []
            when_free(lambda: upgraded.append(migrate(conn, p, hint)))
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"results store {str(p)!r} cannot be written ({why(exc)}); {hint}") from None
        except OSError as exc:
            raise StoreError(f"results store {str(p)!r} cannot be created ({exc.strerror}); {hint}") from None
        conn.row_factory = sqlite3.Row
        store = cls(p, conn)
        store.upgraded_from = upgraded[-1] if upgraded else None
        return store

    @classmethod
    def _open_existing(cls, p: Path, hint: str) -> Store:
        """A store that must already be there, for reading: a missing, empty or non-SQLite file is refused
        and nothing is created; its content is read into memory, an older schema brought up to date there."""
        if not p.is_file():
            raise StoreError(
                f"no results store at {str(p)!r}: nothing has been stored there; run `dltestbed bench`, or {hint}"
            )
        with p.open("rb") as f:
            head = f.read(16)
        if head != b"SQLite format 3\x00":
            what = "is empty" if not head else "is not an SQLite database"
            raise StoreError(f"results store {str(p)!r} cannot be read (it {what}); {hint}")
        conn = snapshot(p)
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                raise StoreError(f"results store {str(p)!r} cannot be read (it is not a dltestbed results store)")
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"results store {str(p)!r} has schema {version}, newer than this dltestbed's "
                    f"{SCHEMA_VERSION}; upgrade dltestbed"
                )
            if version < SCHEMA_VERSION:
                migrate(conn, p, hint)  # the copy, not the file: a read leaves the store as it was
            conn.execute("PRAGMA query_only=ON")  # a write to the copy would be lost: refused instead
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StoreError(f"results store {str(p)!r} cannot be read ({why(exc)})") from None
        except BaseException:
            conn.close()
            raise
        conn.row_factory = sqlite3.Row
        store = cls(p, conn)
        store.read_only = True
        return store

    def upgrade_notice(self) -> str | None:
        """What a write-opening changed in the file, for the user: a store of an older schema upgraded."""
        if self.upgraded_from is None:
            return None
        return f"notice: results store {self.path} upgraded from schema {self.upgraded_from} to {SCHEMA_VERSION}"

    def flush(self) -> None:
        """Wait until every result handed over so far is committed; a StoreError for one that could not be."""
        self.writer.flush()

    def close(self) -> None:
        """Commit what is left, then close the database (a StoreError when a result could not be stored)."""
        try:
            self.writer.close()
        finally:
            self._db.close()

    @property
    def log_dir(self) -> Path:
        """Where runs' stderr logs go: `logs/` beside the database."""
        d = self.path.parent / "logs"
        d.mkdir(parents=True, exist_ok=True)
        return d

    def _later(self, item: Any, apply: Apply = each) -> None:
        """A result's write, handed to the writer (`Writer.later`); a store opened read-only refuses it at once."""
        if self.read_only:
            self.writer.now(lambda db: apply(db, [item]))
        else:
            self.writer.later(item, apply)

    def _failed(self, exc: Exception) -> StoreError:
        return StoreError(f"results store {str(self.path)!r}: write failed ({exc})")

    def save_run(self, run: RunRecord, outbox: Outbox = ()) -> None:
        """Insert or replace a run's record (with its points to send, in the same transaction)."""
        row = run.to_dict()
        values = [json.dumps(row[c]) if c in JSON_FIELDS else row[c] for c in RUN_COLUMNS]
        marks = ", ".join("?" for _ in RUN_COLUMNS)
        sql = f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({marks}) ON CONFLICT(id) DO UPDATE SET {UPSERT_SET}"
        outbox = list(outbox)

        def write(db: sqlite3.Connection) -> None:
            db.execute(sql, values)
            self._outbox(db, outbox)

        self._later(write)

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[sqlite3.Row]:
        self.writer.flush()  # every result handed over is read back
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    @staticmethod
    def _record(row: sqlite3.Row) -> RunRecord:
        values: dict[str, Any] = {c: row[c] for c in RUN_COLUMNS}
        for c in JSON_FIELDS:
            values[c] = json.loads(values[c]) if values[c] else {}
        values["xla"] = bool(values["xla"])
        return RunRecord(**values)

    def runs(self, ids: Iterable[str] | None = None, bench_id: str | None = None) -> list[RunRecord]:
        """Runs in start order, optionally only the given ids or one bench."""
        sql, args = "SELECT * FROM runs", []
        where = []
        if ids is not None:
            ids = list(ids)
            where.append(f"id IN ({', '.join('?' for _ in ids)})")
            args += ids
        if bench_id is not None:
            where.append("bench_id = ?")
            args.append(bench_id)
        if where:
            sql += " WHERE " + " AND ".join(where)
        rows = self._query(sql + " ORDER BY started_at, id", args)
        return [self._record(r) for r in rows]

    def run_ids(self) -> list[str]:
        """Every run's id, oldest first."""
        return [r[0] for r in self._query("SELECT id FROM runs ORDER BY started_at, id")]

    def run_benches(self) -> list[tuple[str, str]]:
        """Every run's id with its bench's, oldest first."""
        return [(r[0], r[1]) for r in self._query("SELECT id, bench_id FROM runs ORDER BY started_at, id")]

    def bench_ids(self) -> list[str]:
        """Every bench, oldest first (by its first run)."""
        rows = self._query("SELECT bench_id FROM runs GROUP BY bench_id ORDER BY MIN(started_at), MIN(id)")
        return [r[0] for r in rows]

    def last_bench_id(self) -> str | None:
        """The bench of the most recently started run."""
        rows = self._query("SELECT bench_id FROM runs ORDER BY started_at DESC, id DESC LIMIT 1")
        return rows[0][0] if rows else None

    # -- outbox: points for a time-series server, kept until the server has acknowledged them

    def outbox_add(self, dest: str, lines: Sequence[str]) -> list[int]:
        """Keep points for `dest` (committed before they are sent); their ids, in order."""
        lines = list(lines)

        def write(db: sqlite3.Connection) -> list[int]:
            return [
                db.execute("INSERT INTO outbox (dest, line) VALUES (?, ?)", (dest, line)).lastrowid or 0
                for line in lines
            ]

        ids: list[int] = self.writer.now(write)
        return ids

    def outbox(self, dest: str | None = None, limit: int = 5000) -> list[tuple[int, str, str]]:
        """Waiting points (id, dest, line), oldest first, optionally for one destination."""
        sql, args = "SELECT id, dest, line FROM outbox", []
        if dest is not None:
            sql += " WHERE dest = ?"
            args.append(dest)
        rows = self._query(sql + " ORDER BY id LIMIT ?", [*args, limit])
        return [(r[0], r[1], r[2]) for r in rows]

    def outbox_claim(self, dest: str, limit: int = 5000) -> list[tuple[int, str, str]]:
        """Mark the oldest waiting points for `dest` as being sent (committed before they are sent) and return
        them. The caller holds the destination's send lock (results/influx.py). A destination's claim is one row,
        the last point being sent: each point up to it is."""

        def write(db: sqlite3.Connection) -> list[tuple[int, str, str]]:
            claim = db.execute("SELECT last FROM outbox_claims WHERE dest = ?", (dest,)).fetchone()
            rows = db.execute(
                "SELECT id, dest, line FROM outbox WHERE dest = ? AND id > ? ORDER BY id LIMIT ?",
                (dest, claim[0] if claim else 0, limit),
            ).fetchall()
            if rows:
                db.execute(
                    "INSERT INTO outbox_claims (dest, last, since) VALUES (?, ?, julianday('now')) "
                    "ON CONFLICT(dest) DO UPDATE SET last = excluded.last",
                    (dest, rows[-1][0]),
                )
            return [(r[0], r[1], r[2]) for r in rows]

        claimed: list[tuple[int, str, str]] = self.writer.now(write)
        return claimed

    def outbox_release(self, dest: str) -> int:
        """The points being sent to `dest` are waiting again (a send that failed, or one a process was making when
        it died: the server may or may not have them); how many."""

        def write(db: sqlite3.Connection) -> int:
            claim = db.execute("DELETE FROM outbox_claims WHERE dest = ? RETURNING last", (dest,)).fetchone()
            if claim is None:
                return 0
            return int(
                db.execute("SELECT COUNT(*) FROM outbox WHERE dest = ? AND id <= ?", (dest, claim[0])).fetchone()[0]
            )

        released: int = self.writer.now(write)
        return released

    def outbox_sent(self, dest: str) -> None:
        """Forget the points being sent to `dest`: the server has acknowledged them."""

        def write(db: sqlite3.Connection) -> None:
            claim = db.execute("DELETE FROM outbox_claims WHERE dest = ? RETURNING last", (dest,)).fetchone()
            if claim is not None:
                db.execute("DELETE FROM outbox WHERE dest = ? AND id <= ?", (dest, claim[0]))

        self.writer.now(write)

    def outbox_dests(self) -> list[str]:
        """Destinations with points waiting."""
        return [r[0] for r in self._query("SELECT DISTINCT dest FROM outbox ORDER BY dest")]

    def outbox_count(self, dest: str | None = None) -> int:
        """How many points wait to be sent."""
        if dest is None:
            return int(self._query("SELECT COUNT(*) FROM outbox")[0][0])
        return int(self._query("SELECT COUNT(*) FROM outbox WHERE dest = ?", (dest,))[0][0])
