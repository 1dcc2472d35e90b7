"""The README is a quick start, and every `dltestbed` command in it and under docs/ still parses with
today's options, in today's spellings (no deprecation line)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 150
CUT = {"|", "&&", "||", ";", ">", "2>", ">>", "&"}


def commands(text: str) -> list[list[str]]:
    """The argument lists of every `dltestbed ...` line in the text's shell blocks (continuations joined,
    a comment, pipe or redirection ends it; `…` and <placeholders> are values like any other)."""
    out = []
    for block in re.findall(r"```(?:sh|bash|console)\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip().removeprefix("$ ").removeprefix("# ")
            try:
                words = shlex.split(line, comments=True)
            except ValueError:  # an apostrophe in prose: plain words
                words = line.split()
            while words and "=" in words[0] and not words[0].startswith("-"):
                words = words[1:]  # VAR=value before the command
            starts = [i for i, w in enumerate(words) if w == "dltestbed" or w.endswith("/bin/dltestbed")]
            for i in starts:
                args = []
                for w in words[i + 1 :]:
                    if w in CUT:
                        break
                    args.append(w)
                out.append(args)
    return out


def parse(args: list[str]) -> None:
    """Parse `dltestbed ARGS` as the CLI would, running nothing: a bad option or value raises."""
    from typer.main import get_command

    from dltestbed.cli import app
    from dltestbed.cli.helpstyle import tidy

    cmd = get_command(app)
    tidy(cmd)
    ctx = cmd.make_context("dltestbed", list(args))
    while getattr(cmd, "commands", None):
        rest = [*ctx._protected_args, *ctx.args]
        if not rest:
            return
        name, sub, rest = cmd.resolve_command(ctx, rest)
        assert sub is not None, f"no command {name!r}"
        ctx = sub.make_context(name, rest, parent=ctx)
        cmd = sub


def test_the_readme_is_a_quick_start() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) < README_MAX_LINES
    assert "docs/reference.md" in text and "docs/bench.md" in text


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_command_in_the_docs_parses_in_todays_spelling(doc: Path, capsys: pytest.CaptureFixture[str]) -> None:
    found = commands(doc.read_text(encoding="utf-8"))
    assert found or doc.name == "bench.md", f"{doc.name}: no dltestbed command found"
    for args in found:
        if "--help" in args or "-h" in args:
            continue
        try:
            parse(args)
        except Exception as exc:  # the message names the command that no longer parses
            pytest.fail(f"{doc.name}: `dltestbed {' '.join(args)}` does not parse: {exc}")
        warned = capsys.readouterr().err
        assert "deprecated" not in warned, f"{doc.name}: `dltestbed {' '.join(args)}`: {warned}"


def test_the_parser_here_refuses_what_the_cli_refuses() -> None:
    parse(["bench", "--targets", "bm", "--repeat", "2"])
    for bad in (["bench", "--no-such-option"], ["bench", "--device", "tpu"], ["lab", "nope"]):
        with pytest.raises(Exception):  # noqa: B017 — click's own usage errors
            parse(bad)


def test_bench_md_names_every_visible_option_of_bench() -> None:
    text = (ROOT / "docs" / "bench.md").read_text(encoding="utf-8")
    from typer.main import get_command

    from dltestbed.cli import app

    bench = get_command(app).commands["bench"]  # type: ignore[attr-defined]
    for p in bench.params:
        if getattr(p, "hidden", False) or p.param_type_name != "option":
            continue
        assert f"`{p.opts[0]}" in text, f"docs/bench.md lacks {p.opts[0]}"
