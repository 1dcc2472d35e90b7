"""Stream results to InfluxDB (v2 write API: InfluxDB 2.x/3.x, 1.8+ compatibility, VictoriaMetrics) without
losing a point, even when dltestbed is killed: each point is stored in the store's outbox in the same
transaction as the result it comes from; a sender thread sends the outbox in batches and deletes what the
server acknowledged; `dltestbed push` sends what is left. The local store stays the source of
truth. The token never reaches a log line."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dltestbed import locks, secretenv
from dltestbed.errors import ConfigError, DltestbedError, StreamError
from dltestbed.results import points
from dltestbed.results.records import RunRecord
from dltestbed.results.store import Store
from dltestbed.workload.events import MeasureEvent, ResourceEvent, StepEvent

# The client library's environment variables (it reads URL, ORG, TOKEN and AUTH_BASIC itself); BUCKET and
# TOKEN_FILE follow the same naming.
URL_ENV, ORG_ENV, BUCKET_ENV = "INFLUXDB_V2_URL", "INFLUXDB_V2_ORG", "INFLUXDB_V2_BUCKET"
TOKEN_ENV, TOKEN_FILE_ENV, AUTH_BASIC_ENV = "INFLUXDB_V2_TOKEN", "INFLUXDB_V2_TOKEN_FILE", "INFLUXDB_V2_AUTH_BASIC"


@dataclass(frozen=True)
class Settings:
    """Where points go. The token is never part of repr, dest or any message."""

    url: str
    org: str
    bucket: str
    token: str = field(default="", repr=False)
    auth_basic: bool = False  # token is user:password sent as HTTP Basic (InfluxDB 1.8 behind a proxy, vmauth)

    @property
    def dest(self) -> str:
        """The destination as stored with spooled points (no token)."""
        return json.dumps({"url": self.url, "org": self.org, "bucket": self.bucket}, sort_keys=True)

    def describe(self) -> str:
        """e.g. `http://127.0.0.1:8428 (org o, bucket b)`."""
        return f"{self.url} (org {self.org}, bucket {self.bucket})"


def settings(
    url: str | None = None,
    org: str | None = None,
    bucket: str | None = None,
    token_file: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings | None:
    """Settings from options, else the client's environment variables; None when no URL is set anywhere."""
    env = secretenv.environ() if env is None else env
    url = url or env.get(URL_ENV)
    if not url:
        if org or bucket or token_file:
            raise ConfigError(f"--influx-org/--influx-bucket/--influx-token-file need --influx-url (or {URL_ENV})")
        return None
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"--influx-url: {url!r} is not an http:// or https:// URL")
    org = org or env.get(ORG_ENV)
    bucket = bucket or env.get(BUCKET_ENV)
    if not org or not bucket:
        missing = "--influx-org (or INFLUXDB_V2_ORG)" if not org else "--influx-bucket (or INFLUXDB_V2_BUCKET)"
        raise ConfigError(f"streaming to {url} needs {missing}")
    token, basic = credentials(token_file, env)
    return Settings(url.rstrip("/"), org, bucket, token, basic)


def credentials(token_file: Path | None = None, env: Mapping[str, str] | None = None) -> tuple[str, bool]:
    """(token, HTTP Basic?) from --influx-token-file, else $INFLUXDB_V2_TOKEN_FILE, else $INFLUXDB_V2_TOKEN."""
    env = secretenv.environ() if env is None else env
    token_path = token_file or (Path(env[TOKEN_FILE_ENV]) if env.get(TOKEN_FILE_ENV) else None)
    if token_path is not None:
        try:
            token = token_path.expanduser().read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"token file {str(token_path)!r} cannot be read ({exc.strerror})") from None
        if not token:
            raise ConfigError(f"token file {str(token_path)!r} is empty")
    else:
        token = env.get(TOKEN_ENV, "")
    return token, env.get(AUTH_BASIC_ENV, "").lower() in ("1", "true", "yes")


def describe_error(exc: BaseException, s: Settings) -> str:
    """One line for a failed write: HTTP status and what it means, or why the server was not reached."""
    # the InfluxDB client loads only when a bench streams
    from influxdb_client.rest import ApiException

    if isinstance(exc, ApiException):
        meaning = {
            401: "the token was refused",
            403: "the token may not write to this bucket",
            404: "org or bucket not found",
        }.get(exc.status or 0, "")
        body = exc.body.decode("utf-8", "replace") if isinstance(exc.body, bytes) else str(exc.body or "")
        text = f"HTTP {exc.status} {exc.reason}" + (f": {meaning}" if meaning else "")
        if body and not meaning:
            text += f": {body.strip()[:200]}"
    else:
        reason = getattr(exc, "reason", None) or exc
        text = f"unreachable ({str(reason).split(': ', 1)[-1][:200]})"
    return _scrub(text, s)


def _scrub(text: str, s: Settings) -> str:
    return text.replace(s.token, "***") if s.token else text


def _client(s: Settings, timeout_ms: int = 10_000) -> Any:
    # the InfluxDB client loads only when a bench streams
    from influxdb_client import InfluxDBClient

    # "" is no token to the client: it sends no Authorization header then
    return InfluxDBClient(url=s.url, token=s.token or "", org=s.org, auth_basic=s.auth_basic, timeout=timeout_ms)


def _post(client: Any, s: Settings, body: str) -> None:
    # the InfluxDB client loads only when a bench streams
    from influxdb_client import WritePrecision
    from influxdb_client.service.write_service import WriteService

    WriteService(client.api_client).post_write(org=s.org, bucket=s.bucket, body=body, precision=WritePrecision.NS)


def check(s: Settings) -> None:
    """Before a bench: an empty write proves the server answers and takes the token, or StreamError."""
    client = _client(s, timeout_ms=5_000)
    try:
        _post(client, s, "")
    except Exception as exc:
        # the InfluxDB client loads only when a bench streams
        from influxdb_client.rest import ApiException

        if not (isinstance(exc, ApiException) and exc.status == 400):  # 400: "no data" — reached and authorized
            raise StreamError(
                f"InfluxDB at {s.describe()}: {describe_error(exc, s)}; nothing was run "
                "(fix it, or bench without --influx-url and `dltestbed push` later)"
            ) from None
    finally:
        client.close()


def send_batch(store: Store, s: Settings, client: Any, limit: int = 5000) -> tuple[int, int]:
    """Send the oldest waiting points (up to `limit`) and forget them once the server has acknowledged
    them: (points sent, points found in doubt and sent again). Raises on failure; the batch waits again.

    Every process sends under one lock per store and destination (beside the store; the kernel frees
    it when its holder dies), so points marked as being sent while nobody holds it were being sent by a
    process that died: they are in doubt."""
    sending = Path(f"{store.path}.send-{hashlib.sha256(s.dest.encode()).hexdigest()[:12]}")
    with locks.beside(sending, f"sending to {s.url}", timeout=60):
        in_doubt = store.outbox_release(s.dest)  # a send lock nobody held: whoever marked them is gone
        rows = store.outbox_claim(s.dest, limit)
        if rows:
            try:
                _post(client, s, "\n".join(r[2] for r in rows))
            except BaseException:
                store.outbox_release(s.dest)
                raise
            store.outbox_sent(s.dest)
        return len(rows), in_doubt


@dataclass
class Pushed:
    """What `push` did: points sent, and how many of them a process had been sending when it died."""

    sent: int = 0
    in_doubt: int = 0


def doubt_note(in_doubt: int) -> str:
    """A sentence on points a dead process had been sending, sent again: they may be on the server twice."""
    return (
        f"{in_doubt} of them were being sent when a dltestbed process stopped, so the server may "
        "have had them already: InfluxDB overwrites such a point; a server that keeps duplicates "
        "(VictoriaMetrics without -dedup.minScrapeInterval) may now hold it twice"
    )


def push(store: Store, s: Settings, batch: int = 5000) -> Pushed:
    """Send every point waiting for this destination, or StreamError (the rest stay)."""
    client = _client(s)
    done = Pushed()
    try:
        while True:
            try:
                sent, doubt = send_batch(store, s, client, batch)
            except Exception as exc:
                left = store.outbox_count(s.dest)
                why = str(exc) if isinstance(exc, DltestbedError) else describe_error(exc, s)
                raise StreamError(
                    f"InfluxDB at {s.describe()}: {why}; {done.sent} point(s) sent, "
                    f"{left} still waiting in {store.path}"
                ) from None
            done.sent += sent
            done.in_doubt += doubt
            if not sent:
                return done
    finally:
        client.close()


def spool_runs(store: Store, s: Settings, runs: Iterable[RunRecord]) -> int:
    """Put stored runs' points (steps, resources, measures, the run) into the outbox for `push`; how many."""
    n = 0
    for run in runs:
        lines = [points.step_line(run, e) for e in store.steps(run.id)]
        lines += [points.resource_line(run, e) for e in store.resources(run.id)]
        lines += [points.measure_line(run, e) for e in store.measures(run.id)]
        if run.status != "running":
            lines.append(points.run_line(run))
        store.outbox_add(s.dest, lines)
        n += len(lines)
    return n


class InfluxSink:
    """A runner stream to a time-series server that loses nothing, even when dltestbed is killed.

    It renders each step, resource sample, measure and finished run as a line-protocol point; the runner
    stores the point in the outbox in the same SQLite transaction as the result. A sender thread sends
    the outbox in batches (every `flush_every` seconds) and deletes what the server acknowledged; while
    the server fails it retries every `retry_every` seconds. `close` sends what is left once more and
    says how many points still wait (for `dltestbed push`)."""

    def __init__(
        self, store: Store, s: Settings, flush_every: float = 0.5, retry_every: float = 2.0, batch: int = 5000
    ) -> None:
        self.store, self.settings = store, s
        self.dest = s.dest
        self.sent = 0  # points acknowledged by the server
        self.in_doubt = 0  # points a dead process had been sending, sent again
        self.errors: list[str] = []  # one line per failed send, token scrubbed
        self._series: dict[tuple[str, str, str], str] = {}  # (measurement, run id, phase) → escaped series key
        self._lock = threading.Lock()
        self._client = _client(s)
        self._batch = batch
        self._flush_every, self._retry_every = flush_every, retry_every
        self._closed = threading.Event()
        self._sender = threading.Thread(target=self._send_loop, name="dltestbed-influx-send", daemon=True)
        self._sender.start()

    def _prefix(self, measurement: str, run: RunRecord, phase: str = "") -> str:
        key = (measurement, run.id, phase)
        with self._lock:
            prefix = self._series.get(key)
            if prefix is None:  # a run's tags do not change while it runs: escape them once
                extra = {"phase": phase} if phase else {}
                prefix = self._series[key] = points.series(measurement, run, **extra)
        return prefix

    def _render(self, render: Any, *args: Any) -> str | None:
        try:
            return str(render(*args))
        except ValueError as exc:  # a value line protocol cannot carry (NaN): the result is stored anyway
            with self._lock:
                self.errors.append(f"a point was not sent: {exc}")
            return None

    # runner.Stream: the point of each result (None: it has none)
    def step(self, run: RunRecord, ev: StepEvent) -> str | None:
        """A step's point."""
        return self._render(points.step_line, run, ev, self._prefix("dltestbed_step", run, ev.phase))

    def resource(self, run: RunRecord, ev: ResourceEvent) -> str | None:
        """A resource sample's point."""
        return self._render(points.resource_line, run, ev, self._prefix("dltestbed_resource", run))

    def measure(self, run: RunRecord, ev: MeasureEvent) -> str | None:
        """A microbenchmark measure's point."""
        return self._render(points.measure_line, run, ev)

    def finished(self, run: RunRecord) -> str | None:
        """A finished run's point (its series are forgotten)."""
        with self._lock:
            for key in [k for k in self._series if k[1] == run.id]:
                del self._series[key]
        return self._render(points.run_line, run)

    def _send_loop(self) -> None:
        delay = self._flush_every
        while True:
            closing = self._closed.wait(delay)
            delay = self._flush_every if self._send_all() else self._retry_every
            if closing:
                return

    def _send_all(self) -> bool:
        """Send the outbox for this destination until it is empty (True) or a send fails (False)."""
        try:
            while True:
                sent, doubt = send_batch(self.store, self.settings, self._client, self._batch)
                with self._lock:
                    self.sent += sent
                    self.in_doubt += doubt
                if not sent:
                    return True
        except Exception as exc:
            with self._lock:
                self.errors.append(str(exc) if isinstance(exc, DltestbedError) else describe_error(exc, self.settings))
            return False

    def close(self) -> int:
        """Send what is left once more, stop the sender; how many points still wait in the outbox."""
        self._closed.set()
        self._sender.join(120)
        self._client.close()
        return self.store.outbox_count(self.dest)
