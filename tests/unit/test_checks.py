"""Results checked, not only timed: the bound per math mode, a GEMM against a known answer, a fake product that
flips one element (caught, and its element named), through the workload, the store, the report and validate."""

from __future__ import annotations

import io
import json
import math
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dltestbed import runner
from dltestbed.config import probe_spec, spec_json
from dltestbed.report import analysis, render
from dltestbed.report import validate as v
from dltestbed.results.store import Store
from dltestbed.workload import numerics, probes
from dltestbed.workload.codec import encode, parse_line
from dltestbed.workload.emit import Emitter
from dltestbed.workload.events import CheckEvent
from dltestbed.workload.frameworks.tensorflow import checks as tfchecks
from dltestbed.workload.micro import run_micro
from tests.conftest import make_run
from tests.plans import plan_of


def _flip(x: float, bit: int) -> float:
    """x as float32 with one bit flipped (30: the exponent's highest but one)."""
    (raw,) = struct.unpack("<I", struct.pack("<f", x))
    (out,) = struct.unpack("<f", struct.pack("<I", raw ^ (1 << bit)))
    return float(out)


def test_the_bound_per_math_mode_from_its_roundings() -> None:
    k = 512
    g = k * 2.0**-24 / (1 - k * 2.0**-24)
    assert math.isclose(numerics.bound(k, "float32"), g)
    gt = k * 2.0**-23 / (1 - k * 2.0**-23)
    assert math.isclose(numerics.bound(k, "tf32"), (1 + 2.0**-11) ** 2 * (1 + gt) - 1)
    assert math.isclose(numerics.bound(k, "bfloat16"), (1 + gt) * (1 + 2.0**-8) - 1)
    assert numerics.bound(k, "float32") < numerics.bound(k, "float16") < numerics.bound(k, "bfloat16")
    assert numerics.bound(9, "float32", numerics.FAST_CONV) == 16 * numerics.bound(9, "float32")


def test_a_gemm_against_its_known_answer_and_one_flipped_element() -> None:
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    b = np.array([[5.0, 6.0], [7.0, 8.0]])
    known = np.array([[19.0, 22.0], [43.0, 50.0]])
    c = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float64)
    ok = numerics.judge(c, a @ b, np.abs(a) @ np.abs(b), numerics.bound(2, "float32"))
    assert np.array_equal(a @ b, known) and ok.ok and ok.worst == 0.0 and ok.elements == 4
    c[1, 0] = _flip(c[1, 0], 30)
    bad = numerics.judge(c, known, np.abs(a) @ np.abs(b), numerics.bound(2, "float32"))
    assert (bad.ok, bad.mismatches, bad.at) == (False, 1, (1, 0))
    assert bad.where().startswith("element (1, 0): ") and "expected 43" in bad.where()
    nan = numerics.judge(np.array([math.nan]), np.array([1.0]), np.array([1.0]), 1.0)
    assert nan.mismatches == 1 and nan.worst == math.inf


@pytest.fixture(scope="module")
def tf() -> Any:
    import tensorflow

    return tensorflow


def _flipping(tf: Any, at: tuple[int, ...]) -> Any:
    """A product that is right except for one element, whose float32 exponent bit 30 is flipped."""

    def wrong(result: Any) -> Any:
        arr = result.numpy().copy()
        arr[at] = _flip(float(arr[at]), 30)
        return tf.constant(arr)

    return wrong


def test_the_gemm_and_conv_checks_catch_a_fake_that_flips_one_element(tf: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    gemm = tfchecks.gemm_check(tf, "/CPU:0", None, 64, "float32", repeat=True)
    ref, again = gemm(3)
    assert (ref.kind, again.kind) == ("reference", "repeat")
    assert ref.verdict.ok and again.verdict.ok and again.verdict.worst == 0.0
    assert ref.verdict.worst < ref.verdict.tolerance / 4  # real float32 sums sit well inside the bound
    flip = _flipping(tf, (5, 7))
    monkeypatch.setattr(tfchecks, "product", lambda tf_, a, b: flip(tf_.linalg.matmul(a, b)))
    (ref,) = tfchecks.gemm_check(tf, "/CPU:0", None, 64, "float32")(3)
    assert (ref.verdict.mismatches, ref.verdict.at) == (1, (5, 7))
    flip4 = _flipping(tf, (0, 2, 3, 1))
    monkeypatch.setattr(tfchecks, "convolve", lambda tf_, x, f, s: flip4(tf_.nn.conv2d(x, f, s, "SAME")))
    (conv,) = tfchecks.conv_check(tf, "/CPU:0", None, (6, 6, 8, 4, 3, 1))(1)
    assert (conv.verdict.mismatches, conv.verdict.at) == (1, (0, 2, 3, 1))


def test_a_flaky_product_fails_its_repeat(tf: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = iter(range(100))
    flip = _flipping(tf, (1, 1))
    monkeypatch.setattr(
        tfchecks,
        "product",
        lambda tf_, a, b: flip(tf_.linalg.matmul(a, b)) if next(calls) == 1 else tf_.linalg.matmul(a, b),
    )
    ref, again = tfchecks.gemm_check(tf, "/CPU:0", None, 32, "float32", repeat=True)(0)
    assert ref.verdict.ok and not again.verdict.ok and again.verdict.at == (1, 1) and again.verdict.tolerance == 0


def test_a_check_event_travels_with_an_infinite_error() -> None:
    ev = CheckEvent("gemm", "float32 n=512", "reference", 4, 1, math.inf, 1e-5, 7, 1.0, gpu=0, where="element (0, 0)")
    back = parse_line(encode(ev))
    assert back == ev and isinstance(back, CheckEvent) and not back.ok


def test_from_the_workload_to_validate_a_flipped_element_fails_naming_the_device(
    tf: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A micro run (gemm and conv on the CPU) with a gemm product that flips one element: through the stdout
    protocol into the store, the report's section and validate's JUnit."""
    flip = _flipping(tf, (3, 3))
    monkeypatch.setattr(tfchecks, "product", lambda tf_, a, b: flip(tf_.linalg.matmul(a, b)))
    out = io.StringIO()
    run_micro(probe_spec(probes=("gemm", "conv"), warmup=0, steps=1, device="cpu"), Emitter(out))
    store = Store.open(tmp_path / "r.sqlite")
    run = make_run(model="micro", mode="probe", status="ok")
    store.save_run(run)
    collect = runner._Collector(run, store, runner.NullObserver())
    for line in out.getvalue().splitlines():
        collect.on_line(line)
    assert collect.unparsed == []
    got = store.checks(run.id)
    assert [(c.probe, c.ok) for c in got] == [("gemm", False), ("conv", True), ("conv", True), ("conv", True)]
    assert got[0].where.startswith("element (3, 3)") and got[0].gpu is None
    a = analysis.read(store, store.runs())
    md = render.markdown(a)
    assert "## Results checked" in md and "| h | bm | CPU | gemm | 1 | **1** |" in md
    assert "- **error** h bm the CPU: gemm float32 n=256 is beyond the bound against float64: 1 of 65536" in md
    assert json.loads(render.as_json(a))["checks"]["mismatches"][0]["where"].startswith("element (3, 3)")
    ref = v.Reference.model_validate({"version": 1, "health": {"no_xid": True}})
    judged = {j.what: j for j in v.judge(ref, a)}
    assert judged["results.gemm"].status == "fail" and judged["results.conv"].status == "pass"
    xml = v.junit_xml(list(judged.values()))
    assert 'classname="dltestbed.validate.results.gemm" name="h bm CPU gemm"><failure' in xml
    store.close()


def test_a_screen_sums_its_rounds_and_names_the_first_bad_round(tf: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four rounds (a clock that lets three more pass), fresh inputs each; the product goes wrong in round 2 only."""
    from dltestbed.workload import screen
    from dltestbed.workload.micro import check_event

    seeds: list[int] = []
    real = tfchecks.gemm_check

    def spying(tf_: Any, device: str, gpu: int | None, n: int, math: str, repeat: bool = False) -> Any:
        inner = real(tf_, device, gpu, n, math, repeat)

        def check(seed: int) -> Any:
            seeds.append(seed)
            return inner(seed)

        return check

    flip = _flipping(tf, (2, 5))
    monkeypatch.setattr(tfchecks, "gemm_check", spying)
    monkeypatch.setattr(
        tfchecks,
        "product",
        lambda tf_, a, b: flip(tf_.linalg.matmul(a, b)) if seeds[-1] == 12 else tf_.linalg.matmul(a, b),
    )
    ticks = iter([0.0, 1.0, 2.0, 3.0, 99.0])
    w = probes.Where(tf, (), "small", (), 10, checks=tfchecks)
    got = list(screen.run(w, ["gemm"], 3.5, 10, check_event, clock=lambda: next(ticks)))
    assert seeds == [10, 11, 12, 13]
    ref, again = got
    assert (ref.kind, ref.rounds, ref.elements, ref.mismatches) == ("reference", 4, 4 * 256 * 256, 1)
    assert ref.where.startswith("seed 12: element (2, 5)") and again.kind == "repeat" and again.rounds == 4
    assert again.mismatches == 0  # a fault that repeats itself is the reference check's to catch


def test_the_screen_suite_plans_the_checks_and_one_deterministic_training() -> None:
    from dltestbed.errors import ConfigError

    p = plan_of(suite="screen", screen_seconds=5.0)
    model, probe = p.specs
    assert model.model == "alexnet" and getattr(model, "deterministic", False)
    assert probe.probes == ("gemm", "conv") and getattr(probe, "screen_seconds", None) == 5.0
    assert '"screen_seconds":5.0' in spec_json(probe)  # what the workload is sent
    with pytest.raises(ConfigError, match="--suite screen checks gemm and conv, not membw"):
        plan_of(suite="screen", probes=["gemm", "membw"])
