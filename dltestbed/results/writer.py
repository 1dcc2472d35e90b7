"""One thread that commits a store's writes, in the order they were given, as many as have arrived in one
transaction (group commit): a write that arrives while a commit is being synced waits for the next one, with
every other that arrived meanwhile. So the store takes results as fast as they come, whatever a commit costs,
and whoever hands it a result (the thread reading a workload's output) never waits for the disk.

A write is an item and the function that applies a list of such items (`Apply`); consecutive writes with the
same function are applied together (one `executemany` for a run of steps, say)."""

from __future__ import annotations

import queue
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dltestbed.errors import StoreError

MAX_BATCH = 20_000  # writes in one transaction at most: a commit's undo log stays small
Write = Callable[[sqlite3.Connection], Any]  # one write on its own; its result is what `now` returns
Apply = Callable[[sqlite3.Connection, Sequence[Any]], Sequence[Any]]  # items → a result each, in order


def each(db: sqlite3.Connection, writes: Sequence[Write]) -> list[Any]:
    """The `Apply` of plain writes: each called in turn."""
    return [w(db) for w in writes]


@dataclass(slots=True)
class _Op:
    apply: Apply | None  # None: a marker (flush, or stop)
    item: Any = None
    done: threading.Event | None = None  # for a caller that waits for its write
    result: Any = None
    error: StoreError | None = None


class Writer:
    """The writer thread of one store's connection: `later` hands it a write and returns at once, `now` waits
    for its write's commit (and every write handed over before it), `flush` for every write so far. A write that
    fails fails alone: its batch is committed again one write at a time. The first failure of a write nobody
    waited for is raised by the next `flush`."""

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock, describe: Callable[[Exception], StoreError]):
        self._db, self._lock, self._describe = db, lock, describe
        self._queue: queue.SimpleQueue[_Op] = queue.SimpleQueue()
        self._start = threading.Lock()
        self._failed: StoreError | None = None
        self._thread: threading.Thread | None = None
        self.commits = 0  # transactions committed (for the bench scripts: writes ÷ commits is the batching)

    def later(self, item: Any, apply: Apply = each) -> None:
        """Hand over a write (by default `item` is a `Write`); its commit follows soon, in order."""
        if self._thread is None:
            self._started()
        self._queue.put(_Op(apply, item))

    def now(self, write: Write) -> Any:
        """A write committed before this returns (with every write handed over before it); its result."""
        op = self._wait(_Op(each, write, threading.Event()))
        if op.error is not None:
            raise op.error
        return op.result

    def flush(self) -> None:
        """Wait until every write handed over so far is committed; raise the first failure not yet raised."""
        if self._thread is not None:
            self._wait(_Op(None, None, threading.Event()))
        failed, self._failed = self._failed, None
        if failed is not None:
            raise failed

    def close(self) -> None:
        """Commit what is left and stop the thread (a failure is raised)."""
        thread = self._thread
        if thread is not None:
            self._queue.put(_Op(None, "stop"))
            thread.join()
            self._thread = None
        self.flush()

    def _started(self) -> None:
        with self._start:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="dltestbed-store-writer", daemon=True)
                self._thread.start()

    def _wait(self, op: _Op) -> _Op:
        if self._thread is None:
            self._started()
        self._queue.put(op)
        assert op.done is not None
        op.done.wait()
        return op

    def _loop(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < MAX_BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            writes = [op for op in batch if op.apply is not None]
            if writes:
                self._commit(writes)
            for op in writes:
                if op.error is not None and op.done is None and self._failed is None:
                    self._failed = op.error
            for op in batch:
                if op.done is not None:
                    op.done.set()
            if any(op.apply is None and op.item == "stop" for op in batch):
                return

    def _commit(self, ops: list[_Op]) -> None:
        db = self._db
        with self._lock:
            try:
                db.execute("BEGIN")
                start = 0
                while start < len(ops):  # consecutive writes with the same Apply, applied together
                    end = start + 1
                    while end < len(ops) and ops[end].apply is ops[start].apply:
                        end += 1
                    group = ops[start:end]
                    assert group[0].apply is not None
                    for op, result in zip(group, group[0].apply(db, [op.item for op in group]), strict=True):
                        op.result = result
                    start = end
                db.execute("COMMIT")
                self.commits += 1
                return
            except Exception:  # any failure: each write again on its own, below
                if db.in_transaction:
                    db.execute("ROLLBACK")
            for op in ops:  # one at a time: the write that fails, fails alone
                assert op.apply is not None
                try:
                    db.execute("BEGIN")
                    (op.result,) = op.apply(db, [op.item])
                    db.execute("COMMIT")
                    self.commits += 1
                except Exception as exc:  # the write's failure, given to whoever asks
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                    op.error = self._describe(exc)
