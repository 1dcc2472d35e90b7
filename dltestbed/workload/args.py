"""The workload's command line: `--spec SPEC`, the run's spec as JSON (config.spec_json writes it, config.load_spec
validates it with the model the controller built it from), and `--watch-stdin`. No field of the spec is an
option of its own: the spec is defined once, in config.py, and its fields are listed in `--help` from there."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Collection
from pathlib import Path
from typing import NoReturn

from pydantic import BaseModel

from dltestbed.config import ProbeSpec, RunSpec, Spec, WorkloadSpec, load_spec
from dltestbed.errors import ConfigError

USAGE = """run one benchmark, a model's run or the microbenchmarks (a spec whose model is "micro"), and print
JSON-line events on stdout. stdout carries events and nothing else; logs go to stderr. Exit codes: 0 done, 1 the
run failed, 2 bad arguments or data, 130 interrupted (SIGINT or SIGTERM)."""
STDIN = "-"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


def fields_help(kind: type[BaseModel], leave: Collection[str] = ()) -> str:
    """A spec's fields as `--help` lists them, from the model itself: name, description and default (but those
    in `leave`, and those that say nothing)."""
    rows = []
    for name, info in kind.model_fields.items():
        if info.description is None or name in leave:
            continue
        default = " (required)" if info.is_required() else f" (default {json.dumps(info.default)})"
        rows.append(f"  {name:<16} {info.description}{default if info.default is not None else ''}")
    return "\n".join(rows)


def parser() -> argparse.ArgumentParser:
    """The workload's arguments: the spec, and whether to stop when stdin closes."""
    shared = set(RunSpec.model_fields)
    epilog = (
        f"every spec's fields:\n{fields_help(RunSpec)}\n\n"
        f"a model's run (config.WorkloadSpec):\n{fields_help(WorkloadSpec, shared)}\n\n"
        f'the microbenchmarks, model "micro" (config.ProbeSpec):\n{fields_help(ProbeSpec, shared)}\n\n'
        'e.g. --spec \'{"model":"alexnet","steps":5}\' or --spec \'{"model":"micro","probes":["gemm"]}\''
    )
    p = _Parser(
        prog="python -m dltestbed.workload",
        description=USAGE,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--spec",
        metavar="SPEC",
        help="the run's spec as a JSON object: a file, - for stdin, or the object itself ({...}); its fields "
        "are listed below",
    )
    p.add_argument("--schema", action="store_true", help="print the spec's JSON schema (both kinds) and exit")
    p.add_argument(
        "--watch-stdin",
        action="store_true",
        help="stop (as if interrupted) when stdin closes: for runs over SSH, so a lost "
        "controller never leaves a workload behind",
    )
    return p


def schema() -> str:
    """The JSON schema of both kinds of spec, by the word a spec's model holds."""
    return json.dumps({"run": WorkloadSpec.model_json_schema(), "micro": ProbeSpec.model_json_schema()}, indent=1)


def _text(spec: str, watch_stdin: bool) -> str:
    """The JSON of --spec: the object itself, stdin's, or a file's."""
    if spec.lstrip().startswith("{"):
        return spec
    if spec == STDIN:
        if watch_stdin:
            raise ConfigError("--spec - reads stdin, which --watch-stdin watches: give the spec itself or a file")
        return sys.stdin.read()
    try:
        return Path(spec).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--spec {spec}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None


def parse(argv: list[str]) -> tuple[Spec | None, argparse.Namespace]:
    """The validated spec of a command line (None with --schema: no run), and the options that are not part of
    it."""
    ns = parser().parse_args(argv)
    if ns.schema:
        return None, ns
    if ns.spec is None:
        raise ConfigError("--spec SPEC is required: the run's spec as JSON (see --help)")
    return load_spec(_text(ns.spec, ns.watch_stdin)), ns
