"""Stored runs of every schema since 5 still report: the H100's captured store (schema 5), a small CPU bench made by
dltestbed at the commit where each of schemas 6 to 9 began (tests/data/stores/: `git log -G'^SCHEMA_VERSION = N'`
names them), and the H200's stores (10, 11). Each is opened by today's `report` on a copy, which reads it as brought
up to date without writing it: the runs stored before the workload's spec went to it as JSON read as written."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from dltestbed.results.schema import SCHEMA_VERSION
from tests.conftest import run_cli

DATA = Path(__file__).resolve().parents[1] / "data"
STORES = {
    5: DATA / "gpu" / "h100" / "results.sqlite",
    6: DATA / "stores" / "schema6.sqlite",
    7: DATA / "stores" / "schema7.sqlite",
    8: DATA / "stores" / "schema8.sqlite",
    9: DATA / "stores" / "schema9.sqlite",
    10: DATA / "gpu" / "h200" / "results.sqlite",
    11: DATA / "gpu" / "h200" / "compile-cache.sqlite",
}


def _version(path: Path) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def _copy(store: Path, to: Path) -> Path:
    """The store and its write-ahead log, if it has one, copied into `to`."""
    for part in store.parent.glob(store.name + "*"):
        shutil.copyfile(part, to / part.name)
    return to / store.name


def test_there_is_a_store_of_every_schema_from_5() -> None:
    assert sorted(STORES) == list(range(5, SCHEMA_VERSION + 1))


@pytest.mark.parametrize("schema", sorted(STORES))
def test_a_store_of_each_schema_reports(schema: int, tmp_path: Path) -> None:
    copy = _copy(STORES[schema], tmp_path)
    assert _version(copy) == schema
    proc = run_cli("report", "--all", "--format", "json", "--results", str(copy))
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc["groups"] and all(g["key"]["model"] and g["key"]["framework"] for g in doc["groups"])
    assert sum(g["runs"] + g["failed"] for g in doc["groups"]) >= 1
    assert _version(copy) == schema  # a report reads a store, never writes it
    latest = run_cli("report", "--results", str(copy))  # as a user asks: the latest bench, in Markdown
    assert latest.returncode == 0 and "| bm |" in latest.stdout, latest.stderr[-2000:]
