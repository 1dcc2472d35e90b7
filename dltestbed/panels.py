"""An option declared once. A group is a frozen dataclass with a PANEL: one help panel of a command, and one part
of the library's request. Each field that is an option says so in its type, `Annotated[T, opt("--name", ...)]`,
with its names, metavar and one line of help; its default is the field's. The CLI builds its parameters from the
groups (cli/grouped.py); the library reads the fields. A field without `opt` is the library's alone (a program
sets it; no command line does). Pure data and the standard library: the CLI imports it for `--help`."""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from dltestbed.errors import ConfigError

GROUP_HELP = "e.g. bare_metal=gpu_nodes; repeatable."  # --group ROLE=GROUP in full: docs/reference.md, "Inventories"

Parse = Callable[[Any, str], Any]  # the command line's value, and the option's name (for a message), to the field's


@dataclass(frozen=True)
class Opt:
    """How a group's field is given on the command line."""

    names: tuple[str, ...]
    help: str
    metavar: str | None = None
    cli: Any = None  # the type the command line reads, where it is not the field's (a comma-separated list: str)
    parse: Parse | None = None  # the command line's value to the field's, where they differ
    given: Any = ...  # the command line's default, where it is not the field's (None: not given); ...: the field's
    replaced_by: str | None = None  # an old spelling, hidden, that warns when used: what to write instead
    panel: str | None = None  # a panel of the command's own, where not the group's (an option the library has not)


def opt(
    *names: str,
    help: str,
    metavar: str | None = None,
    cli: Any = None,
    parse: Parse | None = None,
    given: Any = ...,
    replaced_by: str | None = None,
    panel: str | None = None,
) -> Opt:
    """A field's command-line option: its names (the long one first), one line of help, and, where the command
    line reads another type than the field holds, that type, its default and how it becomes the field's; an old
    spelling names what replaces it."""
    return Opt(names, help, metavar, cli, parse, given, replaced_by, panel)


class Group(Protocol):
    """A frozen dataclass whose option fields make one help panel."""

    PANEL: ClassVar[str | None]
    DEFAULTS_SHOWN: ClassVar[bool]  # optional: "[default: …]" under each option's help (where it has one)
    __dataclass_fields__: ClassVar[dict[str, Any]]


@dataclass(frozen=True)
class Field:
    """One option of a group: the field's name, its type (Annotated's first argument), default and Opt."""

    name: str
    type: Any
    default: Any
    opt: Opt

    @property
    def cli_type(self) -> Any:
        """What the command line reads."""
        return self.opt.cli if self.opt.cli is not None else self.type

    @property
    def cli_default(self) -> Any:
        """The command line's default."""
        return self.default if self.opt.given is ... else self.opt.given

    def value(self, given: Any) -> Any:
        """The field's value for what the command line was given."""
        return self.opt.parse(given, self.opt.names[0]) if self.opt.parse is not None else given


def options(group: type[Group]) -> Iterator[Field]:
    """A group's option fields, in their order (the panel's)."""
    hints = typing.get_type_hints(group, include_extras=True)
    for f in dataclasses.fields(group):
        hint = hints[f.name]
        marks = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, Opt)]
        if not marks:
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = ...  # required
        yield Field(f.name, typing.get_args(hint)[0], default, marks[0])


def given(group: Any) -> list[str]:
    """The options of a group (an instance) that hold other than their default, by their long names, in order."""
    return [f.opt.names[0] for f in options(type(group)) if getattr(group, f.name) != f.default]


def flags(group: Any) -> dict[str, str]:
    """A group's (a class) option fields' long names, by field name."""
    return {f.name: f.opt.names[0] for f in options(group)}


def is_group(hint: Any) -> bool:
    """Whether an annotation is a group (a dataclass with a PANEL; None: the command's Options panel)."""
    return isinstance(hint, type) and dataclasses.is_dataclass(hint) and hasattr(hint, "PANEL")


# how a value the command line reads becomes a field's (each a Parse)


def seconds(text: str | None, option: str = "--hold") -> float | None:
    """A duration such as 90s, 30m or 4h (a bare number: seconds; None: not given), or one line that says how to
    write it."""
    if text is None:
        return None
    units = {"s": 1.0, "m": 60.0, "h": 3600.0}
    t = text.strip().lower()
    unit = units.get(t[-1:])
    number = t[:-1] if unit is not None else t
    try:
        value = float(number) * (unit or 1.0)
    except ValueError:
        raise ConfigError(f"{option} {text!r}: give a duration such as 90s, 30m or 4h") from None
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{option} {text!r}: must be more than 0, and finite")
    return value


def comma_list(text: str | None, option: str) -> tuple[str, ...] | None:
    """A comma-separated option's items (None: not given); an empty item is refused (`bm,,cbm`)."""
    if text is None:
        return None
    items = tuple(p.strip() for p in text.split(","))
    if not all(items):
        raise ConfigError(f"{option}: a comma-separated list with no empty item (got {text!r})")
    return items


def comma_tuple(text: str | None, option: str) -> tuple[str, ...]:
    """`comma_list`, with nothing given an empty tuple."""
    return comma_list(text, option) or ()


def repeated(values: list[str] | None, option: str) -> tuple[str, ...]:
    """A repeatable option's values, in order (none: an empty tuple)."""
    return tuple(values or ())
