"""The SQLite results store: persistence, and clear errors for paths it cannot use."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dltestbed.errors import StoreError
from dltestbed.results.records import RunRecord
from dltestbed.results.store import Store, default_path
from dltestbed.workload.events import ResourceEvent, StepEvent
from tests.conftest import make_run


def _run(bench: str = "b1") -> RunRecord:
    return make_run(bench_id=bench, fingerprint={"host": "h", "gpus": []}, spec={"model": "alexnet"})


def test_everything_written_survives_a_reopen(results: Path) -> None:
    store = Store.open(results)
    run = _run()
    store.save_run(run)
    for i in range(3):
        store.add_step(run.id, StepEvent(index=i, phase="timed", images=8, seconds=0.5, images_per_sec=16.0, t=i))
    store.add_resource(run.id, ResourceEvent(t=1.0, rss_bytes=123, cpu_percent=50.0, gpus=[{"index": 0}]))
    run.status, run.images_per_sec = "ok", 16.0
    store.save_run(run)
    store.close()

    again = Store.open(results)
    (stored,) = again.runs()
    assert stored.status == "ok" and stored.images_per_sec == 16.0 and stored.steps_done == 3
    assert stored.fingerprint == {"host": "h", "gpus": []}
    assert [s.index for s in again.steps(run.id)] == [0, 1, 2]
    assert again.resources(run.id)[0].gpus == [{"index": 0}]
    assert again.last_bench_id() == "b1"


def test_selection_by_id_and_bench(results: Path) -> None:
    store = Store.open(results)
    a, b = _run("b1"), _run("b2")
    store.save_run(a)
    store.save_run(b)
    assert [r.id for r in store.runs(ids=[b.id])] == [b.id]
    assert [r.id for r in store.runs(bench_id="b1")] == [a.id]
    assert store.runs(ids=["nope"]) == []


def test_default_path_honours_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DLTESTBED_RESULTS", str(tmp_path / "x.sqlite"))
    assert default_path() == tmp_path / "x.sqlite"
    monkeypatch.delenv("DLTESTBED_RESULTS")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_path() == tmp_path / "dltestbed" / "results.sqlite"


def test_unusable_paths_give_one_clear_error(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(StoreError, match="cannot be created"):
        Store.open(a_file / "results.sqlite")
    with pytest.raises(StoreError, match="is a folder"):
        Store.open(tmp_path)
    not_db = tmp_path / "notes.txt"
    not_db.write_text("these are not the results you are looking for\n" * 100)
    with pytest.raises(StoreError, match="cannot be written"):
        Store.open(not_db)


def test_a_newer_schema_is_refused(results: Path) -> None:
    Store.open(results).close()
    with sqlite3.connect(results) as db:
        db.execute("PRAGMA user_version=99")
    with pytest.raises(StoreError, match="schema 99"):
        Store.open(results)
