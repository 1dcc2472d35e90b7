"""The SQLite results store: persistence, and clear errors for paths it cannot use."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dltestbed.errors import StoreError
from dltestbed.results.records import RunRecord
from dltestbed.results.store import SCHEMA_VERSION, Store, default_path
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
    with pytest.raises(StoreError, match="cannot be written \\(it is not an SQLite database\\)"):
        Store.open(not_db)
    assert not_db.read_text().startswith("these are not")  # and it was left as it was


def test_a_newer_schema_is_refused(results: Path) -> None:
    Store.open(results).close()
    with sqlite3.connect(results) as db:
        db.execute("PRAGMA user_version=99")
    with pytest.raises(StoreError, match="schema 99"):
        Store.open(results)


def _step(i: int) -> StepEvent:
    return StepEvent(index=i, phase="timed", images=8, seconds=0.5, images_per_sec=16.0, t=float(i))


def test_a_repeated_step_is_stored_and_counted_once_and_its_point_queued_once(results: Path) -> None:
    store = Store.open(results)
    run = _run()
    store.save_run(run)
    store.add_step(run.id, _step(0), [("d", "p 0")])
    store.add_step(run.id, _step(0), [("d", "p 0 again")])  # the same index again: nothing written
    store.add_step(run.id, _step(1), [("d", "p 1")])
    (stored,) = store.runs()
    assert stored.steps_done == 2 and [s.index for s in store.steps(run.id)] == [0, 1]
    assert [r[2] for r in store.outbox("d")] == ["p 0", "p 1"]


def test_foreign_keys_are_enforced_and_a_refused_result_queues_no_point(results: Path) -> None:
    """A refused write fails alone (the others handed over with it are committed) and is raised by the next
    flush, once."""
    store = Store.open(results)
    run = _run()
    store.save_run(run)
    store.add_step("r-nobody", _step(0), [("d", "p 0")])
    store.add_step(run.id, _step(0), [("d", "p ok")])
    with pytest.raises(StoreError, match="FOREIGN KEY constraint failed"):
        store.flush()
    store.add_resource("r-nobody", ResourceEvent(t=1.0, rss_bytes=1, cpu_percent=1.0, gpus=[]), [("d", "p")])
    with pytest.raises(StoreError, match="FOREIGN KEY"):
        store.close()
    again = Store.open(results)
    assert [r[2] for r in again.outbox()] == ["p ok"]  # the point and its result: one transaction
    assert [s.index for s in again.steps(run.id)] == [0]


def test_results_are_synced_at_each_commit(results: Path) -> None:
    store = Store.open(results)
    assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert store._db.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def test_claimed_points_are_released_when_a_send_fails_or_its_sender_died(results: Path) -> None:
    store = Store.open(results)
    store.outbox_add("d", ["a 1", "b 2", "c 3"])
    first = store.outbox_claim("d", limit=2)
    assert [r[2] for r in first] == ["a 1", "b 2"]
    assert [r[2] for r in store.outbox_claim("d")] == ["c 3"]  # claimed rows are not handed out twice
    assert store.outbox_claim("d") == []
    assert store.outbox_release("d") == 3  # a failed send, or a sender that died mid-send: all wait again
    assert store.outbox_release("d") == 0
    store.outbox_add("e", ["e 1"])  # another destination's points are its own
    assert [r[2] for r in store.outbox_claim("d", limit=2)] == ["a 1", "b 2"]
    assert [r[2] for r in store.outbox_claim("e")] == ["e 1"]
    store.outbox_sent("d")  # acknowledged: forgotten; the rest still wait
    assert [r[2] for r in store.outbox()] == ["c 3", "e 1"] and store.outbox_release("e") == 1
    assert len(store.outbox_claim("d")) == 1 and store.outbox_count() == 2  # nothing is lost


def test_points_a_schema_9_sender_had_marked_are_in_doubt_after_the_upgrade(results: Path) -> None:
    """Schema 9 marked each point being sent; 10 keeps one claim a destination: the marks become claims."""
    store = Store.open(results)
    store.outbox_add("d", ["a 1", "b 2", "c 3"])
    store.outbox_add("e", ["e 1"])
    store.close()
    db = sqlite3.connect(results)
    db.executescript(
        "UPDATE outbox SET sending = 2460000.5 WHERE line IN ('a 1', 'b 2', 'e 1'); DROP TABLE outbox_claims; "
        "PRAGMA user_version=9;"
    )
    db.close()
    again = Store.open(results)
    assert again.upgrade_notice() is not None
    assert (again.outbox_release("d"), again.outbox_release("e"), again.outbox_release("d")) == (2, 1, 0)
    assert again.outbox_count() == 4  # nothing lost


def _open_old_store(path: str, barrier: object) -> int:
    barrier.wait()  # type: ignore[attr-defined]
    store = Store.open(path)
    cols = {r[1] for r in store._db.execute("PRAGMA table_info(outbox)")}
    store.close()
    return int("sending" in cols)


def test_two_processes_opening_an_old_store_at_once_migrate_it_once(results: Path) -> None:
    import multiprocessing

    with sqlite3.connect(results) as db:  # a schema-4 store, as dltestbed 0.1 wrote it: no outbox.sending
        db.executescript(
            "CREATE TABLE outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, dest TEXT NOT NULL, "
            "line TEXT NOT NULL); INSERT INTO outbox (dest, line) VALUES ('d', 'old 1'); "
            "PRAGMA user_version=4;"
        )
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Manager().Barrier(4)
    with ctx.Pool(4) as pool:
        assert pool.starmap(_open_old_store, [(str(results), barrier)] * 4) == [1, 1, 1, 1]
    store = Store.open(results)
    assert [r[2] for r in store.outbox("d")] == ["old 1"]
    assert store._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_schema_8_store_gains_the_framework_the_math_used_and_the_allocators_column(results: Path) -> None:
    """Schema 9: every older run ran TensorFlow; the math a run used moves from its fingerprint onto the run;
    resources.tf_gpu_bytes becomes gpu_bytes with its values."""
    store = Store.open(results)
    run = make_run(math="mixed", fingerprint={"host": "h", "math": "mixed_bfloat16"}, spec={"model": "alexnet"})
    store.save_run(run)
    store.add_resource(run.id, ResourceEvent(t=1.0, rss_bytes=1, cpu_percent=0.0, gpu_bytes=[3 << 30]))
    store.close()
    with sqlite3.connect(results) as db:  # as dltestbed wrote it before schema 9
        db.executescript(
            "ALTER TABLE resources RENAME COLUMN gpu_bytes TO tf_gpu_bytes; ALTER TABLE runs DROP COLUMN framework;"
            "PRAGMA user_version=8;"
        )
    again = Store.open(results)
    (old,) = again.runs()
    assert (old.framework, old.math, old.spec["math_asked"]) == ("tensorflow", "mixed_bfloat16", "mixed")
    assert again.resources(run.id)[0].gpu_bytes == [3 << 30]
    assert again.upgrade_notice() is not None and f"from schema 8 to {SCHEMA_VERSION}" in str(again.upgrade_notice())


def test_the_start_event_records_what_the_target_used(results: Path) -> None:
    """The math mixed resolved to and the framework, from the workload's start event, on the run; the spec keeps
    the math asked."""
    from dltestbed import runner
    from dltestbed.workload.codec import encode
    from dltestbed.workload.events import StartEvent

    store = Store.open(results)
    run = make_run(math="mixed", framework="tensorflow", spec={"model": "alexnet"})
    store.save_run(run)
    collect = runner._Collector(run, store, runner.NullObserver())
    spec = {"model": "alexnet", "math": "mixed_float16", "framework": "tensorflow"}
    collect.on_line(encode(StartEvent(spec=spec, fingerprint={"host": "h"}, t=1.0)))
    (stored,) = store.runs()
    assert (stored.math, stored.framework, stored.spec["math_asked"]) == ("mixed_float16", "tensorflow", "mixed")
    assert "math" not in stored.fingerprint  # recorded once, on the run
