"""How every command's --help looks: value labels in words (N, PATH, a|b), never Python's types, and
no label for a flag that takes no value."""

from __future__ import annotations

from typing import Any

LABELS = {int: "N", float: "NUM", str: "TEXT"}


def tidy(command: Any) -> None:
    """Give each option of `command` and its subcommands a value label, where it has none."""
    from typer._click import Context
    from typer.core import TyperOption

    helper = command.get_help_option(Context(command, help_option_names=["-h", "--help"]))
    if helper is not None:
        helper.metavar = ""  # made once and kept: the one --help shows
    for param in getattr(command, "params", ()):
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


def _base(annotation: Any) -> Any:
    """int for int, int | None and list[int]."""
    args = [a for a in getattr(annotation, "__args__", ()) if a is not type(None)]
    return _base(args[0]) if args else annotation
