"""The InfluxDB stream's pure parts: line protocol (escaping), settings, error lines, the outbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from dltestbed.errors import ConfigError
from dltestbed.results import influx, points
from dltestbed.results.store import Store
from dltestbed.workload.events import ResourceEvent, StepEvent
from tests.conftest import make_run

ENV = {
    "INFLUXDB_V2_URL": "http://tsdb:8086",
    "INFLUXDB_V2_ORG": "ops",
    "INFLUXDB_V2_BUCKET": "dl",
    "INFLUXDB_V2_TOKEN": "tok-123",
}


def test_a_step_line_escapes_tags() -> None:
    run = make_run(id="r-1", bench_id="b-1", host="rack 1,node=3", contention="alexnet b64 isolated (cpus 0 / 1)")
    line = points.step_line(
        run, StepEvent(index=4, phase="timed", images=8, seconds=0.25, images_per_sec=32.0, t=1700000000.5)
    )
    measurement_tags, fields, ts = line.rsplit(" ", 2)
    assert measurement_tags.startswith("dltestbed_step,")
    assert r"host=rack\ 1\,node\=3" in measurement_tags
    assert r"contention=alexnet\ b64\ isolated\ (cpus\ 0\ /\ 1)" in measurement_tags
    assert "run_id=r-1" in measurement_tags and "phase=timed" in measurement_tags
    assert "worker_index=-" in measurement_tags  # no empty tag values
    assert sorted(fields.split(",")) == ["images=8i", "images_per_sec=32.0", "index=4i", "seconds=0.25"]
    assert ts == "1700000000500000000"


def test_escaping_matches_the_client_library() -> None:
    """Our escaping (applied once per run for speed) gives the same line as influxdb-client's Point."""
    from influxdb_client import Point, WritePrecision

    odd = "a b,c=d\te\nf"
    run = make_run(id="r-2", host=odd, target_name=odd, contention="")
    ev = StepEvent(index=1, phase="warmup", images=4, seconds=0.5, images_per_sec=8.0, t=12.25)
    p = Point("dltestbed_step").time(round(ev.t * 1e9), WritePrecision.NS).tag("phase", ev.phase)
    for k, v in {
        **{t: "-" for t in points.RUN_TAGS},
        **{t: str(getattr(run, t)) for t in points.RUN_TAGS if getattr(run, t, None) not in (None, "")},
        "run_id": "r-2",
        "contention": "-",
    }.items():
        p.tag(k, v)
    p.field("images", 4).field("images_per_sec", 8.0).field("index", 1).field("seconds", 0.5)
    ours, theirs = points.step_line(run, ev), p.to_line_protocol()
    series, fields, ts = ours.rsplit(" ", 2)
    t_series, t_fields, t_ts = theirs.rsplit(" ", 2)
    assert (series, ts) == (t_series, t_ts)

    def values(text: str) -> dict[str, float]:
        return {k: float(v.rstrip("i")) for k, v in (f.split("=") for f in text.split(","))}

    assert values(fields) == values(t_fields)  # 8.0 here, 8 there: the same float


def test_resource_and_run_lines() -> None:
    run = make_run(
        status="ok", images_per_sec=12.5, elapsed_seconds=3.0, finished_at="2026-01-01T00:00:10+00:00", steps_done=4
    )
    res = points.resource_line(
        run,
        ResourceEvent(
            t=10.0,
            rss_bytes=2048,
            cpu_percent=150.0,
            gpus=[{"index": 0, "memory_used_bytes": 1024, "process_memory_bytes": 512, "util_percent": 97.0}],
        ),
    )
    fields = res.rsplit(" ", 2)[1].split(",")
    assert sorted(fields) == [
        "cpu_percent=150.0",
        "gpu0_memory_used_bytes=1024.0",
        "gpu0_process_memory_bytes=512.0",
        "gpu0_util_percent=97.0",
        "rss_bytes=2048i",
    ]  # floats: no `i` suffix
    held = points.resource_line(run, ResourceEvent(t=10.0, rss_bytes=2048, cpu_percent=1.0, gpu_bytes=[3 << 30, 7]))
    assert sorted(held.rsplit(" ", 2)[1].split(","))[:2] == [f"alloc_gpu0_bytes={3 << 30}i", "alloc_gpu1_bytes=7i"]
    line = points.run_line(run)
    assert line.startswith("dltestbed_run,") and "status=ok" in line and "images_per_sec=12.5" in line
    assert line.endswith(" 1767225610000000000")


def test_settings_from_the_environment_and_options(tmp_path: Path) -> None:
    s = influx.settings(env=ENV)
    assert s is not None and (s.url, s.org, s.bucket, s.token, s.auth_basic) == (
        "http://tsdb:8086",
        "ops",
        "dl",
        "tok-123",
        False,
    )
    assert "tok-123" not in repr(s) and "tok-123" not in s.dest and "tok-123" not in s.describe()
    token = tmp_path / "token"
    token.write_text("from-file\n")
    s = influx.settings("https://other/", "o2", "b2", token, env={**ENV, "INFLUXDB_V2_AUTH_BASIC": "true"})
    assert s is not None and (s.url, s.org, s.bucket, s.token, s.auth_basic) == (
        "https://other",
        "o2",
        "b2",
        "from-file",
        True,
    )
    assert influx.settings(env={}) is None  # no URL anywhere: no streaming


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (("ftp://x",), ENV, "is not an http:// or https:// URL"),
        ((), {"INFLUXDB_V2_URL": "http://x"}, "needs --influx-org"),
        ((), {"INFLUXDB_V2_URL": "http://x", "INFLUXDB_V2_ORG": "o"}, "needs --influx-bucket"),
        ((None, "o"), {}, "need --influx-url"),
        ((None, None, None, Path("/nonexistent/token")), ENV, "token file '/nonexistent/token' cannot be read"),
    ],
)
def test_bad_settings(args: tuple, env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        influx.settings(*args, env=env)


def test_error_lines_name_the_cause_without_the_token() -> None:
    from influxdb_client.rest import ApiException

    s = influx.settings(env=ENV)
    assert s is not None
    exc = ApiException(status=401, reason="Unauthorized")
    assert influx.describe_error(exc, s) == "HTTP 401 Unauthorized: the token was refused"
    exc = ApiException(status=500, reason="Internal Server Error")
    exc.body = b"token tok-123 is fine but disk is full"
    assert influx.describe_error(exc, s) == "HTTP 500 Internal Server Error: token *** is fine but disk is full"
    assert influx.describe_error(ConnectionRefusedError(111, "Connection refused"), s).startswith("unreachable (")


def test_the_outbox_keeps_points_until_sent(results: Path) -> None:
    store = Store.open(results)
    store.outbox_add("d1", ["a 1", "b 2", "c 3"])
    store.outbox_add("d2", ["x 9"])
    assert store.outbox_count() == 4 and store.outbox_count("d1") == 3
    assert [r[2] for r in store.outbox("d1", limit=2)] == ["a 1", "b 2"]
    assert store.outbox_dests() == ["d1", "d2"]
    store.outbox_claim("d1", limit=2)
    store.outbox_sent("d1")
    store.close()
    store = Store.open(results)  # it survives a restart
    assert [r[2] for r in store.outbox("d1")] == ["c 3"]


def test_a_schema_1_store_is_upgraded_in_place(results: Path) -> None:
    import sqlite3

    from dltestbed.results.schema import _ADDED, RUN_COLUMNS

    old_cols = [c for c in RUN_COLUMNS if c not in _ADDED]
    with sqlite3.connect(results) as db:
        db.execute(f"CREATE TABLE runs ({', '.join(c + (' TEXT PRIMARY KEY' if c == 'id' else '') for c in old_cols)})")
        db.execute(
            "INSERT INTO runs (id, bench_id, started_at, scenario, status, steps_done, fingerprint, spec) "
            "VALUES ('r-old', 'b', '2025', 'single', 'ok', 3, '{}', '{}')"
        )
        db.execute("PRAGMA user_version=1")
    store = Store.open(results)
    (run,) = store.runs()
    assert (run.id, run.role, run.workers, run.job_id, run.worker_index) == ("r-old", "foreground", 1, None, None)


def test_runs_on_many_hosts_at_once_stream_each_point_once(tsdb, results: Path) -> None:  # type: ignore[no-untyped-def]
    """Eight runs finishing and stepping from their own threads (as a bench on eight hosts does) while
    the sender sends: every stored result's point arrives once, and nothing waits after close."""
    import threading
    import time

    from dltestbed.runner import NullObserver, _Collector, _finish
    from tests.tsdb import expected

    store = Store.open(results)
    s = influx.settings(env=tsdb.env())
    sink = influx.InfluxSink(store, s, flush_every=0.01)
    bench = "b-many"

    now = time.time() - 300  # the server keeps a month and shows nothing after now

    def host(i: int) -> None:
        run = make_run(bench_id=bench, host=f"h{i}")
        store.save_run(run)
        col = _Collector(run, store, NullObserver(), [sink])
        for j in range(150):
            col.apply(StepEvent(index=j, phase="timed", images=8, seconds=0.01, images_per_sec=800.0, t=now + j))
            if j % 10 == 0:
                col.apply(ResourceEvent(t=now + j, rss_bytes=1, cpu_percent=1.0, gpus=[]))
        _finish(run, store, col, None, [sink])

    threads = [threading.Thread(target=host, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sink.close() == 0 and not sink.errors
    want = expected(results, bench)
    assert want == {"dltestbed_step": 1200, "dltestbed_resource": 120, "dltestbed_measure": 0, "dltestbed_run": 8}
    assert sink.sent == sum(want.values())
    assert tsdb.count(bench, want) == want
