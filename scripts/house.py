"""The house's size in the figures issues 28 and 58 track: long functions, functions with many parameters, long
modules, the markers that stand in for a type checker or a formatter, and imports inside functions outside cli/.

    .venv/bin/python scripts/house.py [--list]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "dltestbed"


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _length(node: ast.AST) -> int:
    return (node.end_lineno or node.lineno) - node.lineno + 1  #


MANY = 8  # a function with more parameters than this takes them as a group (issue 58)


def parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's parameters, *args and **kwargs each one, not counting a method's self or cls."""
    a = fn.args
    named = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    if named and named[0].arg in ("self", "cls"):
        named = named[1:]
    return len(named) + (a.vararg is not None) + (a.kwarg is not None)


def measure(root: Path = PACKAGE) -> dict[str, list[str]]:
    """Each figure's places, by name."""
    out: dict[str, list[str]] = {
        "functions over 60 lines": [],
        f"functions with more than {MANY} parameters": [],
        "modules over 300 lines": [],
        "type: ignore": [],
        "fmt: skip": [],
        "imports inside functions outside cli/": [],
    }
    longest: list[tuple[int, str]] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent)
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        tree = ast.parse(text)
        if len(lines) > 300:
            out["modules over 300 lines"].append(f"{rel} ({len(lines)})")
        for i, line in enumerate(lines, 1):
            for marker in ("type: ignore", "fmt: skip"):
                if f"# {marker}" in line:
                    out[marker].append(f"{rel}:{i}")
        for fn in _functions(tree):
            n = _length(fn)
            longest.append((n, f"{rel}:{fn.lineno} {fn.name} ({n})"))
            if n > 60:
                out["functions over 60 lines"].append(f"{rel}:{fn.lineno} {fn.name} ({n})")
            if (k := parameters(fn)) > MANY:
                out[f"functions with more than {MANY} parameters"].append(f"{rel}:{fn.lineno} {fn.name} ({k})")
            if rel.parts[1] != "cli":
                for node in ast.walk(fn):
                    if isinstance(node, ast.Import | ast.ImportFrom):
                        out["imports inside functions outside cli/"].append(f"{rel}:{node.lineno}")
    out["largest function"] = [max(longest)[1]] if longest else []
    return out


def main(argv: list[str]) -> int:
    figures = measure()
    for name, places in figures.items():
        count = places[0] if name == "largest function" and places else len(places)
        print(f"{name}: {count}")
        if "--list" in argv and name != "largest function":
            print("".join(f"  {p}\n" for p in places), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
