"""A real VictoriaMetrics server for the stream tests: it speaks InfluxDB's v2 write API; HTTP Basic auth
stands in for the token (the client sends it with INFLUXDB_V2_AUTH_BASIC=true)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

USER, PASSWORD = "dltestbed", "s3cret-token-value"
TOKEN = f"{USER}:{PASSWORD}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class VictoriaMetrics:
    """One server process on 127.0.0.1; stop() and start() again keep its data."""

    def __init__(self, root: Path, port: int | None = None) -> None:
        binary = shutil.which("victoria-metrics")
        assert binary, "victoria-metrics missing (scripts/install.sh --test installs it)"
        self.binary, self.root, self.port = binary, root, port or free_port()
        root.mkdir(parents=True, exist_ok=True)
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def env(self, token: str = TOKEN) -> dict[str, str]:
        """The client's environment variables for this server."""
        return {
            "INFLUXDB_V2_URL": self.url,
            "INFLUXDB_V2_ORG": "lab",
            "INFLUXDB_V2_BUCKET": "bench",
            "INFLUXDB_V2_TOKEN": token,
            "INFLUXDB_V2_AUTH_BASIC": "true",
        }

    def start(self) -> None:
        log = (self.root / "server.log").open("ab")
        self.proc = subprocess.Popen(
            [
                self.binary,
                f"-storageDataPath={self.root / 'data'}",
                f"-httpListenAddr=127.0.0.1:{self.port}",
                "-envflag.enable",
                "-loggerLevel=ERROR",
            ],
            stdout=log,
            stderr=log,
            env={**os.environ, "httpAuth_username": USER, "httpAuth_password": PASSWORD},
        )  # (the password in the environment, not in the process list the tests check)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if self._get("/health") == b"OK":
                    return
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"victoria-metrics did not answer: {(self.root / 'server.log').read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)
        self.proc = None

    def _get(self, path: str, data: dict[str, str] | None = None) -> bytes:
        body = urllib.parse.urlencode(data).encode() if data else None
        req = urllib.request.Request(self.url + path, data=body)
        req.add_header("Authorization", "Basic " + base64.b64encode(TOKEN.encode()).decode())
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.read()

    def count(self, bench_id: str, want: dict[str, int] | None = None, wait: float = 20.0) -> dict[str, int]:
        """Points per measurement of one bench (each point carries these always-present fields). With
        `want`: read again until the counts equal it or `wait` seconds passed (a series new to the
        server becomes searchable a few seconds after its first point was acknowledged), then the last."""
        deadline = time.monotonic() + wait
        while True:
            got = self._count(bench_id)
            if want is None or got == want or time.monotonic() > deadline:
                return got
            time.sleep(0.5)

    def _count(self, bench_id: str) -> dict[str, int]:
        self._get("/internal/force_flush")
        out = {}
        for measurement, field in (
            ("dltestbed_step", "index"),
            ("dltestbed_resource", "rss_bytes"),
            ("dltestbed_measure", "value"),
            ("dltestbed_run", "ok"),
        ):
            text = self._get("/api/v1/export", {"match[]": f'{measurement}_{field}{{bench_id="{bench_id}"}}'})
            out[measurement] = sum(len(json.loads(line)["values"]) for line in text.decode().splitlines() if line)
        return out

    def series_labels(self, bench_id: str) -> list[dict[str, str]]:
        """The label sets of a bench's step series."""
        self._get("/internal/force_flush")
        text = self._get("/api/v1/export", {"match[]": f'dltestbed_step_index{{bench_id="{bench_id}"}}'})
        return [json.loads(line)["metric"] for line in text.decode().splitlines() if line]


def expected(results: Path, bench_id: str) -> dict[str, int]:
    """The same counts from the local store: the source of truth."""
    import sqlite3

    runs = "SELECT id FROM runs WHERE bench_id = ?"
    queries = {
        "dltestbed_step": f"SELECT count(*) FROM steps WHERE run_id IN ({runs})",
        "dltestbed_resource": f"SELECT count(*) FROM resources WHERE run_id IN ({runs})",
        "dltestbed_measure": f"SELECT count(*) FROM measures WHERE run_id IN ({runs})",
        "dltestbed_run": "SELECT count(*) FROM runs WHERE bench_id = ? AND status != 'running'",
    }
    with sqlite3.connect(results) as db:
        return {m: db.execute(q, (bench_id,)).fetchone()[0] for m, q in queries.items()}
