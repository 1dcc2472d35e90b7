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
