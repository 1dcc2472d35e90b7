"""The launcher seam: a launcher is its module under orchestrate/launchers/ and a line in its registry. No other module
compares a launcher's name, and no generic type holds a field of one launcher's."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from dltestbed import choices
from dltestbed.orchestrate.launchers import LAUNCHERS
from dltestbed.orchestrate.scenarios.base import Scenario
from dltestbed.targets import Site

PACKAGE = Path(__file__).resolve().parents[2] / "dltestbed"
LAUNCHERS_DIR = PACKAGE / "orchestrate" / "launchers"


def name_comparisons(tree: ast.AST, names: set[str]) -> list[int]:
    """The lines where a launcher's name is compared (==, !=, in, not in; a match case) in a module's tree. Pure."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.MatchValue):
            operands = [node.value]
        else:
            continue
        for o in operands:
            items = o.elts if isinstance(o, ast.Tuple | ast.List | ast.Set) else [o]
            if any(isinstance(i, ast.Constant) and i.value in names for i in items):
                lines.append(node.lineno)
                break
    return lines


def test_the_scan_finds_a_comparison() -> None:
    """The scan below would see a comparison, in each form it looks for."""
    code = 'a = x == "slurm"\nb = "direct" != y\nc = z in ("pbs", "slurm")\nmatch w:\n    case "slurm":\n        pass\n'
    assert name_comparisons(ast.parse(code), {"slurm", "direct"}) == [1, 2, 3, 5]
    assert name_comparisons(ast.parse('d = {"transport": "slurm"}\ne = f("slurm")\n'), {"slurm"}) == []


def test_no_launchers_name_is_compared_outside_its_room() -> None:
    names = set(choices.LAUNCHERS)
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if LAUNCHERS_DIR in path.parents:
            continue
        for line in name_comparisons(ast.parse(path.read_text(encoding="utf-8")), names):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{line}")
    assert not found, f"a launcher's name compared outside orchestrate/launchers/: {found}"


def test_the_registry_is_the_choices_and_each_launcher_answers_the_protocol() -> None:
    assert list(LAUNCHERS) == list(choices.LAUNCHERS)
    for name, cls in LAUNCHERS.items():
        assert cls.name == name
        for member in ("chosen", "given", "on_this_machine", "hosts", "auto_kinds", "check", "seen_gpus", "sites"):
            assert callable(getattr(cls, member, None)), f"{name} lacks {member}"


def test_no_generic_type_names_a_launcher() -> None:
    """A site holds a placement, a scenario asks for machines: neither has a field or method named for one launcher."""
    names = set(choices.LAUNCHERS)
    site_fields = {f.name for f in dataclasses.fields(Site)}
    scenario_members = {m for m in vars(Scenario) if not m.startswith("__")}
    named = [m for m in site_fields | scenario_members for n in names if n in m.lower()]
    assert not named, named
