"""A command whose options come in groups (dltestbed/panels.py): a parameter typed with a group becomes one typer
option per field of it, in the group's panel, and the command is called with the group built from them. A
parameter typed with a form (a dataclass whose fields are groups, as the library's request) becomes the options
of each of its groups, and the command is called with the form built of them (its other fields at their
defaults)."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import sys
import typing
from collections.abc import Callable
from typing import Any, TypeVar

import typer

from dltestbed.cli.deprecated import renamed
from dltestbed.panels import Field, is_group, options

F = TypeVar("F", bound=Callable[..., Any])
KW = inspect.Parameter.KEYWORD_ONLY  # typer calls a command with keywords alone
SEP = "__"  # a field's parameter: <group parameter>__<field> (no option is named so)


@dataclasses.dataclass(frozen=True)
class _Group:
    """A group the command line fills: its class, the parameter prefix of its fields, and its option fields."""

    cls: Any
    prefix: str
    fields: tuple[Field, ...]

    def build(self, given: dict[str, Any]) -> Any:
        """The group, of the values given for its options (taken out of `given`)."""
        return self.cls(**{f.name: f.value(given.pop(self.prefix + f.name)) for f in self.fields})


def grouped(command: F) -> F:
    """`command` with each group or form parameter spread into its options, in order (a panel reads as its group
    is written); typer reads the signature this returns."""
    hints = typing.get_type_hints(command, include_extras=True)
    params: list[inspect.Parameter] = []
    groups: dict[str, _Group] = {}  # a group parameter's
    forms: dict[str, tuple[Any, dict[str, _Group]]] = {}  # a form parameter's class and its groups, by field
    for p in inspect.signature(command).parameters.values():
        hint = hints.get(p.name, p.annotation)
        if is_group(hint):
            groups[p.name] = _group(hint, p.name)
            params += _params(groups[p.name])
        elif _parts(hint):
            forms[p.name] = (hint, {n: _group(g, f"{p.name}{SEP}{n}") for n, g in _parts(hint).items()})
            params += [q for g in forms[p.name][1].values() for q in _params(g)]
        else:
            params.append(p.replace(annotation=hint, kind=KW))

    @functools.wraps(command)
    def call(**given: Any) -> Any:
        for name, group in groups.items():
            given[name] = group.build(given)
        for name, (form, parts) in forms.items():
            given[name] = form(**{n: g.build(given) for n, g in parts.items()})
        return command(**given)

    call.__signature__ = inspect.signature(command).replace(parameters=params)  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in params}
    del call.__wrapped__  # typer reads the signature above, not the command's
    return typing.cast(F, call)


def _parts(hint: Any) -> dict[str, Any]:
    """A form's groups, by field name ({}: not a form). A group is imported where the form is written; a field
    whose type is named for the type checker alone is none."""
    if not (isinstance(hint, type) and dataclasses.is_dataclass(hint)):
        return {}
    names = vars(sys.modules[hint.__module__])
    out = {}
    for f in dataclasses.fields(hint):
        kind = names.get(f.type) if isinstance(f.type, str) else f.type
        if is_group(kind):
            out[f.name] = kind
    return out


def _group(cls: Any, prefix: str) -> _Group:
    """A group class with its option fields, its parameters named after `prefix`."""
    return _Group(cls, prefix + SEP, tuple(options(cls)))


def _params(group: _Group) -> list[inspect.Parameter]:
    """The typer options of a group's fields, in its panel (hidden, and warned about when used: an old spelling)."""
    out = []
    for f in group.fields:
        old = f.opt.replaced_by
        info = typer.Option(
            f.cli_default,
            *f.opt.names,
            help=f.opt.help or None,
            metavar=f.opt.metavar,
            rich_help_panel=None if old else f.opt.panel or group.cls.PANEL,
            show_default=getattr(group.cls, "DEFAULTS_SHOWN", False),
            hidden=old is not None,
            callback=renamed(f.opt.names[0], old) if old else None,
        )
        out.append(inspect.Parameter(group.prefix + f.name, KW, default=info, annotation=f.cli_type))
    return out
