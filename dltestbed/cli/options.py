"""Options and choices shared by several commands (bench, provision, runs, report, results)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeAlias

import typer

from dltestbed import choices
from dltestbed.errors import ConfigError

# Each choice a type typer reads its names from (a Literal: `<a|b>` in --help, one line for a bad one), built
# from dltestbed.choices, where each name is spelled once (a run's data, mode, device, math and GPUs are typed
# there already). mypy sees a plain str for the registries' names.
Output = Literal["table", "json"]  # how a command prints: a table, or JSON (every field, full ids)
if TYPE_CHECKING:
    Scenario: TypeAlias = str
    Layout: TypeAlias = str
    Cotenant: TypeAlias = str
    Preset: TypeAlias = str
    Suite: TypeAlias = str
    Order: TypeAlias = str
    Launcher: TypeAlias = str
    Runtime: TypeAlias = str
    Flavor: TypeAlias = str
else:
    Scenario = Literal[tuple(choices.SCENARIOS)]
    Layout = Literal[tuple(choices.LAYOUTS)]
    Cotenant = Literal[tuple(choices.COTENANTS)]
    Preset = Literal[(choices.AUTO_PRESET, *choices.PRESETS)]
    Suite = Literal[tuple(choices.SUITES)]
    Order = Literal[choices.ORDERS]
    Launcher = Literal[tuple(choices.LAUNCHERS)]
    Runtime = Literal[choices.RUNTIMES]
    Flavor = Literal[("auto", *choices.FLAVORS)]


def wants_json(fmt: Output, as_json: bool) -> bool:
    """Whether JSON was asked for: --format json, or the deprecated --json."""
    return fmt == "json" or as_json


# No word longer than a narrow help column (rich cuts one with "…"): the folder, not the whole path.
RESULTS_HELP = "Results store: $DLTESTBED_RESULTS, else results.sqlite in ~/.local/share/dltestbed/."
RESULTS_SHORT = "Results store ($DLTESTBED_RESULTS)."
INFLUX = "InfluxDB stream"
OUTPUT_HELP = "table (default), or json (every field, full ids)."


def influx_url_opt() -> str | None:
    return typer.Option(
        None,
        "--influx-url",
        help="Stream every step to InfluxDB v2 here ($INFLUXDB_V2_URL).",
        rich_help_panel=INFLUX,
    )


def influx_org_opt() -> str | None:
    return typer.Option(None, "--influx-org", help="Organization ($INFLUXDB_V2_ORG).", rich_help_panel=INFLUX)


def influx_bucket_opt() -> str | None:
    return typer.Option(None, "--influx-bucket", help="Bucket ($INFLUXDB_V2_BUCKET).", rich_help_panel=INFLUX)


def influx_token_opt() -> Path | None:
    return typer.Option(
        None,
        "--influx-token-file",
        help="Token file ($INFLUXDB_V2_TOKEN[_FILE]).",
        rich_help_panel=INFLUX,
    )


GROUP_HELP = "e.g. bare_metal=gpu_nodes; repeatable."  # ROLE=GROUP in full: docs/reference.md, "Inventories"


def group_opt(panel: str | None = None, short: bool = False) -> list[str] | None:
    text = "e.g. bare_metal=gpu_nodes." if short else GROUP_HELP
    return typer.Option(None, "--group", metavar="ROLE=GROUP", help=text, rich_help_panel=panel)


OTHER_FRAMEWORKS = choices.or_list([f for f in choices.FRAMEWORKS if f != choices.DEFAULT_FRAMEWORK])


def listed(text: str | None, option: str) -> tuple[str, ...] | None:
    """A comma-separated option's items (None: not given); an empty item is refused (`bm,,cbm`)."""
    if text is None:
        return None
    items = tuple(p.strip() for p in text.split(","))
    if not all(items):
        raise ConfigError(f"{option}: a comma-separated list with no empty item (got {text!r})")
    return items
