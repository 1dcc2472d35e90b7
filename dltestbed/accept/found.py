"""What each stage of an acceptance found, typed: frozen dataclasses, kept in the state file (state.py) as JSON by
one codec (`encode`, `decode`), so a stage after reads fields, not a dict's keys. The JSON keeps the shape the
state file has had: a pair is a list [node, partner, bench], a stage's batches beside controls sit beside its
own fields; a file written before a field existed reads with that field's default."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

T = TypeVar("T")


class Pair(NamedTuple):
    """A node measured with a partner (the pairs stage: two nodes of the fleet; the second pass: a suspect pair's
    node with a known-good one) in a bench; no partner where no known-good node was there."""

    node: str
    partner: str | None
    bench: str | None


@dataclass(frozen=True)
class Batch:
    """Nodes measured beside the controls in benches of their own (one bench per measure)."""

    nodes: tuple[str, ...] = ()
    benches: tuple[str, ...] = ()


@dataclass(frozen=True)
class Beside:
    """What ran beside known-good controls: the controls, the batches of nodes beside them, and whether a batch's
    nodes ran at the same time (or one after another: --no-parallel)."""

    controls: tuple[str, ...] = ()
    batches: tuple[Batch, ...] = ()
    together: bool = True

    @property
    def benches(self) -> tuple[str, ...]:
        """Every bench of every batch."""
        return tuple(b for batch in self.batches for b in batch.benches)


@dataclass(frozen=True)
class Found:
    """What any stage found: the nodes it left out of the stages after (node → why)."""

    out: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Provisioned(Found):
    provision: str = ""  # the provisioning report's id


@dataclass(frozen=True)
class Facts(Found):
    """Each node's facts (the drift check's) and GPU count, from a light probe; the framework the stages after
    compute with (preflight's)."""

    facts: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    gpus: Mapping[str, int] = field(default_factory=dict)
    framework: str = ""


@dataclass(frozen=True)
class Paired(Found):
    pairs: tuple[Pair, ...] = ()


@dataclass(frozen=True)
class Judged(Found):
    """The first pass judged: each measure's value per node, the nodes whose runs failed (→ why), those to rerun
    beside controls, and the pairs whose measures failed."""

    measures: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    failed: Mapping[str, str] = field(default_factory=dict)
    rerun: tuple[str, ...] = ()
    pairs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Rerun(Found, Beside):
    """The second pass: the suspects rerun beside controls (its benches: `measure`), and a suspect pair's nodes
    each with a known-good node."""

    rerun: tuple[str, ...] = ()
    measure: tuple[str, ...] = ()
    pairs: tuple[Pair, ...] = ()


@dataclass(frozen=True)
class Rounds(Found):
    """Burn-in: each round's benches."""

    rounds: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class Rejoined(Facts, Beside):
    """The nodes left out, tried again once mended (--resume): their facts, those that came back (measured beside
    controls: `measure`), and those slow there, measured beside them again."""

    rejoined: tuple[str, ...] = ()
    measure: tuple[str, ...] = ()
    again: Beside = field(default_factory=Beside)


def encode(value: Any) -> Any:
    """A found value as JSON's types: a dataclass as an object of its fields, a pair or tuple as a list."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [encode(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): encode(v) for k, v in value.items()}
    return value


def decode(cls: type[T], data: Any) -> T:
    """The value of type `cls` that `encode` wrote (or an older state file: a field it lacks takes its default;
    one it does not know is left out)."""
    return typing.cast(T, _decode(cls, data))


def _decode(tp: Any, data: Any) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if data is None or data == "":
            return None if type(None) in args else data
        (inner,) = [a for a in args if a is not type(None)]
        return _decode(inner, data)
    if isinstance(tp, type) and issubclass(tp, tuple) and hasattr(tp, "_fields"):  # a NamedTuple
        hints = typing.get_type_hints(tp)
        return tp(*(_decode(hints[name], v) for name, v in zip(tp._fields, data, strict=False)))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        known = {f.name for f in dataclasses.fields(tp)}
        return tp(**{k: _decode(hints[k], v) for k, v in (data or {}).items() if k in known})
    if origin is tuple:
        return tuple(_decode(args[0], v) for v in data or ())
    if origin in (Mapping, dict, typing.Mapping):
        return {k: _decode(args[1], v) for k, v in (data or {}).items()}
    return data
