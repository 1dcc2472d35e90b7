"""The README is a quick start, and every `dltestbed` command in it and under docs/ still parses with
today's options, in today's spellings (no deprecation line). Every relative link between the docs leads
to a file, and to a heading there when it names one; bench/README.md names every script in bench/."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINKED = [*DOCS, *(ROOT / d / "README.md" for d in ("bench", "vm-images", "reports", "inventory"))]
README_MAX_LINES = 150
CUT = {"|", "&&", "||", ";", ">", "2>", ">>", "&"}


def commands(text: str) -> list[list[str]]:
    """The argument lists of every `dltestbed ...` line in the text's shell blocks (continuations joined,
    a comment, pipe or redirection ends it; `…` and <placeholders> are values like any other)."""
    out = []
    for block in re.findall(r"```(?:sh|bash|console)\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip().removeprefix("$ ").removeprefix("# ")
            try:
                words = shlex.split(line, comments=True)
            except ValueError:  # an apostrophe in prose: plain words
                words = line.split()
            while words and "=" in words[0] and not words[0].startswith("-"):
                words = words[1:]  # VAR=value before the command
            starts = [i for i, w in enumerate(words) if w == "dltestbed" or w.endswith("/bin/dltestbed")]
            for i in starts:
                args = []
                for w in words[i + 1 :]:
                    if w in CUT:
                        break
                    args.append(w)
                out.append(args)
    return out


def parse(args: list[str]) -> None:
    """Parse `dltestbed ARGS` as the CLI would, running nothing: a bad option or value raises."""
    from typer.main import get_command

    from dltestbed.cli import app
    from dltestbed.cli.helpstyle import tidy

    cmd = get_command(app)
    tidy(cmd)
    ctx = cmd.make_context("dltestbed", list(args))
    while getattr(cmd, "commands", None):
        rest = [*ctx._protected_args, *ctx.args]
        if not rest:
            return
        name, sub, rest = cmd.resolve_command(ctx, rest)
        assert sub is not None, f"no command {name!r}"
        ctx = sub.make_context(name, rest, parent=ctx)
        cmd = sub


def test_the_readme_is_a_quick_start() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) < README_MAX_LINES
    assert "docs/reference.md" in text and "docs/bench.md" in text


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_command_in_the_docs_parses_in_todays_spelling(doc: Path, capsys: pytest.CaptureFixture[str]) -> None:
    found = commands(doc.read_text(encoding="utf-8"))
    assert found or doc.name == "bench.md", f"{doc.name}: no dltestbed command found"
    for args in found:
        if "--help" in args or "-h" in args:
            continue
        try:
            parse(args)
        except Exception as exc:  # the message names the command that no longer parses
            pytest.fail(f"{doc.name}: `dltestbed {' '.join(args)}` does not parse: {exc}")
        warned = capsys.readouterr().err
        assert "deprecated" not in warned, f"{doc.name}: `dltestbed {' '.join(args)}`: {warned}"


def test_the_parser_here_refuses_what_the_cli_refuses() -> None:
    parse(["bench", "--targets", "bm", "--repeat", "2"])
    for bad in (["bench", "--no-such-option"], ["bench", "--device", "tpu"], ["lab", "nope"]):
        with pytest.raises(Exception):  # noqa: B017 — click's own usage errors
            parse(bad)


def test_bench_md_names_every_visible_option_of_bench() -> None:
    text = (ROOT / "docs" / "bench.md").read_text(encoding="utf-8")
    from typer.main import get_command

    from dltestbed.cli import app

    bench = get_command(app).commands["bench"]  # type: ignore[attr-defined]
    for p in bench.params:
        if getattr(p, "hidden", False) or p.param_type_name != "option":
            continue
        assert f"`{p.opts[0]}" in text, f"docs/bench.md lacks {p.opts[0]}"


def prose(text: str) -> str:
    """The text without its fenced code blocks: a link or heading in one is an example, not the doc's."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def slugs(text: str) -> set[str]:
    """The anchors GitHub gives the headings: lowercase, punctuation dropped, spaces to hyphens, a repeated
    one numbered (-1, -2, ...)."""
    out: set[str] = set()
    for heading in re.findall(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", prose(text), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        n, unique = 0, slug
        while unique in out:
            n += 1
            unique = f"{slug}-{n}"
        out.add(unique)
    return out


def broken(doc: Path, target: str) -> str | None:
    """Why the link `target` in `doc` leads nowhere, or None when it leads to a file (and heading)."""
    path, _, anchor = target.partition("#")
    dest = (doc.parent / path).resolve() if path else doc
    if not dest.exists():
        return f"no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}"
    if anchor and dest.suffix == ".md" and anchor not in slugs(dest.read_text(encoding="utf-8")):
        return f"no heading #{anchor} in {dest.relative_to(ROOT)}"
    return None


def links(text: str) -> list[str]:
    """The targets of the text's relative Markdown links, `[x](path)` and `[x](path#anchor)`."""
    found = re.findall(r"\[[^\]]*\]\(<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\)", prose(text))
    return [t for t in found if not re.match(r"[a-z][a-z0-9+.-]*:", t)]  # https:, mailto: are not ours


@pytest.mark.parametrize("doc", [d for d in LINKED if d.exists()], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_between_the_docs_leads_somewhere(doc: Path) -> None:
    bad = [f"{t}: {why}" for t in links(doc.read_text(encoding="utf-8")) if (why := broken(doc, t))]
    assert not bad, f"{doc.relative_to(ROOT)}: " + "; ".join(bad)


def test_a_link_resolves_from_the_folder_of_its_doc() -> None:
    """docs/reference.md once linked `vm-images/README.md#your-own-image`: docs/vm-images/ does not exist."""
    reference = ROOT / "docs" / "reference.md"
    assert broken(reference, "vm-images/README.md#your-own-image") == "no file docs/vm-images/README.md"
    assert broken(reference, "../vm-images/README.md#your-own-image") is None
    assert broken(reference, "../vm-images/README.md#no-such-heading") == (
        "no heading #no-such-heading in vm-images/README.md"
    )
    assert broken(reference, "#vms-vm-and-containers-in-vms-cvm") is None
    assert slugs("# A: b (c)\n## A: b (c)\n```\n# not a heading\n```\n") == {"a-b-c", "a-b-c-1"}


def test_bench_readme_names_every_script_in_bench() -> None:
    text = (ROOT / "bench" / "README.md").read_text(encoding="utf-8")
    scripts = sorted(p.name for p in (ROOT / "bench").glob("*.py") if not p.name.startswith("_"))
    assert scripts
    missing = [s for s in scripts if f"`{s}`" not in text]
    assert not missing, f"bench/README.md does not list {missing}"


def test_bench_md_names_every_probe() -> None:
    from dltestbed.config import PROBES

    text = (ROOT / "docs" / "bench.md").read_text(encoding="utf-8")
    line = next(x for x in text.splitlines() if x.startswith("- `--probes"))
    missing = [p for p in PROBES if not re.search(rf"\b{p}\b", line)]
    assert not missing, f"docs/bench.md, --probes: no {missing}"


# Tables in docs/reference.md made from the registries: each is written here, from them, and the doc holds a copy;
# a registry that changes (a framework, a kind, a runtime, a board file) fails the test until the copy is pasted.


def _framework_table() -> str:
    """Where each framework runs: a row a kind of target (kinds.KINDS) with what carries a framework there (from
    the kind's capabilities), a column a framework (workload/frameworks); last, whether it runs `--gpus node`."""
    from dltestbed.choices import DEFAULT_FRAMEWORK
    from dltestbed.kinds import KINDS, Kind
    from dltestbed.workload.frameworks import REGISTRY

    def carrier(kind: Kind) -> str:
        if kind.guest_image:
            return "the guest image's container image"
        if kind.in_vm:
            return "the guest image"
        if kind.in_container:
            return "the container image"
        return "the host's venv"

    heads = [f"`{name}` ({cls.label})" for name, cls in REGISTRY.items()]
    rows = [f"| target | the framework is in | {' | '.join(heads)} |", "|---|---|" + "---|" * len(heads)]
    for kind in KINDS.values():
        cells = ["yes, always" if n == DEFAULT_FRAMEWORK else f"yes, with `--framework {n}`" for n in REGISTRY]
        rows.append(f"| `{kind.name}` ({kind.about}) | {carrier(kind)} | {' | '.join(cells)} |")
    node = ["yes" if cls.node_jobs else "no: refused in one line" for cls in REGISTRY.values()]
    rows.append(f"| `--gpus node` (one process over every GPU of a machine) | | {' | '.join(node)} |")
    return "\n".join(rows) + "\n"


def _runtime_table() -> str:
    """The container runtimes (runtimes.RUNTIMES): what each is (its class's docstring), where its image is built."""
    import inspect

    from dltestbed.runtimes import RUNTIMES

    rows = ["| runtime | what it is | its image is built in |", "|---|---|---|"]
    for name, cls in RUNTIMES.items():
        what = (inspect.getdoc(cls) or "").splitlines()[0].removesuffix(".")
        store = f"the `{cls.store}` store, then the user's" if cls.store else "its own store"
        rows.append(f"| `{name}` | {what} | {store} |")
    return "\n".join(rows) + "\n"


def _board_table() -> str:
    """What each shipped board file (dltestbed/boards/) holds: its values from datasheets, and those dltestbed
    measured, with the framework, revision and store of each."""
    from itertools import groupby

    from dltestbed import expected
    from dltestbed.workload.frameworks import REGISTRY

    def names(values: list[expected.Value]) -> str:
        return ", ".join(f"`{v.name}`" for v in values)

    def by(v: expected.Value) -> tuple[str, int]:
        assert v.measured is not None
        return v.measured.framework, v.measured.revision

    rows = ["| file | board | from datasheets | measured by dltestbed's probes and models |", "|---|---|---|---|"]
    for board in expected.shipped():
        values = list(board.values.values())
        sheet = [v for v in values if v.source.startswith("datasheet: ")]
        measured = [v for v in values if v.measured is not None]
        parts = [
            f"{names(list(group))} ({REGISTRY[fw].label}, revision {revision})"
            for (fw, revision), group in groupby(measured, key=by)
        ]
        stores = sorted({v.measured.store for v in measured if v.measured})
        parts += [f"from `{store}`" for store in stores]
        rows.append(f"| `{board.key}.toml` | {board.board} | {names(sheet) or 'none'} | {'; '.join(parts) or 'none'} |")
    return "\n".join(rows) + "\n"


GENERATED = {"frameworks": _framework_table, "runtimes": _runtime_table, "boards": _board_table}


@pytest.mark.parametrize("name", GENERATED)
def test_the_references_generated_tables_match_their_registries(name: str) -> None:
    """docs/reference.md holds each table exactly as made from its registry here (paste the one printed)."""
    table = GENERATED[name]()
    text = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    assert table in text, f"docs/reference.md: the {name} table differs from its registry's; it is now:\n\n{table}"


FRAMEWORKS_TABLE = "reference.md#where-each-framework-runs"


def restated(text: str) -> list[str]:
    """The clauses of a doc's prose (split at `. ` and `; `) that say where a framework runs: a framework named
    (workload/frameworks: its name or label) beside two layers or more (a kind's name, bare metal, a container,
    the guest image) or all of them ("every layer", "all four layers")."""
    from dltestbed.kinds import KINDS
    from dltestbed.workload.frameworks import REGISTRY

    framework = re.compile(
        r"\b(" + "|".join(re.escape(w) for n, c in REGISTRY.items() for w in (n, c.label)) + r")\b", re.I
    )
    layers = [*KINDS, "bare metal", "containers?", "guest images?"]
    every = re.compile(r"\b(every|all|each) (of the )?(four )?(layers|kinds of targets?|targets? kinds?)\b", re.I)
    out = []
    for clause in re.split(r"(?<=[.;])\s+", " ".join(prose(text).split())):
        if not framework.search(clause):
            continue
        named = {w for w in layers if re.search(rf"(?<![\w-]){w}(?![\w-])", clause, re.I)}
        if len(named) >= 2 or every.search(clause):
            out.append(clause)
    return out


def test_restated_finds_a_sentence_that_says_where_a_framework_runs() -> None:
    """The README once said PyTorch runs "on all four layers (bm, cbm, vm, cvm)" while the reference said "not yet:
    VMs"; docs/bench.md "PyTorch runs on every layer"."""
    assert restated("PyTorch runs on every layer: on vm and cvm from a guest image.")
    assert restated("The images carry PyTorch: it runs on all four layers (bm, cbm, vm, cvm).")
    assert restated("The guest image carries TensorFlow only, the container image PyTorch too.")
    assert not restated("PyTorch is installed with `provision --framework pytorch`. It runs on bm and cbm.")
    assert not restated("```sh\n# PyTorch on bm and cbm\n```\n")


@pytest.mark.parametrize("doc", [ROOT / "README.md", ROOT / "docs" / "bench.md"], ids=lambda p: p.name)
def test_the_readme_and_bench_md_link_to_where_frameworks_run_instead_of_saying_it(doc: Path) -> None:
    """Where each framework runs is said once, in docs/reference.md's table made from the registries: the README
    and docs/bench.md link to it, and no sentence of theirs names a framework with the layers it runs on."""
    text = doc.read_text(encoding="utf-8")
    assert FRAMEWORKS_TABLE in text, f"{doc.name}: no link to docs/{FRAMEWORKS_TABLE}"
    assert not restated(text), f"{doc.name} says where a framework runs (link to the table instead): {restated(text)}"
