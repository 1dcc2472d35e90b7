"""The import rule of ARCHITECTURE in README, as a graph: each unit (a module or package right under
dltestbed) names the units it may import, and nothing else. Imports are read with `ast` at any depth (an
import inside a function must not hide an edge), `importlib.import_module("…")` and `__import__("…")`
included. Inside a unit, modules must not import each other in a circle. The graph is written once, here;
docs/reference.md shows it, and a test holds the two together."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "dltestbed"
README = PACKAGE.parent / "docs" / "reference.md"  # the architecture section holds the graph

# Each unit and the units it may import, bottom first. Nothing else; no edge may close a circle.
ALLOWED: dict[str, tuple[str, ...]] = {
    "__init__": (),  # the version
    "errors": (),
    "catalog": (),
    "choices": (),
    "hints": (),  # the whole commands a message tells the user to run
    "paths": (),
    "locks": ("errors",),
    "owner": ("locks", "paths"),
    "shield": (),
    "deprecation": (),  # old spellings: the line that says what replaces one
    "secretenv": (),
    "users": ("errors", "secretenv"),  # dropping a command to an unprivileged user (--as-user)
    "config": ("catalog", "choices", "errors"),
    "dataset": ("errors",),
    "sizes": ("deprecation", "errors"),
    "panels": ("errors",),  # an option declared once: a group's field carries its names and help
    "expected": ("choices", "errors"),  # each board's expected values (data), for acceptance
    "evidence": ("errors",),  # an acceptance's evidence pack: its manifest and SSH signature
    # runs on the target: nothing of the controller
    "workload": ("catalog", "choices", "config", "dataset", "errors", "hints"),
    "hostvars": ("errors",),  # each host's variables as Ansible reads them, for inventory
    "inventory": ("errors", "hostvars"),
    "kinds": (),
    "runtimes": ("choices", "errors", "paths", "secretenv", "users"),
    "layout": ("choices", "errors", "inventory", "kinds"),
    "transport": ("errors", "hints", "inventory", "paths", "secretenv"),
    "slurm": ("errors", "transport"),
    # what acceptance does about a node: Slurm's drain and resume, Kubernetes' taint and label, a site's hook
    "remedy": ("errors", "transport"),
    "results": ("errors", "locks", "paths", "secretenv", "workload"),
    "report": ("__init__", "config", "errors", "expected", "kinds", "results", "workload"),
    # what each command asks of the library, in groups (pure data: read for --help)
    "requests": ("choices", "errors", "panels", "report", "results", "sizes"),
    "vms": ("choices", "config", "errors", "hints", "inventory", "locks", "owner", "paths", "shield", "transport"),
    "provision": (
        "__init__",
        "choices",
        "errors",
        "hints",
        "inventory",
        "kinds",
        "layout",
        "locks",
        "paths",
        "requests",
        "results",
        "runtimes",
        "secretenv",
        "transport",
        "users",
        "vms",
        "workload",
    ),
    "targets": (
        "config",
        "errors",
        "inventory",
        "kinds",
        "owner",
        "results",
        "runtimes",
        "shield",
        "sizes",
        "slurm",
        "transport",
        "users",
        "vms",
    ),
    "runner": ("config", "errors", "results", "shield", "targets", "workload"),
    "orchestrate": (  # plan, checks and preparation, scenarios, launchers: the bench as a library call
        "catalog",
        "choices",
        "config",
        "dataset",
        "errors",
        "hints",
        "inventory",
        "kinds",
        "owner",
        "panels",
        "paths",
        "provision",
        "report",
        "requests",
        "results",
        "runner",
        "runtimes",
        "shield",
        "slurm",
        "targets",
        "transport",
        "users",
        "vms",
        "workload",
    ),
    "lab": ("config", "errors", "paths", "requests"),
    "accept": (  # acceptance as a library call: stages of benches, the verdicts, the evidence pack, the remedies
        "__init__",
        "choices",
        "config",
        "errors",
        "evidence",
        "expected",
        "hints",
        "inventory",
        "orchestrate",
        "provision",
        "remedy",
        "report",
        "requests",
        "results",
        "workload",
    ),
    "cli": (
        "__init__",
        "accept",
        "choices",
        "dataset",
        "deprecation",
        "errors",
        "inventory",
        "lab",
        "orchestrate",
        "owner",
        "panels",
        "paths",
        "provision",
        "report",
        "requests",
        "results",
        "runtimes",
        "secretenv",
        "shield",
        "sizes",
        "transport",
        "vms",
        "workload",
    ),
    "__main__": ("cli",),
}

DYNAMIC = "<a name the rule cannot read>"


def unit_of(module: str) -> str:
    """The unit of a dotted module name under dltestbed (dltestbed.vms.lifecycle → vms)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def module_name(path: Path, root: Path = PACKAGE) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _is_module(root: Path, dotted: str) -> bool:
    """Whether dltestbed.a.b names a module or package under root (not a name inside one)."""
    rel = Path(*dotted.split(".")[1:])
    return (root / rel).is_dir() or (root / rel).with_suffix(".py").is_file()


def _dynamic(node: ast.Call) -> bool:
    """import_module(…), importlib.import_module(…) or __import__(…)."""
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return name in ("import_module", "__import__")


def _imports(tree: ast.AST, pkg: str, root: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):  # import dltestbed.x.y
            yield from ((node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "dltestbed")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            if base.split(".")[0] == "dltestbed":  # from a.b import c: the module a.b.c where c is one
                yield from (
                    (node.lineno, f"{base}.{a.name}" if _is_module(root, f"{base}.{a.name}") else base)
                    for a in node.names
                )
        elif isinstance(node, ast.Call) and _dynamic(node):
            arg = node.args[0] if node.args else None
            if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                yield node.lineno, DYNAMIC
            elif arg.value.split(".")[0] == "dltestbed":
                yield node.lineno, arg.value


def imports(path: Path, root: Path = PACKAGE) -> list[tuple[int, str]]:
    """(line, module) for every dltestbed import in a file, at any depth, dynamic ones included."""
    name = module_name(path, root)
    pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    return list(_imports(ast.parse(path.read_text(encoding="utf-8")), pkg, root))


def violations(root: Path = PACKAGE, allowed: Mapping[str, tuple[str, ...]] = ALLOWED) -> list[str]:
    """Every import the graph does not allow, as 'file:line: unit a imports unit b (module)'."""
    out = []
    for path in sorted(root.rglob("*.py")):
        where, mine = path.relative_to(root.parent), unit_of(module_name(path, root))
        for line, mod in imports(path, root):
            theirs = unit_of(mod) if mod != DYNAMIC else DYNAMIC
            if mine not in allowed:
                out.append(f"{where}:{line}: {mine} is not in the graph")
            elif theirs == DYNAMIC:
                out.append(f"{where}:{line}: {mine} imports {DYNAMIC}")
            elif theirs != mine and theirs not in allowed[mine]:
                out.append(f"{where}:{line}: {mine} imports {theirs} ({mod})")
    return out


def _circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = stack[stack.index(v) :]
            del stack[stack.index(v) :]
            if len(part) > 1:
                out.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def circles(root: Path = PACKAGE) -> list[list[str]]:
    """Modules of one unit that import each other in a circle (at any depth in a file)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        me = module_name(path, root)
        graph[me] = {m for _, m in imports(path, root) if m != me and m != DYNAMIC and unit_of(m) == unit_of(me)}
    return _circles(graph)


def render(allowed: Mapping[str, tuple[str, ...]] = ALLOWED) -> str:
    """The graph as README shows it: a line a unit, bottom first."""
    width = max(map(len, allowed))
    return "\n".join(f"{u:<{width}} → {', '.join(deps) or '(nothing)'}" for u, deps in allowed.items())


def test_every_import_is_an_edge_of_the_graph() -> None:
    assert violations() == []


def test_no_circle_inside_a_unit() -> None:
    assert circles() == []


def test_the_graph_itself_has_no_circle_and_names_only_units() -> None:
    assert _circles({u: set(deps) for u, deps in ALLOWED.items()}) == []
    assert {d for deps in ALLOWED.values() for d in deps} <= set(ALLOWED)


@pytest.mark.parametrize("unit", ALLOWED)
def test_every_unit_exists(unit: str) -> None:
    assert (PACKAGE / unit).is_dir() or (PACKAGE / f"{unit}.py").is_file()


def test_every_unit_is_in_the_graph() -> None:
    units = {p.stem for p in PACKAGE.glob("*.py")} | {
        p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()
    }
    assert units == set(ALLOWED)


def test_readme_shows_the_graph() -> None:
    block = re.search(r"```text layers\n(.*?)\n```", README.read_text(encoding="utf-8"), re.S)
    assert block and block.group(1) == render()


def _plant(tmp_path: Path, files: Mapping[str, str]) -> Path:
    pkg = tmp_path / "dltestbed"
    for rel, text in {"__init__.py": "", **files}.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    return pkg


PLANT_GRAPH = {
    "__init__": (),
    "errors": (),
    "workload": ("errors",),
    "results": ("workload",),
    "vms": ("errors",),
    "targets": ("vms",),
}


def test_the_rule_catches_an_edge_the_graph_lacks_even_inside_a_function(tmp_path: Path) -> None:
    pkg = _plant(
        tmp_path,
        {
            "vms/__init__.py": "",
            "targets/__init__.py": "",
            "targets/vm.py": "",
            "vms/lifecycle.py": "def f():\n    from dltestbed.targets.vm import VMTarget\n",
            "vms/ok.py": "from dltestbed import errors\nfrom . import lifecycle\n",
            "errors.py": "",
            "results/__init__.py": "",
            "workload/__init__.py": "",
            "workload/x.py": "from ..results import store\nfrom ..errors import E\n",
        },
    )
    assert violations(pkg, PLANT_GRAPH) == [
        "dltestbed/vms/lifecycle.py:2: vms imports targets (dltestbed.targets.vm)",
        "dltestbed/workload/x.py:1: workload imports results (dltestbed.results)",
    ]


def test_the_rule_catches_importlib_upward_and_a_name_it_cannot_read(tmp_path: Path) -> None:
    pkg = _plant(
        tmp_path,
        {
            "errors.py": "",
            "results/__init__.py": "",
            "workload/__init__.py": "",
            "workload/a.py": "import importlib\nm = importlib.import_module('dltestbed.results')\n",
            "workload/b.py": "def f(n):\n    return __import__(n)\n",
            "workload/c.py": "from importlib import import_module\nimport_module('dltestbed.errors')\n",
        },
    )
    assert violations(pkg, PLANT_GRAPH) == [
        "dltestbed/workload/a.py:2: workload imports results (dltestbed.results)",
        f"dltestbed/workload/b.py:2: workload imports {DYNAMIC}",
    ]


def test_the_rule_catches_a_circle_inside_a_unit(tmp_path: Path) -> None:
    pkg = _plant(
        tmp_path,
        {
            "vms/__init__.py": "from dltestbed.vms.a import x\n",
            "vms/a.py": "def f():\n    from dltestbed.vms import b\n",
            "vms/b.py": "from . import c\n",
            "vms/c.py": "from dltestbed.vms.a import f\n",
            "vms/d.py": "from dltestbed.vms import a\n",
        },
    )
    assert circles(pkg) == [["dltestbed.vms.a", "dltestbed.vms.b", "dltestbed.vms.c"]]


def unexplained_lazy_imports(root: Path = PACKAGE) -> list[str]:
    """Imports inside functions outside cli/ whose run of import lines carries no comment saying why."""
    out = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] == "cli":
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        runs: list[list[ast.stmt]] = []
        for fn in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                for node in ast.walk(fn):
                    if isinstance(node, ast.Import | ast.ImportFrom):
                        if runs and runs[-1][-1].end_lineno == node.lineno - 1:
                            runs[-1].append(node)
                        else:
                            runs.append([node])
        for run in runs:
            said = [lines[i - 1] for n in run for i in range(n.lineno, (n.end_lineno or n.lineno) + 1)]
            above = lines[run[0].lineno - 2].strip()
            if not any("#" in s for s in said) and not above.startswith("#"):
                out.append(f"{path.relative_to(root.parent)}:{run[0].lineno}")
    return sorted(set(out))


def test_an_import_inside_a_function_outside_cli_says_why() -> None:
    assert unexplained_lazy_imports() == []


def test_the_lazy_rule_catches_a_silent_import(tmp_path: Path) -> None:
    pkg = _plant(
        tmp_path,
        {
            "vms/__init__.py": "",
            "cli/__init__.py": "def f():\n    import json\n",
            "vms/a.py": "def f():\n    import re\n    import os\n\n\ndef g():\n"
            "    import libvirt  # only the commands that need libvirt load it\n"
            "    # tensorflow: seconds to import\n    import tensorflow\n",
        },
    )
    assert unexplained_lazy_imports(pkg) == ["dltestbed/vms/a.py:2"]
