"""A run's events in the results store: its steps, resource samples, health counters, measures, checks and skips,
each written as it arrives (with its points to send, in the same transaction) and read back in order. `Store`
(store.py) has them, and gives them its writer and its queries."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from dltestbed.results.schema import stored_number
from dltestbed.workload.events import CheckEvent, HealthEvent, MeasureEvent, ResourceEvent, SkipEvent, StepEvent

Outbox = Sequence[tuple[str, str]]  # (destination, line-protocol point) stored with a result
E = TypeVar("E", StepEvent, MeasureEvent, CheckEvent, SkipEvent)  # an event the store reads back by its fields


OUTBOX_INSERT = "INSERT INTO outbox (dest, line) VALUES (?, ?)"


class _Counted:
    """The writer's `Apply` of steps (or measures): each inserted unless its run has it already, with its points,
    and counted on its run. A run of them is one `executemany` each for the rows and the points, and one count
    per run; when one of them is a repeat, they are written one at a time, so a repeat queues no point."""

    def __init__(self, table: str, columns: str, width: int) -> None:
        self.sql = f"INSERT OR IGNORE INTO {table} {columns} VALUES ({', '.join('?' for _ in range(width))})"

    def __call__(self, db: sqlite3.Connection, items: Sequence[tuple[str, tuple[Any, ...], Outbox]]) -> list[None]:
        db.execute("SAVEPOINT counted")
        if db.executemany(self.sql, [row for _, row, _ in items]).rowcount == len(items):
            db.executemany(OUTBOX_INSERT, [p for *_, out in items for p in out])
            counts = Counter(run_id for run_id, _, _ in items)
        else:
            db.execute("ROLLBACK TO counted")
            counts = Counter()
            for run_id, row, out in items:
                if db.execute(self.sql, row).rowcount:
                    db.executemany(OUTBOX_INSERT, out)
                    counts[run_id] += 1
        db.executemany("UPDATE runs SET steps_done = steps_done + ? WHERE id = ?", [(n, r) for r, n in counts.items()])
        db.execute("RELEASE counted")
        return [None] * len(items)


_STEPS = _Counted("steps", "(run_id, idx, phase, images, seconds, images_per_sec, t, result)", 8)
_MEASURES = _Counted("measures", "", 9)


class RunEvents:
    """A run's events, written through the store's writer and read through its queries (`Store`'s); `_outbox`
    writes a result's points in the result's transaction (a run's record's too)."""

    _later: Callable[..., None]  # Store._later: a result's write, handed to the writer
    _query: Callable[..., list[sqlite3.Row]]  # Store._query: rows, once every write so far is committed

    @staticmethod
    def _outbox(db: sqlite3.Connection, outbox: Outbox) -> None:
        db.executemany(OUTBOX_INSERT, outbox)

    def add_step(self, run_id: str, ev: StepEvent, outbox: Outbox = ()) -> None:
        """Store one step and its points (a step the run has already is ignored: the runner tells the user)."""
        row = (run_id, ev.index, ev.phase, ev.images, ev.seconds, ev.images_per_sec, ev.t, stored_number(ev.result))
        self._later((run_id, row, outbox), _STEPS)

    def add_resource(self, run_id: str, ev: ResourceEvent, outbox: Outbox = ()) -> None:
        """Store one resource sample and its points."""
        held = json.dumps(ev.gpu_bytes) if ev.gpu_bytes is not None else None
        row = (run_id, ev.t, ev.rss_bytes, ev.cpu_percent, json.dumps(ev.gpus), held)
        outbox = list(outbox)

        def write(db: sqlite3.Connection) -> None:
            db.execute("INSERT INTO resources VALUES (?, ?, ?, ?, ?, ?)", row)
            self._outbox(db, outbox)

        self._later(write)

    def add_health(self, run_id: str, ev: HealthEvent) -> None:
        """Store a run's health counters before or after it (a second of the same phase replaces the first)."""
        row = (run_id, ev.phase, ev.t, json.dumps(ev.gpus), json.dumps(ev.xids), json.dumps(ev.unseen))
        self._later(lambda db: db.execute("INSERT OR REPLACE INTO health VALUES (?, ?, ?, ?, ?, ?)", row))

    def add_measure(self, run_id: str, ev: MeasureEvent, outbox: Outbox = ()) -> None:
        """Store one measure of a microbenchmark case and its points (a case's index the run has already is
        ignored: the runner tells the user)."""
        row = (run_id, ev.probe, ev.case, ev.index, ev.phase, ev.value, ev.unit, ev.seconds, ev.t)
        self._later((run_id, row, outbox), _MEASURES)

    def add_skip(self, run_id: str, ev: SkipEvent) -> None:
        """Store a probe (or case) that could not run, with the reason."""
        row = (run_id, ev.probe, ev.case, ev.reason)
        self._later(lambda db: db.execute("INSERT OR REPLACE INTO skips VALUES (?, ?, ?, ?)", row))

    def measures(self, run_id: str) -> list[MeasureEvent]:
        """A microbenchmark run's measures, in the order they were made."""
        return self._events(
            MeasureEvent,
            'SELECT probe, "case", idx AS "index", phase, value, unit, seconds, t FROM measures WHERE run_id = ? '
            "ORDER BY t, idx",
            run_id,
        )

    def add_check(self, run_id: str, ev: CheckEvent) -> None:
        """Store a probe's result checked."""
        row: tuple[Any, ...] = (run_id, ev.probe, ev.case, ev.kind, ev.gpu, ev.elements, ev.mismatches)
        row += (stored_number(ev.worst), ev.tolerance, ev.seed, ev.t, ev.where, ev.rounds)
        self._later(lambda db: db.execute("INSERT INTO checks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row))

    def checks(self, run_id: str) -> list[CheckEvent]:
        """A microbenchmark run's checked results, in the order they were made."""
        return self._events(
            CheckEvent,
            'SELECT probe, "case", kind, gpu, elements, mismatches, worst, tolerance, seed, t, "where", rounds '
            "FROM checks WHERE run_id = ? ORDER BY t",
            run_id,
            numbers=("worst",),
        )

    def skips(self, run_id: str) -> list[SkipEvent]:
        """A microbenchmark run's skipped probes and cases, with their reasons."""
        return self._events(
            SkipEvent, 'SELECT probe, "case", reason FROM skips WHERE run_id = ? ORDER BY probe, "case"', run_id
        )

    def _events(self, cls: type[E], sql: str, run_id: str, numbers: Sequence[str] = ()) -> list[E]:
        """A run's rows as events: the query names its columns as the event names its fields; `numbers`: the
        columns that may hold a non-finite number as text (see _result), read back as floats."""
        out = []
        for row in self._query(sql, (run_id,)):
            values = dict(row)
            for name in numbers:
                values[name] = float(values[name]) if values[name] is not None else None
            out.append(cls(**values))
        return out

    def steps(self, run_id: str) -> list[StepEvent]:
        """A run's steps in order."""
        return self._events(
            StepEvent,
            'SELECT idx AS "index", phase, images, seconds, images_per_sec, t, result FROM steps WHERE run_id = ? '
            "ORDER BY idx",
            run_id,
            numbers=("result",),
        )

    def resources(self, run_id: str) -> list[ResourceEvent]:
        """A run's resource samples in time order."""
        rows = self._query(
            "SELECT t, rss_bytes, cpu_percent, gpus, gpu_bytes FROM resources WHERE run_id = ? ORDER BY t", (run_id,)
        )
        return [
            ResourceEvent(
                t=r[0],
                rss_bytes=r[1],
                cpu_percent=r[2],
                gpus=json.loads(r[3]),
                gpu_bytes=json.loads(r[4]) if r[4] else None,
            )
            for r in rows
        ]

    def health(self, run_id: str) -> list[HealthEvent]:
        """A run's health counters: before, then after (either may be missing: no GPU, or a run cut short)."""
        rows = self._query(
            "SELECT phase, t, gpus, xids, unseen FROM health WHERE run_id = ? ORDER BY phase = 'after'", (run_id,)
        )
        return [
            HealthEvent(phase=r[0], t=r[1], gpus=json.loads(r[2]), xids=json.loads(r[3]), unseen=json.loads(r[4]))
            for r in rows
        ]
