"""The import rule of ARCHITECTURE in README: each layer imports only the layers below it. Imports are
read with `ast`, those inside functions too (a lazy import keeps start-up fast; it must not hide a
cycle), so a lower layer reaching up fails here, wherever the import is written."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "dltestbed"

# Bottom first. A module may import from its own layer and the ones before it, never after.
LAYERS = (
    "__init__",  # the version
    "errors",
    "catalog",
    "paths",
    "locks",  # file locks for caches two processes may build at once
    "owner",  # this installation's id: the label on what it makes
    "shield",  # cleanups that a second Ctrl-C does not cut short
    "secretenv",  # the controller's secrets, taken out of its environment
    "config",
    "dataset",
    "workload",  # runs on the target: imports only the layers above this line, nothing of the controller
    "inventory",
    "layout",
    "transport",
    "slurm",  # Slurm as a launcher: the bench's allocation and its srun steps
    "results",
    "report",
    "vms",
    "provision",
    "targets",
    "runner",
    "bench",
    "dataplace",
    "prepare",
    "scenarios",
    "lab",
    "cli",
    "__main__",
)


def layer_of(module: str) -> str:
    """The layer of a dotted module name under dltestbed (dltestbed.vms.lifecycle → vms)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def module_name(path: Path, root: Path = PACKAGE) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _is_module(root: Path, name: str) -> bool:
    return (root / name).is_dir() or (root / f"{name}.py").is_file()


def imports(path: Path, root: Path = PACKAGE) -> list[tuple[int, str]]:
    """(line, module) for every dltestbed import in a file, at any depth."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    name = module_name(path, root)
    pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):  # import dltestbed.x.y
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "dltestbed"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            if base.split(".")[0] != "dltestbed":
                continue
            if base == "dltestbed":  # from dltestbed import paths (a module) or __version__ (a name)
                out += [(node.lineno, f"dltestbed.{a.name}" if _is_module(root, a.name) else "dltestbed")
                        for a in node.names]  # fmt: skip
            else:
                out.append((node.lineno, base))
    return out


def violations(root: Path = PACKAGE) -> list[str]:
    """Every import of a higher layer, as 'file:line: layer a imports layer b (module)'."""
    rank = {name: i for i, name in enumerate(LAYERS)}
    out = []
    for path in sorted(root.rglob("*.py")):
        mine = layer_of(module_name(path, root))
        for line, mod in imports(path, root):
            theirs = layer_of(mod)
            if mine not in rank or theirs not in rank:
                out.append(f"{path.relative_to(root.parent)}:{line}: layer of {mod!r} or of this file is not in LAYERS")
            elif rank[theirs] > rank[mine]:
                out.append(f"{path.relative_to(root.parent)}:{line}: {mine} imports {theirs} ({mod})")
    return out


def test_every_layer_imports_only_downward() -> None:
    assert violations() == []


def test_the_rule_catches_an_upward_import_even_inside_a_function(tmp_path: Path) -> None:
    pkg = tmp_path / "dltestbed"
    (pkg / "vms").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "vms" / "__init__.py").write_text("")
    (pkg / "vms" / "lifecycle.py").write_text("def f():\n    from dltestbed.targets.vm import VMTarget\n")
    (pkg / "vms" / "ok.py").write_text("from dltestbed import paths\nfrom . import lifecycle\n")
    (pkg / "workload").mkdir()
    (pkg / "workload" / "x.py").write_text("from ..results import store\nfrom ..errors import E\n")
    assert violations(pkg) == ["dltestbed/vms/lifecycle.py:2: vms imports targets (dltestbed.targets.vm)",
                               "dltestbed/workload/x.py:1: workload imports results (dltestbed.results)"]  # fmt: skip


@pytest.mark.parametrize("layer", LAYERS)
def test_every_layer_exists(layer: str) -> None:
    assert (PACKAGE / layer).is_dir() or (PACKAGE / f"{layer}.py").is_file()
