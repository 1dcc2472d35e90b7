"""How every command's --help looks: value labels in words (N, PATH, a|b), never Python's types, and
no label for a flag that takes no value; a description's paragraphs wrapped by the terminal, not where the
docstring's lines end; one default marker an option at most; the help a command's module computes only
when --help is shown (its `help_when_shown`)."""

from __future__ import annotations

import inspect
import sys
from typing import Any

LABELS = {int: "N", float: "NUM", str: "TEXT"}


def tidy(command: Any) -> None:
    """Give each option of `command` and its subcommands a value label, where it has none; reflow their
    descriptions; drop the "[default: …]" of an option whose help names its default."""
    from typer._click import Context
    from typer.core import TyperOption

    helper = command.get_help_option(Context(command, help_option_names=["-h", "--help"]))
    if helper is not None:
        helper.metavar = ""  # made once and kept: the one --help shows
    if isinstance(getattr(command, "help", None), str):
        command.help = reflow(command.help)
    module = sys.modules.get(getattr(getattr(command, "callback", None), "__module__", None) or "")
    if callable(later := getattr(module, "help_when_shown", None)):
        _when_shown(command, later)
    for param in getattr(command, "params", ()):
        if "default" in (getattr(param, "help", None) or "").lower() and hasattr(param, "show_default"):
            param.show_default = False  # its help says its default: no second "[default: …]" under it
        if getattr(param, "param_type_name", "") == "argument":
            label = LABELS.get(_base(param.type_descriptor.annotation), "TEXT")
            param.display_type_rich = lambda ctx, label=label: label  # its name says the rest
            continue
        if getattr(param, "param_type_name", "") != "option" or param.metavar is not None:
            continue
        if getattr(param, "is_flag", False) or getattr(param, "count", False) or not isinstance(param, TyperOption):
            param.metavar = ""
            continue
        desc = param.type_descriptor
        if desc.is_choice:
            continue  # typer shows the choices: <a|b|c>
        if desc.is_path:
            param.metavar = "PATH"
            continue
        param.metavar = LABELS.get(_base(desc.annotation), "TEXT")
    for sub in getattr(command, "commands", {}).values():
        tidy(sub)


def _when_shown(command: Any, later: Any) -> None:
    """Fill in the help `later()` gives ({option name: help}) when the command's help is formatted, not
    before: what it names lives in a registry too slow to import at every start (bench/cli_start.py)."""
    shown = command.format_help

    def format_help(ctx: Any, formatter: Any) -> None:
        texts = later()
        for param in command.params:
            for name in getattr(param, "opts", ()):
                if name in texts:
                    param.help = texts[name]
        shown(ctx, formatter)

    command.format_help = format_help


def _base(annotation: Any) -> Any:
    """int for int, int | None and list[int]."""
    args = [a for a in getattr(annotation, "__args__", ()) if a is not type(None)]
    return _base(args[0]) if args else annotation


def reflow(text: str) -> str:
    """A command's docstring as its help: each paragraph one line that the terminal wraps (rich keeps the
    docstring's own line breaks after the first paragraph: a description hard-wrapped at 100 columns
    breaks mid-sentence at 80). A paragraph of list items, indented lines or `\\b` is kept as written."""
    out = []
    for para in inspect.cleandoc(text).split("\n\n"):
        lines = para.splitlines()
        kept = para.startswith("\b") or any(_own_line(line) for line in lines[1:])
        out.append(para if kept else " ".join(line.strip() for line in lines))
    return "\n\n".join(out)


def _own_line(line: str) -> bool:
    """A line that starts something of its own: indented, or a list item (`- `, `* `, `• `, `1. `)."""
    return line.startswith((" ", "\t", "- ", "* ", "• ")) or line.split(". ", 1)[0].isdigit()
