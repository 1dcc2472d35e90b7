"""`report --format html` and `report --out x.md`: the files written, the lines printed, bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests import reportdata
from tests.conftest import one_error_line, run_cli


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("store") / "results.sqlite"
    reportdata.write(path)
    return path


def test_html_file_from_its_suffix(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "reports" / "x.html"
    proc = run_cli("report", "--results", str(store), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert re.fullmatch(r"report written to .*x\.html \(\d+ KiB, 12 figure\(s\)\)\n", proc.stdout)
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count("<figure ") == 12
    assert not list(out.parent.glob(".*.tmp"))  # written through a temporary file, renamed


def test_markdown_file_gets_its_figures_beside_it(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "x.md"
    (tmp_path / "x_files").mkdir()
    (tmp_path / "x_files" / "old-figure.svg").write_text("<svg/>")  # an earlier report's
    (tmp_path / "x_files" / "notes.txt").write_text("mine")
    proc = run_cli("report", "--results", str(store), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == out.read_text()  # Markdown is printed as well
    assert "12 figure(s) in" in proc.stderr
    links = re.findall(r"!\[[^\]]+\]\((x_files/[^)]+\.svg)\)", out.read_text())
    assert len(links) == 12 and all((tmp_path / link).read_text().lstrip().startswith("<?xml") for link in links)
    assert not (tmp_path / "x_files" / "old-figure.svg").exists() and (tmp_path / "x_files" / "notes.txt").exists()
    assert sorted(p.name for p in (tmp_path / "x_files").glob("*.svg")) == sorted(Path(x).name for x in links)


def test_markdown_on_stdout_has_no_figures(store: Path) -> None:
    proc = run_cli("report", "--results", str(store))
    assert proc.returncode == 0 and "![" not in proc.stdout and "## Environment of each group" in proc.stdout


def test_html_to_stdout_and_json_carries_the_new_fields(store: Path) -> None:
    page = run_cli("report", "--results", str(store), "--format", "html")
    assert page.returncode == 0 and page.stdout.startswith("<!DOCTYPE html>")
    groups = json.loads(run_cli("report", "--results", str(store), "--format", "json").stdout)["groups"]
    bm = next(
        g for g in groups if g["key"]["target_kind"] == "bm" and g["key"]["model"] == "resnet50" and not g["key"]["arm"]
    )
    lo, hi = bm["images_per_sec_ci"]
    assert lo < bm["images_per_sec"]["mean"] < hi and bm["environment"]["tensorflow"] == "2.21.0"


def test_fleet_check_runs_without_by_host_on_three_machines(store: Path) -> None:
    report = json.loads(run_cli("report", "--results", str(store), "--format", "json").stdout)
    assert [f["host"] for f in report["fleet"]] == ["node4"]  # half as fast as node2 and node3
    assert not any("host" in g["key"] for g in report["groups"])  # the table keeps a row per kind
    assert report["fleet_rule"] == {
        "method": "leave-one-out modified z-score (peers' median and MAD)",
        "z_below": -3.5,
        "min_slowdown_pct": 5.0,
    }
    (flag,) = report["fleet"]
    below = (1 - flag["images_per_sec"] / flag["peers_median"]) * 100
    strict = run_cli("report", "--results", str(store), "--fleet-slowdown", f"{below + 1:.1f}")
    assert strict.returncode == 0 and "No host is slower than its peers" in strict.stdout
    assert f"by at least {below + 1:.1f} %" in strict.stdout
    line = one_error_line(run_cli("report", "--results", str(store), "--fleet-slowdown", "100"))
    assert line == "error: --fleet-slowdown: a % between 0 and 100 (got 100)"


def test_bad_output_paths_and_formats_are_one_line(store: Path, tmp_path: Path) -> None:
    line = one_error_line(run_cli("report", "--results", str(store), "--out", "/proc/nope/x.html"))
    assert line.startswith("error: --out '/proc/nope/x.html': cannot write")
    line = one_error_line(run_cli("report", "--results", str(store), "--compare", "last", "last", "--format", "html"))
    assert "--compare: md or json" in line
    line = one_error_line(run_cli("report", "--results", str(store), "--format", "pdf"))
    assert "pdf" in line
