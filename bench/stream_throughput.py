"""InfluxDB stream: points/s into a real server with none lost, and images/sec with streaming on ÷ off.

1. points/s: N step points through the InfluxSink (the path every bench uses: line protocol, the
   client's batching writer, callbacks) into a VictoriaMetrics server started here; the clock stops
   when the server has acknowledged the last batch; then the points are counted back. Goal ≥ 50,000/s, 0 lost.
2. images/sec with streaming ÷ without, interleaved pairs of benches (`orchestrate.run_bench`, the call under
   `dltestbed bench`). Goal ≥ 0.99.
3. a store that falls behind: images/sec of a bench whose store takes --slow-commit-ms more for every commit (a
   disk that syncs slowly) ÷ a bench on a plain store, against plain ÷ plain (the A/A floor), interleaved, many
   short steps (AlexNet's inference at 32 px, batch 1: more lines than a pipe holds, faster than a slowed store
   commits them one by one). Goal: the slowed ratio within the A/A floor (plain ÷ plain's interval).
Needs the `victoria-metrics` binary (scripts/install.sh --test).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dltestbed.orchestrate import BenchRequest, Repetitions, Silent, Where, Workloads, run_bench
from dltestbed.report.inference import log_ratios, t_interval
from dltestbed.results import influx
from dltestbed.results import store as store_mod
from tests.tsdb import VictoriaMetrics


def points_per_second(server: VictoriaMetrics, n: int, tmp: Path) -> tuple[float, int, int]:
    from dltestbed.results.influx import InfluxSink, settings
    from dltestbed.results.records import RunRecord
    from dltestbed.results.store import Store
    from dltestbed.workload.events import StepEvent

    store = Store.open(tmp / "points.sqlite")
    s = settings(env=server.env())
    assert s is not None
    run = RunRecord(
        id="r-bench",
        bench_id="b-stream-bench",
        started_at="-",
        scenario="single",
        target_kind="bm",
        target_name="local",
        host="bench host",
        model="alexnet",
        data="synthetic",
        mode="train",
        device="auto",
        batch_size=32,
        image_size=64,
        warmup=0,
        steps=n,
        repetition=1,
    )
    t0 = time.time() - n / 1000
    events = [
        StepEvent(index=i, phase="timed", images=32, seconds=0.1, images_per_sec=320.0 + i % 7, t=t0 + i / 1000)
        for i in range(n)
    ]
    store.save_run(run)
    sink = InfluxSink(store, s, flush_every=0.2, batch=5000)
    start = time.perf_counter()
    for ev in events:  # as the runner does: the step and its point stored together, the sender sends the outbox
        line = sink.step(run, ev)
        store.add_step(run.id, ev, [(sink.dest, line)] if line is not None else [])
    left = sink.close()
    elapsed = time.perf_counter() - start
    print(f"the store's writer committed {store.writer.commits:,} transactions")
    counted = server.count("b-stream-bench")["dltestbed_step"]
    if counted < n:  # short: a count taken before the server shows everything, or points it dropped?
        time.sleep(5)
        later = server.count("b-stream-bench")["dltestbed_step"]
        print(f"short count: {counted:,}, then {later:,} after 5 s; acknowledged by the server: {sink.sent:,}")
        counted = later
    return n / elapsed, counted, left


class _SlowDisk:
    """A store's connection whose every commit takes `seconds` more: a disk that syncs slowly."""

    def __init__(self, db: Any, seconds: float) -> None:
        self.db, self.seconds = db, seconds

    def execute(self, sql: str, *args: Any) -> Any:
        if sql == "COMMIT":
            time.sleep(self.seconds)
        return self.db.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)


@contextlib.contextmanager
def slowed(seconds: float) -> Iterator[None]:
    """Every store opened for writing meanwhile commits `seconds` slower."""
    plain = store_mod.Store.open

    def open_slow(cls: type[store_mod.Store], path: Any = None, **kw: Any) -> store_mod.Store:
        store = plain(path, **kw)
        store.writer = store_mod.Writer(_SlowDisk(store._db, seconds), store._lock, store._failed)  # type: ignore[arg-type]
        return store

    store_mod.Store.open = classmethod(open_slow)  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        store_mod.Store.open = plain  # type: ignore[method-assign]


def bench_ips(env: dict[str, str], results: Path, a: argparse.Namespace, short: bool = False) -> float:
    """One bare-metal run through the library call under `dltestbed bench`, streaming when `env` names a
    server (the client's INFLUXDB_V2_* variables, as the CLI reads them): its images/sec. `short`: many short
    steps (inference at 32 px, batch 1)."""
    size, batch, steps = (32, 1, a.short_steps) if short else (64, a.batch_size, a.steps)
    request = BenchRequest(
        workloads=Workloads(
            models=("alexnet",),
            image_size=size,
            batch_size=batch,
            warmup=5,
            steps=steps,
            mode="infer" if short else "train",
        ),
        repetitions=Repetitions(repeat="1"),
        where=Where(targets=("bm",)),
        results=results,
        stream=influx.settings(env=env),
    )
    (run,) = run_bench(request, Silent()).records
    if run.status != "ok" or run.images_per_sec is None:
        sys.exit(f"the bench run failed: {run.reason} (log: {run.log_path})")
    WALL.append(run.wall_seconds or math.nan)
    return run.images_per_sec


WALL: list[float] = []  # each bench's run, launch to end (the workload times its steps itself: a blocked line of
# output shows here, not in images/sec)


def interval(ratios: list[float]) -> tuple[float, float, float]:
    """The ratio and its 95 % interval: paired t on the log ratios."""
    logs = log_ratios([1.0] * len(ratios), ratios)
    mean, sd = float(logs.mean()), float(logs.std(ddof=1))
    lo, hi = t_interval(mean, sd / math.sqrt(len(logs)), len(logs) - 1)
    return math.exp(mean), math.exp(lo), math.exp(hi)


def slow_store(a: argparse.Namespace, tmp: Path) -> None:
    """3: rounds of a plain bench, one on a store slowed by --slow-commit-ms, and a second plain one, their order
    rotating; slowed ÷ plain and plain ÷ plain per round."""
    slow, aa, held = [], [], []
    for i in range(a.rounds):
        arms = ["plain", "slowed", "again"]
        got = {}
        for arm in arms[i % 3 :] + arms[: i % 3]:
            with slowed(a.slow_commit_ms / 1000) if arm == "slowed" else contextlib.nullcontext():
                got[arm] = bench_ips({}, tmp / f"{arm}{i}.sqlite", a, short=True)
        slow.append(got["slowed"] / got["plain"])
        aa.append(got["again"] / got["plain"])
        wall = dict(zip(arms[i % 3 :] + arms[: i % 3], WALL[-3:], strict=True))
        held.append(wall["slowed"] / wall["plain"])
        print(
            f"round {i + 1}: plain {got['plain']:.1f}, slowed {got['slowed']:.1f}, plain again {got['again']:.1f} "
            f"img/s; launch to end {wall['plain']:.1f}, {wall['slowed']:.1f}, {wall['again']:.1f} s"
        )
    r, lo, hi = interval(slow)
    f, flo, fhi = interval(aa)
    w, wlo, whi = interval(held)
    print(f"launch to end, slowed ÷ plain: {w:.3f} [{wlo:.3f}, {whi:.3f}] (a workload held back by its output)")
    within = flo <= r <= fhi  # the slowed ratio no farther from 1 than two plain benches are apart
    print(
        f"images/sec on a store {a.slow_commit_ms:g} ms slower a commit ÷ plain: {r:.3f} [{lo:.3f}, {hi:.3f}]; "
        f"plain ÷ plain (the A/A floor): {f:.3f} [{flo:.3f}, {fhi:.3f}] (95 %, paired t on log ratios, "
        f"{a.rounds} rounds of {a.short_steps} steps) — goal: within the floor: {'yes' if within else 'no'}"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--points", type=int, default=200_000)
    p.add_argument("--pairs", type=int, default=4, help="interleaved on/off bench pairs (0: skip part 2)")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--rounds", type=int, default=5, help="rounds of part 3 (0: skip it)")
    p.add_argument("--short-steps", type=int, default=1500, help="part 3's steps a run")
    p.add_argument("--slow-commit-ms", type=float, default=20.0)
    p.add_argument("--only-slow", action="store_true", help="part 3 alone (no server)")
    a = p.parse_args()
    if a.only_slow:
        with tempfile.TemporaryDirectory() as d:
            slow_store(a, Path(d))
        return
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        server = VictoriaMetrics(tmp / "vm")
        server.start()
        try:
            rate, counted, left = points_per_second(server, a.points, tmp)
            print(
                f"points/s into the server: {rate:,.0f} ({a.points:,} points; counted back {counted:,}; "
                f"lost {a.points - counted:,}; left in the outbox {left}) — goal ≥ 50,000/s, 0 lost"
            )
            ratios = []
            for i in range(a.pairs):  # alternate which goes first, so neither always runs on a warmer machine
                if i % 2:
                    off = bench_ips({}, tmp / f"off{i}.sqlite", a)
                    on = bench_ips(server.env(), tmp / f"on{i}.sqlite", a)
                else:
                    on = bench_ips(server.env(), tmp / f"on{i}.sqlite", a)
                    off = bench_ips({}, tmp / f"off{i}.sqlite", a)
                ratios.append(on / off)
                print(f"pair {i + 1}: streaming on {on:.1f} img/s, off {off:.1f} img/s, ratio {on / off:.3f}")
            if ratios:
                mean = statistics.fmean(ratios)
                half = 1.96 * statistics.stdev(ratios) / len(ratios) ** 0.5 if len(ratios) > 1 else float("nan")
                print(f"images/sec streaming on ÷ off: {mean:.3f} (95% ±{half:.3f}) — goal ≥ 0.99")
        finally:
            server.stop()
        if a.rounds:
            slow_store(a, tmp)


if __name__ == "__main__":
    main()
