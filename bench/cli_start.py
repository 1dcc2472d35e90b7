"""CLI start: wall time of `dltestbed --help` against (1) a bare typer app with the same commands,
options and help texts, generated here from dltestbed's own command tree, and (2) `python -c pass`.
Medians of interleaved runs, all in one run of this script. Goal: dltestbed ≤ 1.2 × the bare typer app.

The bare app is written to a temporary file: typer, the same Typer() settings, one function per
command with the same options (names, defaults, help, panels) and docstrings, no dltestbed import."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env={**os.environ, "COLUMNS": "100"}
    )
    return time.perf_counter() - t0


def _type(p: Any, enums: list[str]) -> str:
    """The annotation the bare app gives a parameter: the same type as dltestbed's (a choice is a Literal of
    the same names; an enum, a StrEnum with the same values)."""
    import enum
    import typing

    annotation = p.type_descriptor.annotation
    args = typing.get_args(annotation)
    base = args[0] if args and typing.get_origin(annotation) is list else annotation
    if typing.get_origin(base) is typing.Literal:
        return f"Literal[{', '.join(repr(a) for a in typing.get_args(base))}]"
    if isinstance(base, type) and issubclass(base, enum.Enum):
        name = f"E{len(enums)}"
        members = "".join(f"\n    m{i} = {m.value!r}" for i, m in enumerate(base))
        enums.append(f"class {name}(StrEnum):{members}\n")
        return name
    return {int: "int", float: "float", Path: "Path", bool: "bool"}.get(base, "str")


def _param(p: Any, enums: list[str]) -> str:
    """A function parameter `name: type = typer.Option(...)` (or Argument) for a click parameter."""
    kind = _type(p, enums)
    if p.param_type_name == "argument":
        return f"{p.name}: list[{kind}] | None = typer.Argument(None, help={getattr(p, 'help', None)!r})"
    decls = [*p.opts, *p.secondary_opts]
    default = p.default if p.default is not None and not callable(p.default) else None
    if p.secondary_opts:
        decls = ["/".join([*p.opts, *p.secondary_opts])]
    kwargs = [repr(d) for d in decls]
    if p.help:
        kwargs.append(f"help={p.help!r}")
    panel = getattr(p, "rich_help_panel", None)
    if panel:
        kwargs.append(f"rich_help_panel={panel!r}")
    if kind == "bool":
        return f"{p.name}: bool = typer.Option({bool(default)!r}, {', '.join(kwargs)})"
    if getattr(p, "multiple", False):
        return f"{p.name}: list[{kind}] | None = typer.Option(None, {', '.join(kwargs)})"
    if p.required:
        return f"{p.name}: {kind} = typer.Option(..., {', '.join(kwargs)})"
    if default is None:
        return f"{p.name}: {kind} | None = typer.Option(None, {', '.join(kwargs)})"
    value = default.value if hasattr(default, "value") else default
    value_text = f"{kind}({str(value)!r})" if kind.startswith("E") or kind == "Path" else repr(value)
    return f"{p.name}: {kind} = typer.Option({value_text}, {', '.join(kwargs)})"


def _command(cmd: Any, fn: str, enums: list[str]) -> str:
    params = [_param(p, enums) for p in cmd.params if p.name != "help"]
    lines = [f"def {fn}(", *[f"    {text}," for text in params], ") -> None:"]
    lines.append(f"    {(cmd.help or '').strip()!r}")
    return "\n".join(lines)


def bare_app_source() -> str:
    """Python source of a typer app with dltestbed's commands, options and help texts."""
    from typer.main import get_command

    from dltestbed.cli import app

    root = get_command(app)
    enums: list[str] = []
    out = [
        "from enum import StrEnum",
        "from pathlib import Path",
        "from typing import Literal",
        "",
        "import typer",
        "",
        f"app = typer.Typer(name='dltestbed', help={root.help!r}, no_args_is_help=True, add_completion=False,",
        "                  pretty_exceptions_enable=False,",
        "                  context_settings={'help_option_names': ['-h', '--help']})",
        "",
        "@app.callback()",
        "def root(",
        "    version: bool = typer.Option(False, '--version', is_eager=True, help='Print the version.'),",
        ") -> None:",
        f"    {(root.help or '').strip()!r}",
        "",
    ]
    n = 0
    for name, cmd in root.commands.items():  # type: ignore[attr-defined]
        n += 1
        if hasattr(cmd, "commands"):  # a group (typer's own copy of click has no click.Group)
            group = f"sub{n}"
            out += [
                f"{group} = typer.Typer(help={cmd.help!r}, no_args_is_help=True)",
                f"app.add_typer({group}, name={name!r})",
            ]
            for sname, scmd in cmd.commands.items():
                n += 1
                out += [f"@{group}.command({sname!r})", _command(scmd, f"c{n}", enums), ""]
        else:
            out += [f"@app.command({name!r})", _command(cmd, f"c{n}", enums), ""]
    out += ["if __name__ == '__main__':", "    app()"]
    head, body = out[:4], out[4:]
    return "\n".join([*head, *enums, *body]) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--runs", type=int, default=30)
    a = p.parse_args()
    script = Path(sys.executable).parent / "dltestbed"
    cli = [str(script), "--help"] if script.exists() else [sys.executable, "-m", "dltestbed", "--help"]
    base = [sys.executable, "-c", "pass"]
    with tempfile.TemporaryDirectory() as tmp:
        bare_file = Path(tmp) / "bare_typer_app.py"
        bare_file.write_text(bare_app_source())
        bare = [sys.executable, str(bare_file), "--help"]
        for cmd in (cli, bare, base):
            wall(cmd)  # warm the page cache; the bare app must run
        times: dict[str, list[float]] = {"cli": [], "bare": [], "base": []}
        for _ in range(a.runs):
            for key, cmd in (("cli", cli), ("bare", bare), ("base", base)):
                times[key].append(wall(cmd))
    c, t, b = (statistics.median(times[k]) for k in ("cli", "bare", "base"))
    print(
        f"{' '.join(cli)}: median {c * 1000:.1f} ms   bare typer app, same commands and help: median "
        f"{t * 1000:.1f} ms   python -c pass: median {b * 1000:.1f} ms   ({a.runs} runs each, interleaved)"
    )
    print(f"dltestbed / bare typer: {c / t:.2f} (goal <= 1.2) {'MET' if c / t <= 1.2 else 'NOT MET'}")
    print(f"dltestbed / python -c pass: {c / b:.2f}   bare typer / python -c pass: {t / b:.2f}")


if __name__ == "__main__":
    main()
