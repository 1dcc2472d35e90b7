"""Every command's --help, as a user reads it at 100 columns, against the copy kept in tests/data/help/: a
refactor of how options are declared (issue 58: option groups) leaves what they say unchanged. When a change to
the help is meant, write the copies anew with DLTESTBED_WRITE_HELP=1 and review their diff."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.unit.test_cli import _visible_commands

KEPT = Path(__file__).resolve().parents[1] / "data" / "help"
WIDTH = 100


def _help(path: str) -> str:
    from dltestbed.cli import app

    env = {"COLUMNS": str(WIDTH), "NO_COLOR": "1", "TERM": "dumb"}
    got = CliRunner().invoke(app, [*path.split(), "--help"], env=env, terminal_width=WIDTH, prog_name="dltestbed")
    assert got.exit_code == 0, got.output
    return got.output


def _kept(path: str) -> Path:
    return KEPT / f"{path.replace(' ', '-') or 'dltestbed'}.txt"


@pytest.mark.parametrize("path", _visible_commands(), ids=lambda p: p or "dltestbed")
def test_help_reads_as_kept(path: str) -> None:
    text = _help(path)
    if os.environ.get("DLTESTBED_WRITE_HELP") == "1":
        _kept(path).write_text(text, encoding="utf-8")
    assert _kept(path).exists(), f"no kept help for `dltestbed {path}`: write it with DLTESTBED_WRITE_HELP=1"
    assert text == _kept(path).read_text(encoding="utf-8")


def test_every_kept_help_is_a_command_of_today() -> None:
    assert {p.name for p in KEPT.glob("*.txt")} == {_kept(p).name for p in _visible_commands()}
