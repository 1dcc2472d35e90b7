"""The results store's schema: its tables, its version, and the migration that brings an older store up to
date in one transaction (columns added with the value old rows get, a column renamed, values moved)."""

from __future__ import annotations

import math
import sqlite3
from dataclasses import fields
from pathlib import Path

from dltestbed.errors import StoreError
from dltestbed.results.records import RunRecord

SCHEMA_VERSION = 11  # 2: runs gained role, job_id, workers, worker_index; the outbox table. 3: machine, arm.
# 4: measures and skips (microbenchmark runs). 5: outbox.sending (a batch being sent, for crash recovery; unused
# from 10).
# 6: runs.math, xla, gpu_memory_peak_bytes, startup_seconds, wall_seconds; resources.tf_gpu_bytes
# 7: health (each GPU's counters before and after a run, the XIDs seen while it ran)
# 8: steps.result (each step's loss, or its logits' sum in inference); checks (probes' results checked);
# runs.eval_images, eval_correct, eval_loss (--accuracy)
# 9: runs.framework; runs.math is the math the run used (was in fingerprint.math); resources.gpu_bytes
# (was tf_gpu_bytes: any framework's allocator)
# 10: outbox_claims: the points being sent, one row a destination (was outbox.sending, one mark a point)
# 11: runs.compile_cache (a compiled step's graphs from the bench's compile cache: hit, miss, partial)

JSON_FIELDS = {"fingerprint", "spec"}
RUN_COLUMNS = [f.name for f in fields(RunRecord)]

# steps_done is counted by add_step in the database, never overwritten from a record in memory.
UPSERT_SET = ", ".join(f"{c} = excluded.{c}" for c in RUN_COLUMNS if c not in ("id", "steps_done"))

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS runs (
    {", ".join(f"{c} {'TEXT PRIMARY KEY' if c == 'id' else ''}" for c in RUN_COLUMNS)}
);
CREATE INDEX IF NOT EXISTS runs_bench ON runs (bench_id);
CREATE TABLE IF NOT EXISTS steps (
    run_id TEXT NOT NULL REFERENCES runs(id), idx INTEGER NOT NULL, phase TEXT NOT NULL,
    images INTEGER NOT NULL, seconds REAL NOT NULL, images_per_sec REAL NOT NULL, t REAL NOT NULL,
    result, PRIMARY KEY (run_id, idx)
);
CREATE TABLE IF NOT EXISTS resources (
    run_id TEXT NOT NULL REFERENCES runs(id), t REAL NOT NULL, rss_bytes INTEGER NOT NULL,
    cpu_percent REAL NOT NULL, gpus TEXT NOT NULL, gpu_bytes TEXT
);
CREATE INDEX IF NOT EXISTS resources_run ON resources (run_id);
CREATE TABLE IF NOT EXISTS measures (
    run_id TEXT NOT NULL REFERENCES runs(id), probe TEXT NOT NULL, "case" TEXT NOT NULL, idx INTEGER NOT NULL,
    phase TEXT NOT NULL, value REAL NOT NULL, unit TEXT NOT NULL, seconds REAL NOT NULL, t REAL NOT NULL,
    PRIMARY KEY (run_id, probe, "case", idx)
);
CREATE TABLE IF NOT EXISTS skips (
    run_id TEXT NOT NULL REFERENCES runs(id), probe TEXT NOT NULL, "case" TEXT NOT NULL, reason TEXT NOT NULL,
    PRIMARY KEY (run_id, probe, "case")
);
CREATE TABLE IF NOT EXISTS health (
    run_id TEXT NOT NULL REFERENCES runs(id), phase TEXT NOT NULL, t REAL NOT NULL, gpus TEXT NOT NULL,
    xids TEXT NOT NULL, unseen TEXT NOT NULL, PRIMARY KEY (run_id, phase)
);
CREATE TABLE IF NOT EXISTS checks (
    run_id TEXT NOT NULL REFERENCES runs(id), probe TEXT NOT NULL, "case" TEXT NOT NULL, kind TEXT NOT NULL,
    gpu INTEGER, elements INTEGER NOT NULL, mismatches INTEGER NOT NULL, worst NOT NULL, tolerance REAL NOT NULL,
    seed INTEGER NOT NULL, t REAL NOT NULL, "where" TEXT NOT NULL, rounds INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS checks_run ON checks (run_id);
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT, dest TEXT NOT NULL, line TEXT NOT NULL, sending REAL
);
CREATE TABLE IF NOT EXISTS outbox_claims (
    dest TEXT PRIMARY KEY, last INTEGER NOT NULL, since REAL NOT NULL
);
"""

# schema 5 to 9 marked each point being sent (outbox.sending); from 10 a claim names the last one, per destination
_OUTBOX_CLAIMED = """INSERT OR REPLACE INTO outbox_claims (dest, last, since)
SELECT dest, MAX(id), MIN(sending) FROM outbox WHERE sending IS NOT NULL GROUP BY dest"""

# Columns added after schema 1, with the value old rows get.
_ADDED = {
    "role": "'foreground'",
    "job_id": "NULL",
    "workers": "1",
    "worker_index": "NULL",
    "machine": "NULL",
    "arm": "''",
    "math": "''",
    "xla": "0",
    "gpu_memory_peak_bytes": "NULL",
    "startup_seconds": "NULL",
    "wall_seconds": "NULL",
    "eval_images": "NULL",
    "eval_correct": "NULL",
    "eval_loss": "NULL",
    "framework": "'tensorflow'",  # every run before schema 9 ran TensorFlow
    "used_device": "''",  # old runs: from their fingerprint (_USED_DEVICE)
    "compile_cache": "NULL",
}
_OUTBOX_ADDED = {"sending": "NULL"}
_RESOURCES_ADDED = {"gpu_bytes": "NULL"}
_RESOURCES_RENAMED = {"tf_gpu_bytes": "gpu_bytes"}  # schema 9: the column of any framework's allocator
_STEPS_ADDED = {"result": "NULL"}
# A model run stored before schema 6 ran TensorFlow's default math: float32 on a CPU, and on a GPU whatever
# TensorFlow chose (TF32 on Ampere or later): "default", which is never compared with a named mode.
_OLD_MATH = """UPDATE runs SET math = CASE
    WHEN json_extract(fingerprint, '$.step_device') LIKE '%:GPU:%' THEN 'default'
    WHEN json_extract(fingerprint, '$.step_device') IS NULL AND device != 'cpu'
         AND json_extract(fingerprint, '$.gpus_visible_to_tf') > 0 THEN 'default'
    ELSE 'float32' END
WHERE mode != 'probe'"""
# Before schema 9 a run kept the math it asked for (`mixed`) and its fingerprint the one it used: now the run keeps
# the one it used, and its spec the one it asked (math_asked).
_USED_MATH = """UPDATE runs SET spec = json_set(spec, '$.math_asked', math), math = json_extract(fingerprint, '$.math')
WHERE json_extract(fingerprint, '$.math') IS NOT NULL AND json_extract(fingerprint, '$.math') != ''"""
# Before schema 9 the report worked out where a run's steps ran from its fingerprint each time: the device of its
# first step's result, else a GPU where TensorFlow saw one and the run did not hide it. Now the run records it.
_USED_DEVICE = """UPDATE runs SET used_device = CASE
    WHEN json_extract(fingerprint, '$.step_device') LIKE '%:GPU:%' THEN 'gpu'
    WHEN json_extract(fingerprint, '$.step_device') IS NOT NULL THEN 'cpu'
    WHEN COALESCE(json_extract(fingerprint, '$.gpus_visible_to_tf'), 0) > 0 AND device != 'cpu' THEN 'gpu'
    ELSE 'cpu' END
WHERE json_extract(fingerprint, '$.tensorflow') IS NOT NULL"""


def migrate(conn: sqlite3.Connection, p: Path, hint: str) -> int | None:
    """Create or bring the schema up to date in one transaction; the schema it had when it was older (None
    when it was new or current). BEGIN IMMEDIATE takes the write lock before the version is read, so two
    processes opening an old store at once migrate it once."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        upgraded = None
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"results store {str(p)!r} has schema {version}, newer than this dltestbed's "
                f"{SCHEMA_VERSION}; upgrade dltestbed or {hint}"
            )
        if version < SCHEMA_VERSION:
            cols = {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
            if cols and not set(RUN_COLUMNS) - set(_ADDED) <= cols:
                raise StoreError(f"{str(p)!r} is not a dltestbed results store (its `runs` table differs); {hint}")
            outbox_cols = {r[1] for r in conn.execute("PRAGMA table_info(outbox)")}
            resource_cols = {r[1] for r in conn.execute("PRAGMA table_info(resources)")}
            step_cols = {r[1] for r in conn.execute("PRAGMA table_info(steps)")}
            for old, new in _RESOURCES_RENAMED.items():
                if old in resource_cols:  # before the schema's CREATE would see no column of the new name
                    conn.execute(f"ALTER TABLE resources RENAME COLUMN {old} TO {new}")
                    resource_cols = (resource_cols - {old}) | {new}
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            for table, added, had in (
                ("runs", _ADDED, cols),
                ("outbox", _OUTBOX_ADDED, outbox_cols),
                ("resources", _RESOURCES_ADDED, resource_cols),
                ("steps", _STEPS_ADDED, step_cols),
            ):
                for col, default in added.items():
                    if had and col not in had:
                        conn.execute(f"ALTER TABLE {table} ADD COLUMN {col} DEFAULT {default}")
            if outbox_cols and version < 10:
                conn.execute(_OUTBOX_CLAIMED)  # after outbox.sending is there
            if cols and "math" not in cols:
                conn.execute(_OLD_MATH)
            if cols and version < 9:
                conn.execute(_USED_MATH)
                conn.execute(_USED_DEVICE)
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            upgraded = version if version else None
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return upgraded


def stored_number(value: float | None) -> float | str | None:
    """A step's result (or a check's worst error) as stored: a number, or "nan"/"inf"/"-inf" as text (SQLite
    keeps no NaN: it would read back as NULL, a step that said nothing)."""
    return value if value is None or math.isfinite(value) else repr(value)
