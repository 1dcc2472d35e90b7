"""Accuracy as the HPEC'19 table has it: the held-out split, the workload's evaluation, each repetition's own
seed, and the table's difference from bare metal with an interval checked on known answers."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest

from dltestbed import dataset
from dltestbed.config import load_spec, spec_json, workload_spec
from dltestbed.errors import ConfigError
from dltestbed.report import accuracy, analysis, render
from dltestbed.workload.__main__ import run
from dltestbed.workload.codec import encode, parse_line
from dltestbed.workload.emit import Emitter
from dltestbed.workload.events import AccuracyEvent
from tests.conftest import make_run
from tests.plans import plan_of

T_975_2 = 4.302652729  # Student t, 97.5th percentile, 2 degrees of freedom (any table)


def test_a_paired_difference_has_the_textbook_interval() -> None:
    d = accuracy.difference([80, 82, 84], [81, 84, 84], [(80, 81), (82, 84), (84, 84)])
    half = T_975_2 * 1 / math.sqrt(3)  # differences 1, 2, 0: mean 1, sd 1
    assert d.method == accuracy.PAIRED and d.n == 3 and d.points == 1
    assert d.lo is not None and d.hi is not None
    assert math.isclose(d.lo, 1 - half, rel_tol=1e-9) and math.isclose(d.hi, 1 + half, rel_tol=1e-9)


def test_a_welch_difference_and_the_degenerate_ones() -> None:
    d = accuracy.difference([80, 82, 84], [85, 86], [])
    assert d.method == accuracy.WELCH and d.points == 3.5 and d.lo is not None and d.hi is not None
    assert d.lo < 3.5 < d.hi and math.isclose(d.hi - 3.5, 3.5 - d.lo)
    same = accuracy.difference([90, 90], [90, 90], [(90, 90), (90, 90)])
    assert (same.points, same.lo, same.hi) == (0, 0, 0)  # no spread: the interval is the point
    one = accuracy.difference([90], [88], [(90, 88)])
    assert (one.points, one.lo, one.hi) == (-2, None, None)


def test_the_split_holds_out_every_fifth_image_of_each_class(tmp_path: Path) -> None:
    index = dataset.make(tmp_path / "d", classes=2, images_per_class=10, size=16)
    trained, held = dataset.split(index)
    assert (len(trained.files), len(held.files)) == (16, 4)
    assert held.labels == [0, 0, 1, 1] and not set(trained.files) & set(held.files)
    assert [Path(f).name for f in held.files[:2]] == ["img_00004.jpg", "img_00009.jpg"]


def test_the_made_classes_differ_in_hue() -> None:
    colours = [dataset.class_colour(c, 4) for c in range(4)]
    assert colours[0] == (200, 0, 0) and len(set(colours)) == 4


def test_accuracy_needs_real_training_data() -> None:
    with pytest.raises(ConfigError, match="--accuracy trains on real data"):
        workload_spec(model="alexnet", accuracy=True)
    spec = workload_spec(model="alexnet", data="real", data_dir="/d", accuracy=True)
    assert load_spec(spec_json(spec)) == spec and '"accuracy":true' in spec_json(spec)


def test_each_repetition_trains_from_its_own_seed_the_same_on_every_target(tmp_path: Path) -> None:
    data = dataset.make(tmp_path / "d", classes=2, images_per_class=5, size=32)
    p = plan_of(models=["alexnet"], repeat=3, data="real", data_dir=str(data.root), accuracy=True)
    rounds = p.rounds(["bm", "cbm"])
    assert [[s.seed for _, s, _ in r] for r in rounds] == [[0, 0], [1, 1], [2, 2]]
    plain = plan_of(models=["alexnet"], repeat=2)
    assert {s.seed for r in plain.rounds(["bm"]) for _, s, _ in r} == {0}


def test_the_workload_trains_then_classifies_the_held_out_images(tmp_path: Path) -> None:
    data = dataset.make(tmp_path / "d", classes=2, images_per_class=10, size=32)
    out = io.StringIO()
    fields = {"model": "alexnet", "image_size": 32, "batch_size": 4, "warmup": 0, "steps": 2}
    run(workload_spec(**fields, data="real", data_dir=str(data.root), accuracy=True, device="cpu"), Emitter(out))
    events = [parse_line(line) for line in out.getvalue().splitlines()]
    (acc,) = [e for e in events if isinstance(e, AccuracyEvent)]
    assert acc.images == 4 and 0 <= acc.correct <= 4 and math.isfinite(acc.loss)
    assert parse_line(encode(AccuracyEvent(4, 1, math.nan, 1.0))).loss != 0  # NaN travels as NaN


def _acc(kind: str, seed: int, correct: int, **kw: Any) -> Any:
    spec = {"seed": seed}
    return make_run(target_kind=kind, spec=spec, eval_images=40, eval_correct=correct, status="ok", **kw)


def test_the_table_per_layer_with_its_spread_and_difference() -> None:
    runs = [_acc("bm", 0, 32), _acc("cbm", 0, 33), _acc("bm", 1, 34), _acc("cbm", 1, 34), _acc("bm", 2, 36)]
    runs.append(_acc("cbm", 2, 36))
    runs.append(_acc("cbm", 0, 40, batch_size=16))  # other work: a table row of its own, no bare metal to compare
    rows = accuracy.table(runs)
    assert [(r.model, r.layer, len(r.runs)) for r in rows] == [
        ("alexnet", "bm", 3),
        ("alexnet", "cbm", 3),
        ("alexnet", "cbm", 1),
    ]
    bm, cbm, other = rows
    assert bm.values == [80, 85, 90] and bm.against is None and other.against is None
    assert cbm.against is not None and cbm.against.method == accuracy.PAIRED
    assert math.isclose(cbm.against.points, 2.5 / 3)  # differences 2.5, 0, 0 points
    md = render.markdown(analysis.analyse(runs))
    assert "## Accuracy (trained, then tested on held-out images)" in md
    assert "| alexnet | bm | 40 | 3 | 85.0 | 5.0 | 80.0–90.0 | baseline |" in md
    assert "| alexnet | cbm | 40 | 3 | 85.8 |" in md and "+0.8 [" in md
    got = json.loads(render.as_json(analysis.analyse(runs)))["accuracy"]
    assert got[1]["vs_baseline"]["method"] == accuracy.PAIRED and got[0]["top1_percent"] == [80, 85, 90]


def test_accuracy_on_a_dataset_too_small_to_hold_out_is_refused_before_any_run(tmp_path: Path) -> None:
    data = dataset.make(tmp_path / "d", classes=2, images_per_class=4, size=16)
    with pytest.raises(ConfigError, match=r"--accuracy: data dir .* has no class of 5 images or more"):
        plan_of(models=["alexnet"], data="real", data_dir=str(data.root), accuracy=True)
