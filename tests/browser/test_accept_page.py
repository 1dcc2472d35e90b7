"""The acceptance's page as a person sees it: Chromium opens it from disk, offline, at desktop and phone widths;
no console error, no request, no sideways scrolling (long reasons wrap, wide tables scroll in their box), every
node under its own heading (its GPUs' checks under theirs), the checks left out under theirs."""

from __future__ import annotations

from pathlib import Path

import pytest

from dltestbed.accept import judge, pack
from dltestbed.report.gpu_evidence import GpuVerdict, Reason
from dltestbed.report.verdicts import FAIL, PASS, UNDECIDED
from tests.htmlcheck import DESKTOP, PHONE, look

pytestmark = pytest.mark.browser

SLOW = Reason(
    "alexnet img/s",
    FAIL,
    "alexnet img/s 50 % below its 3 peers' median (modified z -31.0); the second pass measured it 47 % below; "
    "cause: its workload had 50 % of its 1 CPU(s), its peers' 97 %: something else on the node competes for them",
    "drain the node; look at what else runs on it, its clocks, power and cooling; accept it again once mended",
    "first 33.37, second 35.21, peers' median 66.22",
)
LINK = Reason("pcie", FAIL, "PCIe link at Gen3 x8 under load; the board's is Gen5 x16", "reseat the link", "x" * 300)


def test_the_acceptance_page_reads_on_desktop_and_phone(tmp_path: Path) -> None:
    gpu = GpuVerdict("n3:2", "NVIDIA H100 80GB HBM3", "h100-sxm", FAIL, (LINK,))
    nodes = [
        judge.NodeVerdict("n1", PASS, ()),
        judge.NodeVerdict("n2", FAIL, (SLOW,), slow=("alexnet img/s 50 % below its peers",), cause="a CPU hog"),
        judge.NodeVerdict("n3", FAIL, (Reason("gpu n3:2", FAIL, LINK.why, LINK.action),), (gpu,)),
        judge.NodeVerdict("n4", UNDECIDED, (Reason("pairs", UNDECIDED, "no known-good node to pair it with"),)),
    ]
    summary = {
        "id": "a-1",
        "outcome": "1 pass, 2 fail, 1 cannot judge",
        "level": "quick",
        "inventory": "rack.yml",
        "dltestbed": "0.1.0",
        "started_at": "2026-11-27T16:00:00+00:00",
        "finished_at": "2026-11-27T16:03:00+00:00",
        "sensitivity": "A node is slow in a measure when …",
    }
    page = tmp_path / "report.html"
    left = [judge.LeftOut("stage pairs", "one node: no pair"), judge.LeftOut("GPU peers", "1 GPU(s) NVIDIA H100")]
    page.write_text(pack.page(summary, nodes, left))
    seen, _ = look(page, tmp_path, "accept")
    for p, viewport in zip(seen, (DESKTOP, PHONE), strict=True):
        assert p.console_errors == [] and p.requests == []
        assert p.scroll_width <= viewport["width"], p.scroll_width
        assert p.headings == ["n1: pass", "n2: fail", "n3: fail", "n4: cannot judge", "Left out"]
