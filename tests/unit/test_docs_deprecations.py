"""The reference's list of old spellings (the README points to it) says exactly which commands still take the old
`--json`: those with the hidden deprecated option, and no other (`report` never had one: its `--format json` was
always the spelling)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.unit.test_docs import ROOT, parse


def _with_old_json() -> set[str]:
    """The commands (by their path, e.g. `runs`, `lab status`) that take a hidden `--json`."""
    from typer.main import get_command

    from dltestbed.cli import app

    found = set()

    def walk(cmd: Any, path: list[str]) -> None:
        if any("--json" in p.opts and getattr(p, "hidden", False) for p in cmd.params):
            found.add(" ".join(path))
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*path, name])

    walk(get_command(app), [])
    return found


def _reference_words() -> str:
    """The reference's sentence on old spellings, on one line."""
    text = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    return " ".join(text.split("Old spellings still work", 1)[1].split("\n\n", 1)[0].split())


def test_the_reference_names_every_command_that_takes_the_old_json_and_no_other() -> None:
    old = _reference_words().split("the `--json` of ", 1)[1].split(" (", 1)
    named = set(re.findall(r"`([a-z ]+)`", old[0]))
    assert named == _with_old_json() == {"bench", "runs", "validate"}
    assert old[1].startswith("`report` never had one")
    assert "docs/reference.md" in (ROOT / "README.md").read_text(encoding="utf-8").split("Old spellings", 1)[1]


@pytest.mark.parametrize("command", sorted(_with_old_json()))
def test_each_command_named_takes_it_with_a_deprecation_line(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    parse([*command.split(), "--json"])
    assert "warning: --json is deprecated" in capsys.readouterr().err


def test_report_never_took_it() -> None:
    with pytest.raises(Exception, match="No such option: --json"):
        parse(["report", "--json"])
