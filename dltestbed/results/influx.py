"""Stream results to InfluxDB (v2 write API: InfluxDB 2.x/3.x, 1.8+ compatibility, VictoriaMetrics) without
losing a point: the client's batching writer sends; its error callback spools a failed batch into the
store's outbox; a resender sends the outbox once the server answers again, and `dltestbed results push`
sends what is left. The local store stays the source of truth. The token never reaches a log line."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dltestbed import secretenv
from dltestbed.errors import ConfigError, StreamError
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
    from influxdb_client.rest import ApiException

    if isinstance(exc, ApiException):
        meaning = {401: "the token was refused", 403: "the token may not write to this bucket",
                   404: "org or bucket not found"}.get(exc.status or 0, "")  # fmt: skip
        body = (exc.body.decode("utf-8", "replace") if isinstance(exc.body, bytes) else str(exc.body or ""))
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
    from influxdb_client import InfluxDBClient

    return InfluxDBClient(url=s.url, token=s.token or None, org=s.org, auth_basic=s.auth_basic, timeout=timeout_ms)


def _post(client: Any, s: Settings, body: str) -> None:
    from influxdb_client import WritePrecision
    from influxdb_client.service.write_service import WriteService

    WriteService(client.api_client).post_write(org=s.org, bucket=s.bucket, body=body, precision=WritePrecision.NS)


def check(s: Settings) -> None:
    """Before a bench: an empty write proves the server answers and takes the token, or StreamError."""
    client = _client(s, timeout_ms=5_000)
    try:
        _post(client, s, "")
    except Exception as exc:
        from influxdb_client.rest import ApiException

        if not (isinstance(exc, ApiException) and exc.status == 400):  # 400: "no data" — reached and authorized
            raise StreamError(f"InfluxDB at {s.describe()}: {describe_error(exc, s)}; nothing was run "
                              "(fix it, or bench without --influx-url and `dltestbed results push` later)") from None
    finally:
        client.close()


def send(store: Store, s: Settings, rows: list[tuple[int, str, str]], client: Any) -> None:
    """Send outbox rows synchronously; forget them once the server has acknowledged them."""
    if rows:
        _post(client, s, "\n".join(r[2] for r in rows))
        store.outbox_delete(r[0] for r in rows)


def push(store: Store, s: Settings, batch: int = 5000) -> int:
    """Send every point waiting for this destination; the number sent, or StreamError (the rest stay)."""
    client = _client(s)
    sent = 0
    try:
        while rows := store.outbox(s.dest, limit=batch):
            try:
                send(store, s, rows, client)
            except Exception as exc:
                left = store.outbox_count(s.dest)
                raise StreamError(f"InfluxDB at {s.describe()}: {describe_error(exc, s)}; {sent} point(s) sent, "
                                  f"{left} still waiting in {store.path}") from None  # fmt: skip
            sent += len(rows)
    finally:
        client.close()
    return sent


def spool_runs(store: Store, s: Settings, runs: Iterable[RunRecord]) -> int:
    """Put stored runs' points (steps, resources, the run) into the outbox for `push`; how many."""
    n = 0
    for run in runs:
        lines = [points.step_line(run, e) for e in store.steps(run.id)]
        lines += [points.resource_line(run, e) for e in store.resources(run.id)]
        if run.status != "running":
            lines.append(points.run_line(run))
        store.outbox_add(s.dest, lines)
        n += len(lines)
    return n


class InfluxSink:
    """A runner sink: every step, resource sample and finished run becomes a point, sent in batches.

    A batch the server did not take (error callback) goes into the store's outbox at once; a resender
    thread sends the outbox while the server answers. `close` flushes, retries once, and says how many
    points still wait (they stay in the outbox for `dltestbed results push`)."""

    def __init__(self, store: Store, s: Settings, batch_size: int = 1000, flush_ms: int = 500,
                 resend_every: float = 2.0) -> None:  # fmt: skip
        import logging

        from influxdb_client import WriteOptions

        # The library logs each failed batch itself (URL and all); this sink reports failures its own way.
        logging.getLogger("influxdb_client.client.write_api").setLevel(logging.CRITICAL)
        self.store, self.settings = store, s
        self.sent = 0  # points acknowledged by the server (batches and resends)
        self.errors: list[str] = []  # one line per failed batch, token scrubbed
        self._pending: Counter[str] = Counter()  # handed to the writer, neither acknowledged nor spooled
        self._series: dict[tuple[str, str, str], str] = {}  # (measurement, run id, phase) → escaped series key
        self._lock = threading.Lock()
        self._client = _client(s)
        self._writer = self._client.write_api(
            write_options=WriteOptions(batch_size=batch_size, flush_interval=flush_ms, max_retries=0),
            success_callback=self._on_success, error_callback=self._on_error,
        )  # fmt: skip
        self._closed = threading.Event()
        self._wake = threading.Event()
        self._resend_every = resend_every
        self._resender = threading.Thread(target=self._resend_loop, name="dltestbed-influx-resend", daemon=True)
        self._resender.start()

    def _prefix(self, measurement: str, run: RunRecord, phase: str = "") -> str:
        key = (measurement, run.id, phase)
        prefix = self._series.get(key)
        if prefix is None:  # a run's tags do not change while it runs: escape them once
            extra = {"phase": phase} if phase else {}
            prefix = self._series[key] = points.series(measurement, run, **extra)
        return prefix

    # runner.Sink
    def step(self, run: RunRecord, ev: StepEvent) -> None:
        """Queue a step point."""
        self.write([points.step_line(run, ev, self._prefix("dltestbed_step", run, ev.phase))])

    def resource(self, run: RunRecord, ev: ResourceEvent) -> None:
        """Queue a resource point."""
        self.write([points.resource_line(run, ev, self._prefix("dltestbed_resource", run))])

    def measure(self, run: RunRecord, ev: MeasureEvent) -> None:
        """Queue a microbenchmark measure's point."""
        self.write([points.measure_line(run, ev)])

    def finished(self, run: RunRecord) -> None:
        """Queue the run's point."""
        self.write([points.run_line(run)])
        for key in [k for k in self._series if k[1] == run.id]:
            del self._series[key]

    def write(self, lines: list[str]) -> None:
        """Hand lines to the batching writer (never raises: a failure spools them)."""
        from influxdb_client import WritePrecision

        with self._lock:
            self._pending.update(lines)
        try:
            self._writer.write(self.settings.bucket, self.settings.org, record=lines, write_precision=WritePrecision.NS)
        except Exception as exc:  # the writer is gone (closing): keep the points
            self._spool(lines, exc)

    @staticmethod
    def _lines(data: Any) -> list[str]:
        text = data.decode("utf-8") if isinstance(data, bytes) else str(data)
        return [line for line in text.split("\n") if line]

    def _settle(self, lines: list[str]) -> None:
        with self._lock:
            for line in lines:
                if self._pending[line] > 1:
                    self._pending[line] -= 1
                else:
                    self._pending.pop(line, None)

    def _on_success(self, conf: Any, data: Any) -> None:
        lines = self._lines(data)
        self._settle(lines)
        with self._lock:
            self.sent += len(lines)

    def _on_error(self, conf: Any, data: Any, exc: BaseException) -> None:
        lines = self._lines(data)
        self._settle(lines)
        self._spool(lines, exc)

    def _spool(self, lines: list[str], exc: BaseException) -> None:
        self.store.outbox_add(self.settings.dest, lines)
        with self._lock:
            self.errors.append(describe_error(exc, self.settings))
        self._wake.set()

    def _resend_loop(self) -> None:
        while not self._closed.is_set():
            self._wake.wait(self._resend_every)
            self._wake.clear()
            if self._closed.is_set():
                return
            self._resend_once()

    def _resend_once(self) -> bool:
        """Send the outbox for this destination until it is empty (True) or the server fails (False)."""
        s = self.settings
        try:
            while rows := self.store.outbox(s.dest, limit=5000):
                send(self.store, s, rows, self._client)
                with self._lock:
                    self.sent += len(rows)
        except Exception:
            return False
        return True

    def close(self) -> int:
        """Flush, spool what was not acknowledged, try the outbox once more; points still waiting."""
        try:
            self._writer.close()  # waits until every batch was written or reported failed
        finally:
            self._closed.set()
            self._wake.set()
            self._resender.join(30)
            with self._lock:
                leftover = list(self._pending.elements())
                self._pending.clear()
            if leftover:
                self.store.outbox_add(self.settings.dest, leftover)
            self._resend_once()
            self._client.close()
        return self.store.outbox_count(self.settings.dest)
