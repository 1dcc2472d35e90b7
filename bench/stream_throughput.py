"""InfluxDB stream: points/s into a real server with none lost, and images/sec with streaming on ÷ off.

1. points/s: N step points through the InfluxSink (the path every bench uses: line protocol, the
   client's batching writer, callbacks) into a VictoriaMetrics server started here; the clock stops
   when the server has acknowledged the last batch; then the points are counted back. Goal ≥ 50,000/s, 0 lost.
2. images/sec with streaming ÷ without, interleaved pairs of benches (`orchestrate.run_bench`, the call under
   `dltestbed bench`). Goal ≥ 0.99.
Needs the `victoria-metrics` binary (scripts/install.sh --test).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dltestbed.orchestrate import BenchRequest, Machines, Repetitions, Silent, Workloads, run_bench
from dltestbed.results import influx
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
    counted = server.count("b-stream-bench")["dltestbed_step"]
    if counted < n:  # short: a count taken before the server shows everything, or points it dropped?
        time.sleep(5)
        later = server.count("b-stream-bench")["dltestbed_step"]
        print(f"short count: {counted:,}, then {later:,} after 5 s; acknowledged by the server: {sink.sent:,}")
        counted = later
    return n / elapsed, counted, left


def bench_ips(env: dict[str, str], results: Path, a: argparse.Namespace) -> float:
    """One bare-metal run through the library call under `dltestbed bench`, streaming when `env` names a
    server (the client's INFLUXDB_V2_* variables, as the CLI reads them): its images/sec."""
    request = BenchRequest(
        workloads=Workloads(models=("alexnet",), image_size=64, batch_size=a.batch_size, warmup=5, steps=a.steps),
        repetitions=Repetitions(repeat="1"),
        machines=Machines(targets=("bm",)),
        results=results,
        stream=influx.settings(env=env),
    )
    (run,) = run_bench(request, Silent()).records
    if run.status != "ok" or run.images_per_sec is None:
        sys.exit(f"the bench run failed: {run.reason} (log: {run.log_path})")
    return run.images_per_sec


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--points", type=int, default=200_000)
    p.add_argument("--pairs", type=int, default=4, help="interleaved on/off bench pairs (0: skip part 2)")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch-size", type=int, default=32)
    a = p.parse_args()
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


if __name__ == "__main__":
    main()
