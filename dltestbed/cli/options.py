"""Options and choices shared by several commands (bench, provision, runs, report, results)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, ClassVar, Literal

import typer

from dltestbed.panels import GROUP_HELP, opt
from dltestbed.results import RESULTS_HELP as RESULTS_HELP
from dltestbed.results import RESULTS_SHORT as RESULTS_SHORT

Output = Literal["table", "json"]  # how a command prints: a table, or JSON (every field, full ids)


def wants_json(fmt: Output, as_json: bool) -> bool:
    """Whether JSON was asked for: --format json, or the deprecated --json."""
    return fmt == "json" or as_json


INFLUX = "InfluxDB stream"
OUTPUT_HELP = "table (default), or json (every field, full ids)."


@dataclass(frozen=True)
class Influx:
    """Where the steps stream: an InfluxDB v2 server (each from its variable when not given)."""

    PANEL: ClassVar[str] = INFLUX

    url: Annotated[str | None, opt("--influx-url", help="Stream every step here ($INFLUXDB_V2_URL).")] = None
    org: Annotated[str | None, opt("--influx-org", help="Organization ($INFLUXDB_V2_ORG).")] = None
    bucket: Annotated[str | None, opt("--influx-bucket", help="Bucket ($INFLUXDB_V2_BUCKET).")] = None
    token_file: Annotated[Path | None, opt("--influx-token-file", help="Token file ($INFLUXDB_V2_TOKEN[_FILE]).")] = (
        None
    )


def group_opt() -> list[str] | None:
    return typer.Option(None, "--group", metavar="ROLE=GROUP", help=GROUP_HELP)
