"""Look at an HTML report as a person would: Debian's Chromium, headless, driven by Playwright (no
browser download: executable_path), the file opened from disk with every network request refused and
recorded. Used by the browser tier and by the lab test that writes a report from a real bench."""

from __future__ import annotations

import io
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

CHROMIUM = "/usr/bin/chromium"
# As root Chromium needs --no-sandbox; the rest keep it from reaching for Google's services at start.
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
]
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


@dataclass
class FigureSeen:
    """One <figure> as the browser drew it."""

    name: str
    title: str  # the img's alt text
    caption: str
    natural: tuple[int, int]  # the SVG's own size
    box: tuple[float, float]  # its size on the page, CSS px
    ink: float  # share of the figure's screenshot that is not background
    colours: int  # distinct colours in that screenshot
    labels: list[str] = field(default_factory=list)  # every text drawn in the SVG: titles, ticks, legends, notes
    overflow: float = 0.0  # CSS px the farthest text reaches beyond the SVG's own box (0: every text inside)


@dataclass
class PageSeen:
    """What one viewport showed, and what the page tried to do."""

    width: int
    screenshot: Path
    screenshot_size: tuple[int, int]
    scroll_width: int  # the page's width: more than the viewport means sideways scrolling
    text: str = ""  # the page's text as rendered (innerText)
    figures: list[FigureSeen] = field(default_factory=list)
    headings: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # every URL the page asked for besides itself


# An <img>'s SVG drawn inline, out of sight, at its own size: how far its texts (matplotlib's text_N groups, text as
# paths) reach beyond its box, and what they say (matplotlib writes each text's words in a comment beside its paths).
SVG_TEXTS = """i => {
  const bytes = Uint8Array.from(atob(i.src.split(",")[1]), c => c.charCodeAt(0));
  const doc = new DOMParser().parseFromString(new TextDecoder().decode(bytes), "image/svg+xml");
  const box = document.createElement("div");
  box.style.cssText = "position:absolute;left:0;top:0;visibility:hidden";
  const svg = box.appendChild(document.importNode(doc.documentElement, true));
  document.body.appendChild(box);
  const outer = svg.getBoundingClientRect();
  let overflow = 0;
  const labels = [];
  for (const g of svg.querySelectorAll('g[id^="text_"]')) {
    const r = g.getBoundingClientRect();
    if (r.width) overflow = Math.max(overflow, outer.left - r.left, r.right - outer.right);
    for (const n of g.childNodes) if (n.nodeType === Node.COMMENT_NODE) labels.push(n.data.trim());
  }
  box.remove();
  return [overflow, labels];
}"""


def _ink(png: bytes) -> tuple[float, int]:
    px = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).reshape(-1, 3)
    return float((px.min(axis=1) < 235).mean()), len(np.unique(px, axis=0))


def look(html: Path, out_dir: Path, name: str = "report") -> tuple[list[PageSeen], bytes]:
    """Open `html` at desktop and phone widths: per width a full-page screenshot (out_dir/NAME-WIDTH.png),
    each figure's size, ink and caption, console errors, requests; then the page printed to PDF."""
    from playwright.sync_api import sync_playwright

    assert shutil.which(CHROMIUM), "chromium missing (scripts/install.sh --test installs it)"
    url = html.resolve().as_uri()
    seen: list[PageSeen] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            for viewport, mobile in ((DESKTOP, False), (PHONE, True)):
                ctx = browser.new_context(
                    viewport=viewport,
                    is_mobile=mobile,
                    has_touch=mobile,
                    offline=True,
                    device_scale_factor=2 if mobile else 1,
                )
                page = ctx.new_page()
                errors: list[str] = []
                requests: list[str] = []
                page.on("console", lambda m, errors=errors: errors.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
                page.on("request", lambda r, requests=requests: requests.append(r.url) if r.url != url else None)
                page.route("**/*", lambda route: route.continue_() if route.request.url == url else route.abort())
                page.goto(url, wait_until="load")
                shot = out_dir / f"{name}-{viewport['width']}.png"
                png = page.screenshot(path=str(shot), full_page=True)
                size = Image.open(io.BytesIO(png)).size
                p = PageSeen(viewport["width"], shot, size, page.evaluate("document.documentElement.scrollWidth"))
                p.headings = page.locator("h2").all_inner_texts()
                p.text = page.locator("body").inner_text()
                for fig in page.locator("figure").all():
                    img = fig.locator("img")
                    natural = img.evaluate("i => [i.complete ? i.naturalWidth : 0, i.naturalHeight]")
                    box = fig.bounding_box() or {"width": 0.0, "height": 0.0}
                    ink, colours = _ink(img.screenshot())
                    overflow, labels = img.evaluate(SVG_TEXTS)
                    p.figures.append(
                        FigureSeen(
                            fig.get_attribute("data-figure") or "",
                            img.get_attribute("alt") or "",
                            fig.locator("figcaption").inner_text(),
                            tuple(natural),
                            (box["width"], box["height"]),
                            ink,
                            colours,
                            labels,
                            max(0.0, overflow),
                        )
                    )
                p.console_errors, p.requests = errors, requests
                seen.append(p)
                ctx.close()
            ctx = browser.new_context(offline=True)
            page = ctx.new_page()
            page.route("**/*", lambda route: route.continue_() if route.request.url == url else route.abort())
            page.goto(url, wait_until="load")
            pdf = page.pdf(format="A4")
            ctx.close()
        finally:
            browser.close()
    if os.environ.get("DLTESTBED_SCREENSHOTS"):  # keep them for a person to look at
        keep = Path(os.environ["DLTESTBED_SCREENSHOTS"])
        keep.mkdir(parents=True, exist_ok=True)
        for p in seen:
            shutil.copy(p.screenshot, keep / p.screenshot.name)
    return seen, pdf
