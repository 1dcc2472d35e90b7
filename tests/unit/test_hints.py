"""Every hint names the whole command that mends it: each `dltestbed …` written in dltestbed's code (its strings and
f-strings, a computed value filled in with one the option takes) and each image-build hint a check prints, parsed by
the CLI itself as a user would type it (options, values and choices), without running it."""

from __future__ import annotations

import ast
import itertools
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer import exceptions as typer_exc
from typer import main as typer_main
from typer._click import Context
from typer._click import exceptions as click_exc
from typer.core import TyperGroup as Group

from dltestbed import hints
from dltestbed.choices import RUNTIMES
from dltestbed.cli import app
from dltestbed.hints import SAME_OPTIONS
from dltestbed.orchestrate.prepare import image_build_command
from dltestbed.workload.frameworks import REGISTRY

PACKAGE = Path(__file__).parents[2] / "dltestbed"
HINT = re.compile(r"`(dltestbed [^`]*)`")
HOLE = "\x00"  # where an f-string's computed part was
SAMPLES = {"--runtime": "podman", "--framework": "pytorch", "--bench": "b-1", "--out": "pack", "--level": "quick"}


def _text(node: ast.AST) -> str | None:
    """A string's text, an f-string's with a hole for each computed part."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else HOLE for v in node.values)
    return None


def _filled(hint: str) -> str:
    """A computed option value as one the option takes (a sample); a computed run of options (`{option}`) left out."""
    hint = re.sub(rf"(--[\w-]+) {HOLE}", lambda m: f"{m.group(1)} {SAMPLES.get(m.group(1), 'X')}", hint)
    return hint.replace(HOLE, "")


def _docstrings(tree: ast.Module) -> Iterator[ast.AST]:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                yield first.value


def written_hints() -> Iterator[tuple[str, str]]:
    """(where, hint) for each hint in the package's strings; `a|b` alternatives each on their own."""
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parts = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
        parts |= {id(doc) for doc in _docstrings(tree)}  # a docstring names a command; a hint says what to run
        for node in ast.walk(tree):
            text = _text(node)
            if text is None or id(node) in parts:  # an f-string's literal part: read with its f-string
                continue
            for m in HINT.finditer(text):
                words = _filled(m.group(1)).split(" ")
                options = [w.split("|") for w in words]
                where = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
                same = SAME_OPTIONS in text[m.end() : m.end() + 40]
                for chosen in itertools.product(*options):
                    yield f"{where}{' (same options)' if same else ''}", " ".join(chosen)


def printed_hints() -> list[str]:
    """The hints built by dltestbed.hints, as the checks print them: every runtime, each framework's options, a
    host's provisioning and an acceptance's resume."""
    out = [image_build_command(rt, (fw,)) for rt in (None, *RUNTIMES) for fw in REGISTRY]
    out += [hints.provision(), hints.provision("rack one.yml", "gpu-01", ["pytorch"])]
    return [*out, hints.accept_resume("rack.yml", "pack"), hints.accept_resume("rack.yml", "pack", init=True)]


def parse(hint: str, missing_ok: bool = False) -> None:
    """The hint parsed by the CLI (its command found, its options and values taken), nothing run; an error raised
    as the CLI would raise it. Missing required options are fine for a hint that keeps the same options."""
    words = shlex.split(hint)[1:]
    command = typer_main.get_command(app)
    ctx = Context(command, info_name="dltestbed")
    while isinstance(command, Group) and words and not words[0].startswith("-"):
        name, found, words = command.resolve_command(ctx, words)
        assert found is not None, f"no command {name!r}"
        command, ctx = found, Context(found, info_name=name, parent=ctx)
    try:
        command.make_context(ctx.info_name, list(words), parent=ctx.parent)
    except typer_exc.Exit as exc:  # an eager --help: parsed
        assert exc.exit_code == 0
    except click_exc.MissingParameter:
        if not missing_ok:
            raise


def test_hints_are_found() -> None:
    found = [hint for _, hint in written_hints()]
    assert "dltestbed data make --out DIR" in found and "dltestbed accept --resume" in found and len(found) > 15


@pytest.mark.parametrize(("where", "hint"), list(written_hints()), ids=lambda v: v)
def test_a_written_hint_parses(where: str, hint: str) -> None:
    parse(hint, missing_ok="same options" in where)


@pytest.mark.parametrize("hint", printed_hints())
def test_a_printed_hint_parses(hint: str) -> None:
    parse(hint)


def test_a_hint_that_no_longer_parses_fails() -> None:
    for broken in ("dltestbed image biuld", "dltestbed image build --runtime nosuch", "dltestbed bench --no-such"):
        with pytest.raises((AssertionError, click_exc.UsageError, click_exc.BadParameter)):
            parse(broken)
