"""The runner on captured workload output replayed by a real subprocess: statuses and what is kept."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from dltestbed.config import workload_spec
from dltestbed.results.store import Store
from dltestbed.runner import RunContext, execute
from dltestbed.targets.base import NOT_NEEDED, Abort, Aborted
from dltestbed.targets.local import LocalTarget
from tests.conftest import CAPTURED, DATA


class Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def begin(self, run: object) -> None:
        self.calls.append("begin")

    def step(self, run: object, ev: object) -> None:
        self.calls.append("step")

    def end(self, run: object) -> None:
        self.calls.append("end")


@pytest.fixture
def replay(monkeypatch: pytest.MonkeyPatch, results: Path):
    """Run the runner against a replayed capture; returns (record, store, observer)."""

    def go(name: str, **env: str):
        monkeypatch.setenv("REPLAY_FILE", str(CAPTURED / name))
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        target = LocalTarget(python=sys.executable)
        store = Store.open(results)
        obs = Recorder()
        spec = workload_spec(model="alexnet", image_size=64, batch_size=8, warmup=1, steps=3)
        # The target's python runs the replay script instead of the workload.
        monkeypatch.setattr("dltestbed.runner.workload_argv", lambda t, s: [sys.executable, str(DATA / "replay.py")])
        record = execute(target, spec, store, RunContext(bench_id="b"), obs)
        return record, store, obs

    return go


def test_a_complete_run_is_ok_with_everything_stored(replay) -> None:
    record, store, obs = replay("alexnet_train_ok.jsonl")
    assert record.status == "ok" and record.reason is None
    assert record.images_per_sec and record.images_per_sec > 0
    assert record.fingerprint["tensorflow"] and record.fingerprint["target_kind"] == "bm"
    (stored,) = store.runs()
    assert stored.status == "ok" and stored.steps_done == 4
    assert len(store.steps(record.id)) == 4 and store.resources(record.id)
    assert obs.calls == ["begin", "step", "step", "step", "step", "end"]


def test_an_error_event_fails_the_run_with_its_message(replay) -> None:
    record, store, _ = replay("corrupt_jpeg.jsonl", REPLAY_EXIT="1")
    assert record.status == "failed"
    assert record.reason == (
        "InvalidArgumentError: step 0: Unknown image file format. One of JPEG, JPEG XL, PNG, GIF, BMP, WebP required."
    )
    assert store.runs()[0].reason == record.reason


def test_an_interrupted_workload_keeps_its_steps(replay) -> None:
    record, store, _ = replay("interrupted.jsonl", REPLAY_EXIT="130")
    assert record.status == "failed" and record.reason == "interrupted: interrupted by a signal"
    assert len(store.steps(record.id)) == store.runs()[0].steps_done > 5
    assert record.images_per_sec is None


def test_a_killed_workload_is_failed_with_the_signal(replay, tmp_path: Path, monkeypatch) -> None:
    lines = (CAPTURED / "interrupted.jsonl").read_text().splitlines()[:-1]  # no error event: a hard kill
    cut = tmp_path / "killed.jsonl"
    cut.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr("tests.unit.test_runner.CAPTURED", tmp_path)
    record, store, _ = replay("killed.jsonl", REPLAY_KILL=str(int(signal.SIGKILL)), REPLAY_STDERR="out of memory")
    assert record.status == "failed"
    assert record.reason == "workload killed by signal 9: out of memory"
    assert len(store.steps(record.id)) > 5
    assert "out of memory" in Path(record.log_path).read_text()


def test_stray_lines_are_logged_not_fatal(replay, tmp_path: Path, monkeypatch) -> None:
    lines = (CAPTURED / "alexnet_train_ok.jsonl").read_text().splitlines()
    noisy = tmp_path / "noisy.jsonl"
    noisy.write_text("\n".join(["Welcome to the cluster!", *lines[:3], "{broken", *lines[3:]]) + "\n")
    monkeypatch.setattr("tests.unit.test_runner.CAPTURED", tmp_path)
    record, _, _ = replay("noisy.jsonl")
    assert record.status == "ok"
    log = Path(record.log_path).read_text()
    assert "Welcome to the cluster!" in log and "invalid JSON" in log


def test_exit_zero_without_summary_is_a_failure(replay, tmp_path: Path, monkeypatch) -> None:
    lines = (CAPTURED / "alexnet_train_ok.jsonl").read_text().splitlines()[:-1]
    (tmp_path / "nosummary.jsonl").write_text("\n".join(lines) + "\n")
    monkeypatch.setattr("tests.unit.test_runner.CAPTURED", tmp_path)
    record, _, _ = replay("nosummary.jsonl")
    assert record.status == "failed" and record.reason == "the workload exited without a summary"


def _hanging(monkeypatch: pytest.MonkeyPatch, results: Path):
    """A replay that prints 19 steps (1 warm-up) and then waits to be stopped, run in a thread."""
    import threading

    monkeypatch.setenv("REPLAY_FILE", str(CAPTURED / "running.jsonl"))
    monkeypatch.setenv("REPLAY_HANG", "1")
    monkeypatch.setattr("dltestbed.runner.workload_argv", lambda t, s: [sys.executable, str(DATA / "replay.py")])
    target = LocalTarget(python=sys.executable)
    store = Store.open(results)
    spec = workload_spec(model="alexnet", image_size=64, batch_size=8, warmup=1, steps=100000)
    started, out = threading.Event(), []

    def go() -> None:
        try:
            out.append(execute(target, spec, store, RunContext(bench_id="b", role="cotenant"), on_start=started))
        except Aborted as exc:
            out.append(f"raised: {exc}")

    thread = threading.Thread(target=go)
    thread.start()
    return target, store, started, out, thread


def test_an_abort_without_a_failure_ends_the_run_ok_on_its_steps(monkeypatch, results: Path) -> None:
    target, store, started, out, thread = _hanging(monkeypatch, results)
    assert started.wait(30)  # set at the first timed step
    import time

    deadline = time.monotonic() + 30
    while len(store.steps(store.runs()[0].id)) < 19 and time.monotonic() < deadline:
        time.sleep(0.05)
    target.abort(NOT_NEEDED)
    target.abort(Abort("second"))  # the first reason stands
    thread.join(30)
    (run,) = out
    assert run.status == "ok" and run.reason is None and run.role == "cotenant"
    steps = [s for s in store.steps(run.id) if s.phase == "timed"]
    assert len(steps) == 18
    assert run.images_per_sec == pytest.approx(sum(s.images for s in steps) / sum(s.seconds for s in steps))


def test_an_abort_with_a_failure_fails_the_run_and_keeps_its_steps(monkeypatch, results: Path) -> None:
    target, _store, started, out, thread = _hanging(monkeypatch, results)
    assert started.wait(30)
    target.abort(Abort("stopped: worker 1 (h2) failed: killed by signal 9"))
    thread.join(30)
    (run,) = out
    assert run.status == "failed" and run.reason == "stopped: worker 1 (h2) failed: killed by signal 9"
    assert run.steps_done >= 2


def test_an_interrupt_passed_on_is_stored_and_raised_again(monkeypatch, results: Path) -> None:
    """abort() with no reason is the user's Ctrl-C passed on by another thread: stored as interrupted,
    raised again (so that thread's next run never starts)."""
    target, store, started, out, thread = _hanging(monkeypatch, results)
    assert started.wait(30)
    target.abort()
    thread.join(30)
    assert out == ["raised: interrupted (Ctrl-C or a stop signal)"]
    (run,) = store.runs()
    assert run.status == "failed" and run.reason == "interrupted (Ctrl-C or a stop signal)"


class _StalledDisk:
    """A store's connection whose first commit waits until `ready()` (at most 60 s): a disk that stalls."""

    def __init__(self, db: object, ready: object) -> None:
        self.db, self.ready = db, ready
        self.commits: list[bool] = []  # whether each commit found `ready()` before the 60 s were up

    def execute(self, sql: str, *args: object) -> object:
        if sql == "COMMIT":
            import time

            deadline = time.monotonic() + (0 if self.commits else 60)  # the first commit stalls, at most 60 s
            while not self.ready() and time.monotonic() < deadline:  # type: ignore[operator]
                time.sleep(0.01)
            self.commits.append(bool(self.ready()))  # type: ignore[operator]
        return self.db.execute(sql, *args)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.db, name)


def test_a_stalled_store_never_holds_the_workload_back(replay, tmp_path: Path, monkeypatch) -> None:
    """20,000 steps (3 MB, fifty times a pipe's buffer) printed while no commit can finish: the workload still
    writes every line and exits before the first commit returns (the controller reads on and hands the steps to
    the store's writer), and then every step is stored, in a few transactions."""
    import json

    from dltestbed.results import store as store_mod
    from dltestbed.results.writer import Writer

    lines = (CAPTURED / "alexnet_train_ok.jsonl").read_text().splitlines()
    start, step, summary = lines[0], json.loads(lines[5]), lines[-1]
    n = 20_000
    steps = [json.dumps({**step, "index": i, "phase": "warmup" if i == 0 else "timed"}) for i in range(n)]
    (tmp_path / "many.jsonl").write_text("\n".join([start, *steps, summary]) + "\n")
    done = tmp_path / "printed"
    disks: list[_StalledDisk] = []

    def stalled(cls: type[Store], path: object = None, **kw: object) -> Store:
        store = opened(path, **kw)
        disks.append(_StalledDisk(store._db, done.exists))
        store.writer = Writer(disks[-1], store._lock, store._failed)  # type: ignore[arg-type]
        return store

    opened = Store.open
    monkeypatch.setattr(store_mod.Store, "open", classmethod(stalled))
    monkeypatch.setattr("tests.unit.test_runner.CAPTURED", tmp_path)
    record, store, _ = replay("many.jsonl", REPLAY_DONE=str(done))
    (disk,) = disks
    assert disk.commits[0], "the workload could not print all its steps while the store was stalled"
    assert record.status == "ok" and len(store.steps(record.id)) == n and store.runs()[0].steps_done == n
    assert store.writer.commits == len(disk.commits) < 50  # one transaction for all that arrived meanwhile
