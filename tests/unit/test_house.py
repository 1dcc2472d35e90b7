"""scripts/house.py's figures on code with known answers."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("house", ROOT / "scripts" / "house.py")
assert _spec and _spec.loader
house = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(house)

CODE = """
def plain(a, b, /, c, *args, d, e=1, **kw): ...
class K:
    def method(self, a, b): ...
    @classmethod
    def made(cls, a): ...
    @staticmethod
    def alone(self_like, a): ...
async def none(): ...
"""


def test_parameters_count_every_kind_but_a_methods_self_or_cls() -> None:
    fns = {f.name: f for f in ast.walk(ast.parse(CODE)) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)}
    got = {name: house.parameters(f) for name, f in fns.items()}
    assert got == {"plain": 7, "method": 2, "made": 1, "alone": 2, "none": 0}


def test_the_figures_name_each_place(tmp_path: Path) -> None:
    pkg = tmp_path / "dltestbed"
    (pkg / "cli").mkdir(parents=True)
    nine = ", ".join(f"p{i}" for i in range(9))
    (pkg / "wide.py").write_text(f"def wide({nine}):\n    import os\n" + "    x = 1\n" * 60)
    (pkg / "cli" / "ok.py").write_text("def ok(a):\n    import os\n")
    figures = house.measure(pkg)
    assert figures["functions with more than 8 parameters"] == ["dltestbed/wide.py:1 wide (9)"]
    assert figures["functions over 60 lines"] == ["dltestbed/wide.py:1 wide (62)"]
    assert figures["imports inside functions outside cli/"] == ["dltestbed/wide.py:2"]
