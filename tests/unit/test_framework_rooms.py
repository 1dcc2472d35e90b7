"""Each framework is whole in its room (workload/frameworks/): no code outside it branches on a framework's name
or keeps a table per framework. What the report, drift and the fingerprint need of a framework is declared by
its registered class and read from the registry. Names in messages, hints and docs are words, and stay."""

from __future__ import annotations

import ast
from pathlib import Path

from dltestbed.workload.frameworks import REGISTRY

PACKAGE = Path(__file__).resolve().parents[2] / "dltestbed"
ROOM = PACKAGE / "workload" / "frameworks"
SPELLED = PACKAGE / "choices.py"  # where each framework's name is spelled once (its Literal)


def _names() -> set[str]:
    """Every word a framework's class declares as data: its name, version key, distributions, imports, facts."""
    out: set[str] = set()
    for fw in REGISTRY.values():
        out |= {fw.name, fw.version_key, fw.package_fact, *fw.distributions, *fw.imports}
        out |= {*fw.stack_facts, *fw.build_facts}
    return out


def _uses(tree: ast.AST, names: set[str]) -> list[tuple[int, str]]:
    """Where a framework's word is compared, matched, used as a key or an index, or listed in a literal table."""

    def named(node: ast.AST | None) -> bool:
        return isinstance(node, ast.Constant) and node.value in names

    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            items = [e for s in sides if isinstance(s, ast.Tuple | ast.List | ast.Set) for e in s.elts]
            found += [(node.lineno, "compared") for c in [*sides, *items] if named(c)]
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            found += [(node.lineno, "listed") for e in node.elts if named(e)]
        elif isinstance(node, ast.Dict):
            found += [(node.lineno, "a key") for k in node.keys if named(k)]
        elif isinstance(node, ast.Subscript) and named(node.slice):
            found += [(node.lineno, "an index")]
        elif isinstance(node, ast.MatchValue) and named(node.value):
            found += [(node.lineno, "matched")]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            found += [(node.lineno, "a key") for a in node.args[:1] if named(a)]
    return found


def test_no_code_outside_the_frameworks_rooms_branches_on_a_framework() -> None:
    names = _names()
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if ROOM in path.parents or path == SPELLED:
            continue
        found += [
            f"{path.relative_to(PACKAGE.parent)}:{n} {how}" for n, how in _uses(ast.parse(path.read_text()), names)
        ]
    assert not found, "a framework's word outside workload/frameworks/ (read it from the registry):\n" + "\n".join(
        found
    )


def test_the_scan_finds_each_kind_of_use() -> None:
    code = """
if fw == "pytorch": pass
table = {"tensorflow": 1}
keys = ("keras", "x")
v = fp["torch"]
w = fp.get("pytorch_cuda")
match fw:
    case "tensorflow": pass
said = f"{fw} is not TensorFlow"  # words in a message stay
"""
    found = [how for _, how in _uses(ast.parse(code), _names())]
    assert found == ["compared", "a key", "listed", "an index", "a key", "matched"]
