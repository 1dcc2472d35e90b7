"""The HTML report as a person sees it: Debian's Chromium opens the file from disk, offline, at desktop
and phone widths; no console error, no request outside the file, every figure drawn and not empty."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests import reportdata
from tests.conftest import DATA, run_cli
from tests.htmlcheck import DESKTOP, PHONE, look

pytestmark = pytest.mark.browser

FIGURES = {"throughput", "overhead", "fleet", "steps", "distributed", "shared", *(f"memory-{i}" for i in range(1, 7))}


def test_every_figure_is_drawn_on_desktop_and_phone_with_nothing_loaded(tmp_path: Path) -> None:
    store = tmp_path / "results.sqlite"
    reportdata.write(store)
    out = tmp_path / "report.html"
    proc = run_cli("report", "--results", str(store), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    pages, pdf = look(out, tmp_path)
    for page, viewport in zip(pages, (DESKTOP, PHONE), strict=True):
        assert page.console_errors == [] and page.requests == []
        assert page.scroll_width <= viewport["width"]  # no sideways scrolling: tables scroll in their box
        assert page.screenshot_size[0] == viewport["width"] * (2 if viewport is PHONE else 1)
        assert page.screenshot_size[1] > 3000  # the whole page, not the first screen
        assert {f.name for f in page.figures} == FIGURES
        for f in page.figures:
            assert f.natural[0] > 300 and f.natural[1] > 150, f  # the SVG loaded
            assert 0.6 * viewport["width"] < f.box[0] <= viewport["width"], f  # fits the screen, not a thumbnail
            assert f.ink > 0.02 and f.colours > 20, f  # drawn: axes, text, data — not a blank box
            assert f.title and f.caption.startswith(f.title), f
        assert "Steps, run by run" in page.headings and "Memory over time" in page.headings
    assert pdf.startswith(b"%PDF") and len(re.findall(rb"/Type\s*/Page\b", pdf)) >= 3  # printable, several pages


H200 = DATA / "gpu" / "h200" / "results.sqlite"  # a real H200's store (dltestbed 56b6685, 2026-11-28)
NONE = re.compile(r"\bNone\b")


def test_the_h200_report_reads_without_none_and_its_titles_fit_their_figures(tmp_path: Path) -> None:
    store = tmp_path / "results.sqlite"
    shutil.copy(H200, store)  # the report may migrate a store: never the one in tests/data
    out = tmp_path / "report.html"
    proc = run_cli("report", "--all", "--results", str(store), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    (desktop, _), _ = look(out, tmp_path)
    assert not NONE.search(desktop.text)
    assert {f.name for f in desktop.figures} >= {"steps", "gpu-1", "gpu-2", "memory-1"}
    for f in desktop.figures:
        assert f.labels and not [t for t in (f.title, f.caption, *f.labels) if NONE.search(t)], f
        assert f.overflow <= 0.5, (f.name, f.overflow)  # no title or label cut at the figure's edge
    assert "warm-up until steady" in desktop.text  # --warmup auto, named
    assert re.search(r"device copy 1024 MiB \(pytorch\)\tbm\t1\t4\.26 TB/s\t.*\t89 %", desktop.text)
