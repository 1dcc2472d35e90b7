"""`accept --init`: a site's expected values derived from golden nodes, as a site file that `--expected` reads
(dltestbed/expected.py's form): each measure of each board the golden GPUs are, as the boards hold it (GEMM as a
fraction of the datasheet peak, the copies as fractions of the link and of memory bandwidth, ResNet-50 img/s),
with its source naming the nodes and the date. Refused, with nothing written, where the golden measures are too
noisy to be a reference: validate --init's rule, a tolerance of 3 run-to-run CVs beyond 25 %. Pure."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import median

from dltestbed.errors import ConfigError
from dltestbed.expected import Board, for_gpu
from dltestbed.report.inference import cv
from dltestbed.report.validate_init import INIT_MAX_TOLERANCE, INIT_MIN_TOLERANCE, INIT_SPREADS
from dltestbed.workload.peaks import gpu_peak
from dltestbed.workload.probes import pcie_rate

MIN_SAMPLES = 3  # a value needs this many samples (probe calls, model runs) to say how much it varies


@dataclass(frozen=True)
class Golden:
    """One golden GPU's samples: `samples` by gpu_verdicts.MEASURES' names (FLOP/s, B/s, img/s); `measured_by`:
    the framework and revision of the probe or model that measured each."""

    node: str
    index: int
    name: str  # NVML's
    driver: str
    samples: Mapping[str, Sequence[float]]
    measured_by: Mapping[str, tuple[str, int]]


def as_board_holds(board: Board, gpu: str, measure: str, x: float) -> tuple[str, float, str] | None:
    """A measured figure as the board file holds it: (its name there, its value, how it was derived)."""
    if measure.startswith("gemm_"):
        peak, _ = gpu_peak(gpu, measure.removeprefix("gemm_"))
        return (measure, x / peak, f"{x / 1e12:.1f} of {peak / 1e12:g} TFLOP/s") if peak else None
    if measure in ("h2d_pinned", "d2h_pinned"):
        gen, width = board.get("pcie_gen"), board.get("pcie_width")
        if gen is None or width is None:
            return None
        link, _ = pcie_rate(int(gen.value), int(width.value))
        if not link:
            return None
        return (
            f"{measure}_fraction",
            x / link,
            f"{x / 1e9:.1f} GB/s of Gen{gen.value:g} x{width.value:g}'s {link / 1e9:.1f}",
        )
    if measure == "memory_copy":
        bw = board.get("memory_bandwidth_tbs")
        return ("memory_copy_fraction", x / (bw.value * 1e12), f"{x / 1e12:.2f} TB/s of {bw.value:g}") if bw else None
    if measure == "resnet50_gpu_preset_ips":
        return measure, x, f"{x:.0f} img/s"
    if measure == "kernel_launches_per_s":
        return measure, x, f"{x:.0f} launches/s"
    return None


def site_file(golden: Sequence[Golden], boards: Sequence[Board], when: str, store: str) -> tuple[str, int]:
    """The site file's text, and how many values it holds, each naming `store` (the results store its samples are
    in), its framework and revision; a ConfigError line (nothing to write) when a golden GPU has no board file,
    when no measure has MIN_SAMPLES samples, or when one is too noisy."""
    by: dict[tuple[str, str], list[Golden]] = {}
    for g in golden:
        board = for_gpu(g.name, boards)
        if board is None:
            raise ConfigError(
                f"accept --init: {g.name} ({g.node}:{g.index}) has no board file: add one with its datasheet values to "
                "dltestbed/boards/ (docs/reference.md, 'Expected values per board')"
            )
        for measure in g.samples:
            by.setdefault((board.key, measure), []).append(g)
    tables: dict[str, list[str]] = {}
    noisy = []
    for (key, measure), gs in sorted(by.items()):
        board = next(b for b in boards if b.key == key)
        pooled = [x for g in gs for x in g.samples[measure]]
        if len(pooled) < MIN_SAMPLES:
            continue
        tol = max(INIT_MIN_TOLERANCE, INIT_SPREADS * (cv(pooled) or 0.0) * 100)
        if tol > INIT_MAX_TOLERANCE:
            noisy.append((tol, f"{key} {measure}"))
            continue
        found = as_board_holds(board, gs[0].name, measure, median(pooled))
        if found is None:
            continue
        name, value, how = found
        nodes = ", ".join(sorted({f"{g.node}:{g.index}" for g in gs}))
        source = (
            f"measured: {gs[0].name}, driver {gs[0].driver}, on {nodes}, by dltestbed accept --init, {when}: {how} "
            f"(median of {len(pooled)}, run-to-run CV {(cv(pooled) or 0.0) * 100:.1f} %)"
        )
        framework, revision = gs[0].measured_by[measure]
        entry = (
            f"values.{name} = {{ value = {value:.4g}, source = {json.dumps(source)}, store = {json.dumps(store)}, "
            f"framework = {json.dumps(framework)}, revision = {revision} }}"
        )
        tables.setdefault(key, [f"[boards.{key}]", "version = 1", f"board = {json.dumps(board.board)}"]).append(entry)
    if noisy:
        tol, what = max(noisy)
        raise ConfigError(
            f"accept --init: the golden measures are too noisy to be a reference: {len(noisy)} varied beyond "
            f"±{INIT_MAX_TOLERANCE / INIT_SPREADS:.1f} % (worst: {what}, ±{tol / INIT_SPREADS:.1f} %); nothing "
            "written; make the golden node quiet (nothing else running), then --init again"
        )
    if not tables:
        raise ConfigError(
            f"accept --init: no measure of the golden GPUs has {MIN_SAMPLES} samples; run --level standard"
        )
    head = f"# dltestbed's expected values from golden nodes, written by dltestbed accept --init, {when}\n"
    count = sum(len(t) - 3 for t in tables.values())
    return head + "\n\n".join("\n".join(t) for t in tables.values()) + "\n", count
