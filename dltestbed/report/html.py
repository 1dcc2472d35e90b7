"""The report as one self-contained HTML page: the Markdown report rendered (markdown-it-py, raw HTML
off, so a host name or a failure reason can never become markup), each figure embedded as an SVG data
URI with its title and caption, and a Content-Security-Policy that lets the page load nothing at all
from outside itself. Readable on a phone (tables scroll, figures scale), printable (no figure or table
split across pages)."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from markdown_it import MarkdownIt
from markdown_it.token import Token

if TYPE_CHECKING:  # the figures package loads matplotlib: a page without figures (accept's pack) needs none
    from dltestbed.report.figures.base import Plot

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
FIGURE_SRC = "figure:"  # what the Markdown names an embedded figure by: figure:NAME

STYLE = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", sans-serif; color: #1b1b1b;
       max-width: 64rem; margin: 0 auto; padding: 1rem; overflow-wrap: anywhere; }
h1 { font-size: 1.5rem; margin: 0 0 .25rem; }
h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
header p { margin: .2rem 0; color: #555; }
nav { font-size: .9rem; margin: .75rem 0 1rem; }
nav a { display: inline-block; margin: 0 .9rem .2rem 0; }
.table { overflow-x: auto; margin: .75rem 0; }
table { border-collapse: collapse; font-size: .82rem; font-variant-numeric: tabular-nums; width: max-content; }
th, td { border: 1px solid #ccc; padding: .2rem .45rem; text-align: left; vertical-align: top;
         overflow-wrap: normal; max-width: 22rem; }
th { background: #f3f3f3; }
tbody tr:nth-child(even) { background: #fafafa; }
figure { margin: 1rem 0 1.5rem; }
figure img { display: block; width: 100%; max-width: 46rem; height: auto; border: 1px solid #eee; }
figcaption { font-size: .85rem; color: #444; max-width: 46rem; margin-top: .3rem; }
code { font-size: .9em; }
@media (max-width: 40rem) { body { font-size: 14px; padding: .6rem; } }
@media print {
  body { max-width: none; padding: 0; font-size: 11px; }
  nav { display: none; }
  .table { overflow: visible; }
  table { width: auto; }
  figure, table, tr { break-inside: avoid; }
  h2 { break-after: avoid; }
}
"""


def data_uri(svg: str) -> str:
    """An SVG as a data URI (base64: nothing in it needs escaping)."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")


def _slug(text: str, seen: set[str]) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"
    slug, i = base, 2
    while slug in seen:
        slug, i = f"{base}-{i}", i + 1
    seen.add(slug)
    return slug


def _figure_html(plot: Plot) -> str:
    title = html.escape(plot.title)
    return (
        f'<figure id="fig-{html.escape(plot.name)}" data-figure="{html.escape(plot.name)}">'
        f'<img src="{data_uri(plot.svg)}" alt="{title}">'
        f"<figcaption><strong>{title}.</strong> {html.escape(plot.caption)}</figcaption></figure>\n"
    )


def _blocks(tokens: list[Token], plots: Mapping[str, Plot], toc: list[tuple[str, str]]) -> list[Token]:
    """Paragraphs that hold only a figure:NAME image become <figure> blocks; level-2 headings get ids
    (for the contents line); tables get a scrolling wrapper."""
    out: list[Token] = []
    seen: set[str] = set()
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.type == "paragraph_open" and i + 2 < len(tokens):
            kids = tokens[i + 1].children or []
            if len(kids) == 1 and kids[0].type == "image" and str(kids[0].attrGet("src")).startswith(FIGURE_SRC):
                name = str(kids[0].attrGet("src"))[len(FIGURE_SRC) :]
                if name not in plots:
                    raise KeyError(f"the report names figure {name!r}, which was not drawn")
                block = Token("html_block", "", 0)
                block.content = _figure_html(plots[name])
                out.append(block)
                i += 3
                continue
        if tok.type == "heading_open" and tok.tag == "h2":
            text = tokens[i + 1].content
            slug = _slug(text, seen)
            tok.attrSet("id", slug)
            toc.append((slug, text))
        if tok.type in ("table_open", "table_close"):
            wrap = Token("html_block", "", 0)
            wrap.content = '<div class="table">\n' if tok.type == "table_open" else "</div>\n"
            out += [wrap, tok] if tok.type == "table_open" else [tok, wrap]
            i += 1
            continue
        out.append(tok)
        i += 1
    return out


def document(markdown_text: str, plots: Mapping[str, Plot], title: str, generated: str) -> str:
    """The whole page. markdown_text names figures as ![title](figure:NAME) paragraphs (render.markdown
    with captions off: the caption goes into the figure); the first level-1 heading becomes the header."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(markdown_text)
    if tokens and tokens[0].type == "heading_open" and tokens[0].tag == "h1":
        tokens = tokens[3:]  # the page's own header carries the title
    toc: list[tuple[str, str]] = []
    body = md.renderer.render(_blocks(tokens, plots, toc), md.options, {})
    nav = " ".join(f'<a href="#{slug}">{html.escape(text)}</a>' for slug, text in toc)
    esc = html.escape(title)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="generator" content="dltestbed">
<title>{esc}</title>
<style>{STYLE}</style>
</head>
<body>
<header>
<h1>{esc}</h1>
<p>{html.escape(generated)}</p>
</header>
<nav aria-label="Sections">{nav}</nav>
<main>
{body}</main>
</body>
</html>
"""
