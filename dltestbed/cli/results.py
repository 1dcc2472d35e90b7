"""`dltestbed push` (once `results push`): send points the InfluxDB stream could not deliver (or a whole
stored bench)."""

from __future__ import annotations

from pathlib import Path

import typer

from dltestbed.cli.grouped import grouped
from dltestbed.cli.options import RESULTS_HELP, Influx

app = typer.Typer(help="Deprecated: `dltestbed push`.", no_args_is_help=True)


@app.callback()
def _old() -> None:
    """Deprecated: `dltestbed push`."""
    from dltestbed.cli import deprecated

    deprecated.warn("results push", "push")


@grouped
def push(
    bench: str | None = typer.Option(None, metavar="ID", help="Also (re)send this stored bench's points."),
    results: Path | None = typer.Option(None, metavar="FILE", help=RESULTS_HELP),
    stream: Influx = Influx(),
) -> None:
    """Send the points waiting in the results store's outbox (those a stream could not deliver).

    Without --influx-url (or $INFLUXDB_V2_URL) each waiting point goes where its bench was streaming;
    the token comes from $INFLUXDB_V2_TOKEN or --influx-token-file.

    --bench ID (an id, a unique prefix, or 'last') also sends a stored bench's points, e.g. one run without
    streaming, to --influx-url (or $INFLUXDB_V2_URL). InfluxDB overwrites a point sent twice.

    Exits 1 if points are still waiting.
    """
    import json

    from dltestbed import secretenv
    from dltestbed.cli.runs import stderr
    from dltestbed.errors import ConfigError
    from dltestbed.results import influx
    from dltestbed.results.select import select_runs
    from dltestbed.results.store import Store

    has_url = bool(stream.url or secretenv.environ().get(influx.URL_ENV))
    given = influx.settings(stream.url, stream.org, stream.bucket, stream.token_file if has_url else None)
    store = Store.open(results)
    notice = store.upgrade_notice()
    if notice:
        typer.echo(notice, err=True)
    try:
        if bench is not None:
            if given is None:
                raise ConfigError("--bench needs --influx-url (or INFLUXDB_V2_URL): where should its points go?")
            n = influx.spool_runs(store, given, select_runs(store, None, bench, stderr))
            print(f"queued {n} point(s) of bench {bench}")
        if given is not None:
            targets = [given]
        else:
            token, basic = influx.credentials(stream.token_file)
            targets = [influx.Settings(**json.loads(d), token=token, auth_basic=basic) for d in store.outbox_dests()]
        if not targets:
            print(f"nothing waiting in {store.path}")
            return
        for s in targets:
            if not store.outbox_count(s.dest):
                print(f"nothing waiting for {s.describe()} in {store.path}")
                continue
            done = influx.push(store, s)
            print(f"sent {done.sent} point(s) to {s.describe()}")
            if done.in_doubt:
                print(influx.doubt_note(done.in_doubt))
    finally:
        store.close()


app.command("push")(push)
