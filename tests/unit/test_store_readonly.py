"""Reading the results store changes nothing (`runs`, `report`, `validate`): the file stays byte for byte as it
was, an old one included, and no -wal, -shm or -journal file appears beside it; only a write upgrades an old
store, and says so. A run's id where a bench is asked for names its bench, with a notice."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

import pytest

from dltestbed.errors import ConfigError, StoreError
from dltestbed.results import dbfile, ids
from dltestbed.results.ids import short
from dltestbed.results.store import SCHEMA_VERSION, Store
from tests.conftest import make_run, one_error_line, run_cli

CAPTURED = Path(__file__).parents[1] / "data" / "gpu" / "h100" / "results.sqlite"
H100_BENCH = "b-20261124-141820-42c155"  # bm alexnet, inception3, resnet50, 3 repetitions each
REFERENCE = "checks: [{name: a, match: {kind: bm, model: alexnet}, images_per_sec: 50, lower_tolerance_percent: 50}]"


def _state(folder: Path) -> tuple[list[str], dict[str, str]]:
    """What is in the folder: its names, and each file's SHA-256."""
    names = sorted(p.name for p in folder.iterdir())
    return names, {n: hashlib.sha256((folder / n).read_bytes()).hexdigest() for n in names}


def _version(path: Path) -> int:
    db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0])
    finally:
        db.close()


def _reads(results: Path, bench: str, tmp_path: Path) -> list[list[str]]:
    """Every read-only command, as a user runs them (their reference and outputs elsewhere)."""
    ref = tmp_path / "elsewhere" / "ref.yml"
    ref.parent.mkdir(exist_ok=True)
    ref.write_text(REFERENCE)
    r = ["--results", str(results)]
    return [
        ["runs", *r],
        ["runs", "--benches", *r],
        ["runs", "--format", "json", *r],
        ["report", *r],
        ["report", "--all", "--format", "json", *r],
        ["report", "--bench", bench, *r],
        ["validate", "--reference", str(ref), "--bench", bench, *r],
        ["validate", "--init", "--reference", str(tmp_path / "elsewhere" / "init.yml"), "--bench", bench, *r],
    ]


def _assert_reads_change_nothing(results: Path, bench: str, tmp_path: Path) -> None:
    before = _state(results.parent)
    for args in _reads(results, bench, tmp_path):
        proc = run_cli(*args)
        assert proc.returncode == 0, f"{args}: {proc.stderr[-2000:]}"
        assert "notice:" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        assert _state(results.parent) == before, f"`dltestbed {' '.join(args)}` changed {results.parent}"


def test_reading_an_old_store_leaves_it_byte_for_byte_as_it_was(tmp_path: Path) -> None:
    """The H100's store (schema 5) is read as it is: every read-only command works on it, and afterwards it is
    still schema 5, with the same bytes, alone in its folder."""
    results = tmp_path / "store" / "results.sqlite"
    results.parent.mkdir()
    shutil.copy(CAPTURED, results)
    assert _version(results) == 5
    _assert_reads_change_nothing(results, H100_BENCH, tmp_path)
    assert _version(results) == 5 and _state(results.parent)[0] == ["results.sqlite"]
    ids_shown = run_cli("runs", "--results", str(results)).stdout
    assert short(H100_BENCH) in ids_shown and "micro" in ids_shown  # what it holds is read, the old columns too


def test_reading_a_current_store_leaves_it_byte_for_byte_as_it_was(tmp_path: Path) -> None:
    """A store made by a real write (WAL mode, closed: no -wal beside it) read by every read-only command: no
    -wal or -shm file is left beside it, and its bytes do not change."""
    results = tmp_path / "store" / "results.sqlite"
    store = Store.open(results)
    bench = "b-20260101-000000-aaa111"
    _save_bench(store, bench, "01")
    store.close()
    with results.open("rb") as f:
        assert f.read(20)[18:20] == b"\x02\x02"  # WAL mode: the case where a read-only open made -wal and -shm
    assert _state(results.parent)[0] == ["results.sqlite"]
    _assert_reads_change_nothing(results, bench, tmp_path)


def test_a_store_a_writer_holds_open_is_read_with_what_it_has_not_checkpointed(tmp_path: Path) -> None:
    """A bench still writing: its -wal holds results not yet in the file; a read sees them and changes nothing."""
    results = tmp_path / "results.sqlite"
    writer = Store.open(results)
    try:
        run = make_run(bench_id="b-live", status="ok", images_per_sec=10.0)
        writer.save_run(run)
        writer.flush()
        before = _state(tmp_path)
        assert "results.sqlite-wal" in before[0]
        proc = run_cli("runs", "--format", "json", "--results", str(results))
        assert proc.returncode == 0 and run.id in proc.stdout, proc.stderr
        names, hashes = _state(tmp_path)
        assert names == before[0]  # nothing made, nothing removed
        del hashes["results.sqlite-shm"], before[1]["results.sqlite-shm"]  # the writer's index: readers mark it
        assert hashes == before[1]  # the file and its -wal as they were: nothing checkpointed
    finally:
        writer.close()


def test_a_read_only_store_refuses_writes_and_reads_an_old_schema_in_memory(tmp_path: Path) -> None:
    results = tmp_path / "results.sqlite"
    shutil.copy(CAPTURED, results)
    store = Store.open(results, read_only=True)
    try:
        runs = store.runs()
        assert runs and {r.math for r in runs if r.mode == "train" and r.role == "foreground"} == {"default"}
        with pytest.raises(StoreError, match="write failed"):
            store.save_run(make_run())  # a write to the copy would be lost: refused
    finally:
        store.close()
    assert _version(results) == 5


def test_an_old_store_that_is_not_dltestbeds_is_refused_in_one_line(tmp_path: Path) -> None:
    results = tmp_path / "results.sqlite"
    with sqlite3.connect(results) as db:
        db.executescript("CREATE TABLE runs (x); PRAGMA user_version=3;")
    before = _state(tmp_path)
    with pytest.raises(StoreError, match="is not a dltestbed results store"):
        Store.open(results, read_only=True)
    assert _state(tmp_path) == before


def test_a_write_upgrades_an_old_store_and_says_so(tmp_path: Path) -> None:
    results = tmp_path / "results.sqlite"
    shutil.copy(CAPTURED, results)
    store = Store.open(results)
    store.close()
    assert store.upgrade_notice() == f"notice: results store {results} upgraded from schema 5 to {SCHEMA_VERSION}"
    assert _version(results) == SCHEMA_VERSION
    again = Store.open(results)  # already current: nothing to say
    again.close()
    new = Store.open(tmp_path / "new.sqlite")  # a new store: nothing to say either
    new.close()
    assert again.upgrade_notice() is None and new.upgrade_notice() is None


def test_the_command_that_writes_says_it_upgraded(tmp_path: Path) -> None:
    """`push` writes (its outbox): the old store is upgraded, and the user is told, once."""
    results = tmp_path / "results.sqlite"
    shutil.copy(CAPTURED, results)
    proc = run_cli("push", "--results", str(results))
    assert f"notice: results store {results} upgraded from schema 5 to {SCHEMA_VERSION}" in proc.stderr
    assert "Traceback" not in proc.stderr and _version(results) == SCHEMA_VERSION
    again = run_cli("push", "--results", str(results))
    assert "upgraded" not in again.stderr


def test_a_store_that_changes_while_it_is_read_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An immutable read of a store nobody held: should a writer start meanwhile (its stamp changes), it is read
    again; one that keeps changing is refused in one line."""
    results = tmp_path / "results.sqlite"
    store = Store.open(results)
    store.save_run(make_run(bench_id="b-x"))
    store.close()
    real = dbfile._stamp
    calls: list[int] = []

    def moving(p: Path) -> tuple[int, int, int, bool]:
        calls.append(1)
        ino, size, mtime, wal = real(p)
        return ino, size, mtime + (len(calls) if len(calls) <= 2 else 0), wal  # changes during the first read

    monkeypatch.setattr(dbfile, "_stamp", moving)
    again = Store.open(results, read_only=True)
    assert [r.bench_id for r in again.runs()] == ["b-x"] and len(calls) == 4  # read twice
    again.close()
    monkeypatch.setattr(dbfile, "_stamp", lambda p: (len(calls.append(1) or calls), 0, 0, False))
    with pytest.raises(StoreError, match="kept changing while it was read"):
        Store.open(results, read_only=True)


# -- a run's id where a bench is asked for


def _save_bench(store: Store, bench: str, day: str) -> list[str]:
    """One stored bench of bm and cbm runs, paired by repetition; its run ids."""
    ids = []
    for kind, values in (("bm", [100.0, 101.0, 99.0]), ("cbm", [95.0, 96.0, 94.5])):
        for rep, ips in enumerate(values, 1):
            r = make_run(
                bench_id=bench,
                target_kind=kind,
                repetition=rep,
                images_per_sec=ips,
                elapsed_seconds=10.0,
                status="ok",
                started_at=f"2026-01-{day}T00:00:{rep:02d}+00:00",
            )
            store.save_run(r)
            ids.append(r.id)
    return ids


def _two_benches(results: Path) -> dict[str, list[str]]:
    """Two stored benches of bm and cbm runs; each bench's run ids."""
    store = Store.open(results)
    out = {
        bench: _save_bench(store, bench, day)
        for day, bench in (("01", "b-20260101-000000-aaa111"), ("02", "b-20260102-000000-bbb222"))
    }
    store.close()
    return out


def test_a_run_id_given_for_a_bench_names_its_bench(results: Path, tmp_path: Path) -> None:
    benches = _two_benches(results)
    run = benches["b-20260101-000000-aaa111"][0]
    notice = f"notice: {short(run)} is a run; its bench is aaa111"
    r = ["--results", str(results)]
    proc = run_cli("report", "--bench", short(run), "--format", "json", *r)
    assert proc.returncode == 0, proc.stderr
    assert notice in proc.stderr.splitlines()
    assert '"bench b-20260101-000000-aaa111"' in proc.stdout or "aaa111" in proc.stdout
    listed = run_cli("runs", "--bench", short(run)[:5], "--format", "json", *r)
    assert listed.returncode == 0 and f"notice: {short(run)[:5]} is a run; its bench is aaa111" in listed.stderr
    assert {x for x in benches["b-20260101-000000-aaa111"]} == {
        line.split('"')[3] for line in listed.stdout.splitlines() if line.startswith('    "id":')
    }
    ref = tmp_path / "ref.yml"
    ref.write_text(REFERENCE)
    judged = run_cli("validate", "--reference", str(ref), "--bench", run, "--format", "json", *r)
    assert judged.returncode == 0, judged.stderr
    assert f"notice: {run} is a run; its bench is aaa111" in judged.stderr
    assert '"bench": "b-20260101-000000-aaa111"' in judged.stdout
    compared = run_cli("report", "--compare", "aaa111", short(benches["b-20260102-000000-bbb222"][0]), *r)
    assert compared.returncode == 0 and "its bench is bbb222" in compared.stderr, compared.stderr
    # a bench's id is still a bench's, with nothing said; an unknown one is refused as before
    plain = run_cli("report", "--bench", "bbb2", *r)
    assert plain.returncode == 0 and "notice:" not in plain.stderr
    line = one_error_line(run_cli("report", "--bench", "zzzzzz", *r))
    assert "--bench: no bench 'zzzzzz' in" in line and "the latest: bbb222, aaa111" in line
    # the other way round: a bench's id where a run's is asked for is said to be one
    line = one_error_line(run_cli("report", "aaa111", *r))
    assert line == "error: run id: 'aaa111' is a bench, not a run; give it as --bench aaa111"


def test_a_prefix_of_runs_in_several_benches_is_refused_with_them() -> None:
    benches = ["b-1-aaa111", "b-2-bbb222"]
    runs = [("r-1-c0ffee", "b-1-aaa111"), ("r-2-c0ffe1", "b-1-aaa111"), ("r-3-c0f000", "b-2-bbb222")]
    assert ids.bench_of("c0ffe", benches, runs, "--bench", "s") == (
        "b-1-aaa111",
        "notice: c0ffe names 2 runs, all of bench aaa111",
    )
    assert ids.bench_of("r-3", benches, runs, "--bench", "s") == (
        "b-2-bbb222",
        "notice: r-3 is a run; its bench is bbb222",
    )
    assert ids.bench_of("aaa", benches, runs, "--bench", "s") == ("b-1-aaa111", None)
    with pytest.raises(ConfigError) as err:
        ids.bench_of("c0f", benches, runs, "--bench", "s")
    assert str(err.value) == (
        "--bench: 'c0f' names no bench, and 3 runs of 2 benches (c0ffee of aaa111, c0ffe1 of aaa111, c0f000 of "
        "bbb222); give more of an id"
    )
    with pytest.raises(ConfigError, match="names 2 benchs"):
        ids.bench_of("b-", benches, runs, "--bench", "s")  # a prefix of benches stays a bench's question
