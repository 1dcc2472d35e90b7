"""The report's figures from fixed records: what each draws is what the statistics computed, axes start
at zero with their units, the runs behind every point are named, steps are drawn as measured."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from matplotlib import rc_context
from matplotlib.collections import LineCollection
from matplotlib.container import BarContainer
from matplotlib.patches import Rectangle

from dltestbed.report import analysis, figures, html, jobs, render, stats
from dltestbed.report.analysis import Analysis
from dltestbed.report.figures.base import SVG_RC, group_title, varying, workload_label
from dltestbed.report.fleet import fleet
from dltestbed.report.inference import mean_interval
from dltestbed.report.keys import GroupKey
from dltestbed.results.store import Store
from dltestbed.workload.events import ResourceEvent, StepEvent
from tests.conftest import DATA, make_run

GiB = 2**30
H200 = DATA / "gpu" / "h200" / "results.sqlite"  # a real H200's store: compiled runs, --warmup auto, probes


def _runs() -> list:
    """bm 100/110/105 and cbm 90/99/94.5 (10 % slower, paired by repetition)."""
    out = []
    for rep, (b, c) in enumerate(((100.0, 90.0), (110.0, 99.0), (105.0, 94.5)), start=1):
        out += [
            make_run(target_kind="bm", images_per_sec=b, repetition=rep, status="ok"),
            make_run(target_kind="cbm", images_per_sec=c, repetition=rep, status="ok"),
        ]
    return out


def _texts(fig) -> list[str]:  # type: ignore[no-untyped-def]
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def test_mean_interval_is_students_t() -> None:
    lo, hi = mean_interval([100.0, 110.0, 105.0])  # type: ignore[misc]
    # mean 105, s = 5, se = 5/sqrt(3), t(0.975, 2) = 4.302653
    assert (lo + hi) / 2 == pytest.approx(105.0)
    assert (hi - lo) / 2 == pytest.approx(4.302653 * 5 / 3**0.5, rel=1e-6)
    assert mean_interval([1.0]) is None


def test_throughput_bars_are_the_group_means_with_their_intervals() -> None:
    groups = stats.summarise(_runs())
    fig = figures.throughput(groups)
    (ax,) = fig.axes
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    heights = {b.get_label(): [r.get_height() for r in b] for b in bars}
    assert heights == {"bm": [pytest.approx(105.0)], "cbm": [pytest.approx(94.5)]}
    assert ax.get_ylim()[0] == 0 and "images/sec" in ax.get_ylabel()
    (bm,) = [g for g in groups if g.key.target_kind == "bm"]
    whiskers = [c for c in ax.collections if isinstance(c, LineCollection)]
    ends = sorted(float(y) for seg in whiskers[0].get_segments() for y in seg[:, 1])
    assert ends == pytest.approx(sorted(bm.images_per_sec_ci))  # the interval drawn is the one computed
    notes = _texts(fig)
    assert notes.count("n=3") == 1 and "n=3\nslower 10.0 %" in notes  # the verdict: cbm is slower by 10 %


def test_throughput_draws_failed_groups_as_words_not_bars() -> None:
    runs = [*_runs(), make_run(target_kind="vm", status="failed", reason="boom")]
    fig = figures.throughput(stats.summarise(runs))
    assert any("all runs failed" in t for t in _texts(fig))
    assert {c.get_label() for c in fig.axes[0].containers if isinstance(c, BarContainer)} == {"bm", "cbm"}


def test_overhead_points_and_lines_are_the_effects() -> None:
    groups = stats.summarise(_runs())
    (cbm,) = [g for g in groups if g.key.target_kind == "cbm"]
    fig = figures.overheads(groups)
    (ax,) = fig.axes
    (point,) = [line for line in ax.lines if line.get_marker() == "o"]
    assert point.get_xdata()[0] == pytest.approx(cbm.effect.overhead_pct)  # type: ignore[union-attr]
    seg = next(c for c in ax.collections if isinstance(c, LineCollection)).get_segments()[0]
    assert sorted(seg[:, 0]) == pytest.approx([cbm.effect.lo_pct, cbm.effect.hi_pct])  # type: ignore[union-attr]
    assert any(cbm.verdict in t for t in _texts(fig))  # type: ignore[operator]
    assert "%" in ax.get_xlabel() and any(line.get_xdata()[0] == 0 for line in ax.lines if line.get_marker() != "o")


def test_overhead_row_without_interval_says_why() -> None:
    runs = [
        make_run(target_kind="bm", images_per_sec=100.0, status="ok"),
        make_run(target_kind="vm", images_per_sec=80.0, status="ok"),
    ]
    fig = figures.overheads(stats.summarise(runs))
    assert any("too few runs for an interval" in t for t in _texts(fig))
    assert not [line for line in fig.axes[0].lines if line.get_marker() == "o"]


def _steps(ips: list[float], warmup: int) -> list[StepEvent]:
    t, out = 0.0, []
    for i, v in enumerate(ips):
        t += 8 / v
        out.append(
            StepEvent(
                index=i, phase="warmup" if i < warmup else "timed", images=8, seconds=8 / v, images_per_sec=v, t=t
            )
        )
    return out


def test_steps_are_drawn_as_measured_with_warmup_shaded_and_flags_marked() -> None:
    a, b = make_run(repetition=1, warmup=2), make_run(repetition=2, warmup=2)
    ss = {a.id: _steps([5.0, 90.0, 100.0, 80.0, 120.0], 2), b.id: _steps([6.0, 95.0, 99.0, 98.0, 97.0], 2)}
    fig = figures.steps([a, b], ss, {b.id: ["slowing down"]})
    (ax,) = fig.axes
    filled = [line for line in ax.lines if line.get_marker() == "o" and line.get_markerfacecolor() != "white"]
    hollow = [line for line in ax.lines if line.get_marker() == "o" and line.get_markerfacecolor() == "white"]
    assert [list(line.get_ydata()) for line in filled] == [[100.0, 80.0, 120.0], [99.0, 98.0, 97.0]]  # no smoothing
    assert [list(line.get_ydata()) for line in hollow] == [[5.0, 90.0], [6.0, 95.0]]
    (span,) = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert (span.get_x(), span.get_x() + span.get_width()) == (0.5, 2.5)  # the two warm-up steps
    flagged = [line for line in ax.lines if line.get_linestyle() == "--"]
    assert len(flagged) == 1 and "(flagged)" in str(flagged[0].get_label())
    red = [line for line in ax.lines if line.get_markeredgecolor() == figures.FLAG_COLOUR]
    assert [list(line.get_ydata()) for line in red] == [[99.0, 98.0, 97.0], [6.0, 95.0]]  # run b's markers
    assert ax.get_ylim()[0] == 0 and "images/sec" in ax.get_ylabel() and "(2 runs)" in ax.get_title()


def test_memory_profile_mean_and_band_across_repetitions() -> None:
    a, b = make_run(repetition=1), make_run(repetition=2)
    res = {
        a.id: [ResourceEvent(t=100.0 + i, rss_bytes=1 * GiB, cpu_percent=100.0) for i in range(11)],
        b.id: [
            ResourceEvent(t=500.0 + i, rss_bytes=3 * GiB, cpu_percent=100.0, gpus=[{"memory_used_bytes": 2 * GiB}])
            for i in range(6)
        ],
    }
    ((label, fig),) = figures.memory([a, b], res, {})
    (host, gpu) = fig.axes
    (mean,) = [line for line in host.lines if line.get_label() == "mean"]
    x, y = np.asarray(mean.get_xdata()), np.asarray(mean.get_ydata())
    assert x[0] == 0 and x[-1] == 10  # each run's own clock from its first sample
    assert y[:6] == pytest.approx([2.0] * 6)  # both runs: mean of 1 and 3 GiB
    assert y[6:] == pytest.approx([1.0] * 5)  # run b ended at 5 s: never carried beyond its last sample
    band = host.collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() == pytest.approx(1.0) and band.max() == pytest.approx(3.0)
    assert host.get_ylim()[0] == 0 and "GiB" in host.get_ylabel() and "GiB" in gpu.get_ylabel()
    assert "(2 runs)" in host.get_title() and label == "alexnet"


def test_memory_has_no_gpu_row_without_gpu_samples() -> None:
    a = make_run()
    ((_, fig),) = figures.memory(
        [a], {a.id: [ResourceEvent(t=float(i), rss_bytes=GiB, cpu_percent=1.0) for i in range(3)]}, {}
    )
    assert len(fig.axes) == 1 and "host memory" in fig.axes[0].get_ylabel()


def test_distributed_and_shared_figures() -> None:
    runs = [
        make_run(scenario="distributed", job_id="j", workers=2, worker_index=i, images_per_sec=40.0, status="ok")
        for i in (0, 1)
    ] + [make_run(scenario="distributed", job_id="j", workers=2, images_per_sec=50.0, status="ok")]
    (ax_t, ax_e) = figures.distributed(jobs.distributed(runs)).axes
    assert [r.get_height() for r in ax_t.patches] == [80.0] and [r.get_height() for r in ax_e.patches] == [80.0]
    assert any(list(line.get_ydata()) == [100.0, 100.0] for line in ax_t.lines)  # 2 × one alone
    assert ax_t.get_ylim()[0] == 0 and ax_e.get_ylim()[0] == 0 and "%" in ax_e.get_ylabel()
    pair = [
        make_run(scenario="shared", job_id="s", contention="none", images_per_sec=100.0, status="ok"),
        make_run(scenario="shared", job_id="s", contention="alexnet b64", images_per_sec=75.0, status="ok"),
        make_run(
            scenario="shared", job_id="s", contention="alexnet b64", role="cotenant", images_per_sec=20.0, status="ok"
        ),
    ]
    (ax,) = figures.shared(jobs.shared(pair)).axes
    assert sorted(r.get_height() for r in ax.patches) == [75.0, 100.0]
    assert "drop 25.0 %\n(n=1 pair)" in _texts(figures.shared(jobs.shared(pair)))


def test_fleet_marks_the_slow_host() -> None:
    runs = [
        make_run(host=h, machine=h, images_per_sec=v, repetition=rep, status="ok")
        for h, base in (("n1", 100.0), ("n2", 101.0), ("n3", 99.0), ("n4", 50.0))
        for rep, v in ((1, base), (2, base + 1))
    ]
    groups = stats.summarise(runs, by_host=True)
    flags, _ = fleet(groups)
    fig = figures.fleet(groups, flags)
    (ax,) = fig.axes
    points = [line for line in ax.lines if line.get_marker() in ("o", "s")]
    red = [line for line in points if line.get_color() == figures.FLAG_COLOUR]
    assert len(points) == 4 and len(red) == 1 and red[0].get_xdata()[0] == 3  # n4, the fourth host
    assert any("outlier, z=" in t for t in _texts(fig))
    median = [line for line in ax.lines if line.get_linestyle() == "--"]
    assert median[0].get_ydata()[0] == pytest.approx(np.median([100.5, 101.5, 99.5, 50.5]))


def test_nothing_to_draw_is_none() -> None:
    assert figures.throughput([]) is None and figures.overheads(stats.summarise(_runs()[:1])) is None
    assert figures.steps([make_run()], {}, {}) is None and figures.memory([make_run()], {}, {}) == []
    assert figures.distributed([]) is None and figures.shared([]) is None and figures.fleet([], []) is None


def test_svg_is_self_contained_and_repeatable() -> None:
    groups = stats.summarise(_runs())
    one, two = figures.svg(figures.throughput(groups)), figures.svg(figures.throughput(groups))
    assert one == two  # no date, fixed ids
    assert one.lstrip().startswith("<?xml") and "<svg" in one
    assert "<text" not in one  # text as paths: no font needed
    assert not re.search(r"(href|src)=\"(https?:|file:)", one)


def test_html_page_embeds_figures_escapes_text_and_loads_nothing() -> None:
    runs = [
        *_runs(),
        make_run(
            target_kind="bm",
            host="<script>alert(1)</script>",
            images_per_sec=1.0,
            status="failed",
            reason="<img src=x onerror=alert(1)>",
        ),
    ]
    a = Analysis(runs=tuple(runs), groups=tuple(stats.summarise(runs)))
    plots = figures.build(a)
    refs = {p.section: [render.FigureRef(p.title, p.caption, f"figure:{p.name}")] for p in plots}
    md = render.markdown(a, title="t <b>x</b>", figures=refs, captions=False)
    page = html.document(md, {p.name: p for p in plots}, "t <b>x</b>", "made now")
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page
    assert "<script" not in page and "onerror" not in page.replace("&lt;", "<").split("<main>")[0]
    assert f'content="{html.CSP}"' in page and "default-src 'none'" in page
    assert page.count("<figure ") == len(plots) == 2
    assert 'src="data:image/svg+xml;base64,' in page and "figure:" not in page
    assert not re.search(r"(href|src)=\"(https?:|file:|//)", page)
    assert '<div class="table">' in page and 'name="viewport"' in page


def test_html_refuses_a_figure_that_was_not_drawn() -> None:
    with pytest.raises(KeyError, match="nope"):
        html.document("# t\n\n![x](figure:nope)\n", {}, "t", "")


def test_decomposition_draws_each_layers_change_with_its_interval() -> None:
    """The model's change (cbm 10 % slower) and a probe's (cbm's disk 35 % below bm) are the points drawn;
    an interval past the axis's end is cut there and its end written beside it."""
    from dltestbed.report import micro
    from dltestbed.report.inference import paired
    from dltestbed.workload.events import MeasureEvent

    groups = stats.summarise(_runs())
    runs, measures = [], {}
    for rep, (b, c) in enumerate(((1000.0, 650.0), (1100.0, 715.0), (900.0, 585.0)), start=1):
        for kind, v in (("bm", b), ("cbm", c)):
            spec = {"scale": "small", "cases": [{"probe": "disk", "case": "seq", "headline": True}]}
            r = make_run(target_kind=kind, repetition=rep, model="micro", mode="probe", status="ok", spec=spec)
            runs.append(r)
            measures[r.id] = [MeasureEvent("disk", "seq", 1, "timed", v, "B/s", 0.1, 1.0)]
    cases, _ = micro.summarise(runs, measures, {})
    fig = figures.decomposition(cases, groups)
    (ax,) = fig.axes
    xs = sorted(line.get_xdata()[0] for line in ax.lines if line.get_marker() == "o")
    assert xs == pytest.approx([-35.0, -10.0])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["disk: seq", "alexnet train img/s"]
    assert "%" in ax.get_xlabel() and [t.get_text() for t in ax.get_legend().get_texts()] == ["cbm (n=3)"]
    wide = micro.CaseStats(
        cases[-1].key, 2, cases[-1].value, None, True, None, "", "", paired([100.0, 100.0], [90.0, 300.0])
    )
    fig = figures.decomposition([wide], [])
    (ax,) = fig.axes
    assert ax.get_xlim()[1] <= figures.CHANGE_AXIS_MAX * 1.2
    assert any(t.get_text().startswith("→ +") for t in ax.texts)


def test_a_workload_warmed_up_until_steady_is_named_so_never_none() -> None:
    keys = [GroupKey.of(make_run(warmup=w)) for w in (None, 3)]  # None: --warmup auto
    vary = varying(keys)
    assert [workload_label(k, vary) for k in keys] == ["alexnet warm-up until steady", "alexnet 3 warm-up"]
    assert group_title(keys[0], vary, 1) == "bm · alexnet warm-up until steady (1 run)"


@pytest.fixture(scope="module")
def h200(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Analysis]:
    """The analysis of a copy of the H200's store."""
    path = Path(tmp_path_factory.mktemp("h200")) / "results.sqlite"
    shutil.copy(H200, path)
    store = Store.open(path, read_only=True)
    try:
        yield analysis.read(store, store.runs())
    finally:
        store.close()


def test_every_title_lies_within_its_figure_once_rendered(h200: Analysis) -> None:
    with rc_context(SVG_RC):
        drawn = [figures.steps(h200.runs, h200.steps, {}), figures.throughput(h200.groups)]
        drawn += [f for _, f in figures.gpu_state(h200.runs, h200.samples, h200.steps)]
        drawn += [f for _, f in figures.memory(h200.runs, h200.samples, h200.steps)]
    assert len(drawn) == 10
    for fig in drawn:
        assert fig is not None
        figures.svg(fig)  # rendered: laid out, its titles fitted
        for title, box in [*((t, fig.bbox) for t in fig.texts), *((ax.title, ax.bbox) for ax in fig.axes)]:
            seen = title.get_window_extent()
            assert fig.bbox.x0 <= seen.x0 and seen.x1 <= fig.bbox.x1, title.get_text()  # not cut at an edge
            assert seen.width <= box.width + 0.5, title.get_text()  # a panel's within its panel: not over the next
            assert "None" not in title.get_text()


def test_the_steps_of_a_compiled_run_fill_their_panel_and_its_start_up_is_a_note(h200: Analysis) -> None:
    (run,) = [r for r in h200.runs if r.batch_size == 32]  # the smoke run: 35 s compiling, 5 steps in 0.02 s
    timed = [s for s in h200.steps[run.id] if s.phase == "timed"]
    began = min(h200.samples[run.id][0].t, h200.steps[run.id][0].t - h200.steps[run.id][0].seconds)
    first, last = timed[0].t - began, timed[-1].t - began
    assert first > 40 and last - first < 0.1
    figs = dict(figures.gpu_state(h200.runs, h200.samples, h200.steps))
    (fig,) = [f for label, f in figs.items() if label.startswith("alexnet b32")]
    ips = fig.axes[0]  # the images/sec row (one layer: one column)
    lo, hi = ips.get_xlim()
    assert lo <= first and last <= hi and (last - first) / (hi - lo) > 0.9  # the steps span the axis
    assert [t.get_text() for t in ips.texts] == [f"timed steps from {first:.3g} s (start-up and warm-up before)"]
    assert fig.axes[1].get_xlim()[0] == 0  # the clock over the whole run
