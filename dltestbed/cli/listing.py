"""`dltestbed runs`: the stored runs (or benches) as a table that fits 80 columns, with short ids every
command takes (`--no-trunc`: whole ids), as `docker ps` lists containers."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dltestbed.results.ids import short
from dltestbed.results.records import RunRecord

RIGHT = ("bs", "px", "rep", "img/s", "runs", "ok", "failed")


def _id(full: str, no_trunc: bool) -> str:
    return full if no_trunc else short(full)


def _when(iso: str) -> str:
    """`11-25 03:59` from an ISO time (UTC)."""
    return iso[5:16].replace("T", " ")


def _table(cols: Sequence[str], limits: dict[str, int] | None = None) -> Table:
    table = Table(box=None, padding=(0, 1, 0, 0), pad_edge=False, header_style="bold")
    for c in cols:
        width = (limits or {}).get(c)
        table.add_column(
            c, justify="right" if c in RIGHT else "left", no_wrap=True, max_width=width, overflow="ellipsis"
        )
    return table


def runs_table(records: Sequence[RunRecord], no_trunc: bool = False) -> Table:
    """A row per run: id, bench, start, target, model, mode, batch, size, repetition and images/sec (or
    how it ended, when it did not end ok)."""
    table = _table(["id", "bench", "started", "target", "model", "mode", "bs", "px", "rep", "img/s"], {"target": 18})
    for r in records:
        if r.status != "ok":
            result = f"[red]{r.status}[/]"
        elif r.images_per_sec is not None:
            result = f"{r.images_per_sec:.1f}"
        else:
            result = "—"
        table.add_row(
            _id(r.id, no_trunc),
            _id(r.bench_id, no_trunc),
            _when(r.started_at),
            escape(f"{r.target_kind}:{r.host}"),
            escape(r.model + ("" if r.measured else f" ({r.role})")),
            r.mode,
            str(r.batch_size) if r.batch_size else "",
            str(r.image_size) if r.image_size else "",
            str(r.repetition),
            result,
        )
    return table


def bench_rows(records: Sequence[RunRecord]) -> list[dict[str, Any]]:
    """A summary per bench, oldest first: id, start, runs, how many ended ok, scenarios, kinds, models."""
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        b = out.setdefault(
            r.bench_id,
            {
                "bench": r.bench_id,
                "started": r.started_at,
                "runs": 0,
                "ok": 0,
                "scenarios": [],
                "kinds": [],
                "models": [],
            },
        )
        b["runs"] += 1
        b["ok"] += r.status == "ok"
        for key, value in (("scenarios", r.scenario), ("kinds", r.target_kind), ("models", r.model)):
            if value not in b[key]:
                b[key].append(value)
    return list(out.values())


def benches_table(records: Sequence[RunRecord], no_trunc: bool = False) -> Table:
    """A row per bench: what `--bench` and `report --bench` take."""
    table = _table(["bench", "started", "runs", "ok", "failed", "scenario", "kinds", "models"], {"models": 24})
    for b in bench_rows(records):
        failed = b["runs"] - b["ok"]
        table.add_row(
            _id(b["bench"], no_trunc),
            _when(b["started"]),
            str(b["runs"]),
            str(b["ok"]),
            f"[red]{failed}[/]" if failed else "0",
            ",".join(b["scenarios"]),
            ",".join(b["kinds"]),
            escape(",".join(b["models"])),
        )
    return table


def show(table: Table, store: Path, records: Sequence[RunRecord], no_trunc: bool) -> None:
    """Print the table (a terminal's width, or $COLUMNS; piped: as wide as it needs), then why each
    failed run failed."""
    wide = sys.stdout.isatty() or "COLUMNS" in os.environ
    console = Console(width=None if wide else 250, soft_wrap=not wide, highlight=False)
    console.print(f"[dim]{escape(str(store))}[/]")
    console.print(table)
    for r in records:
        if r.status != "ok":
            console.print(f"[red]{_id(r.id, no_trunc)}[/] {r.status}: {escape(r.reason or '')}", soft_wrap=True)
