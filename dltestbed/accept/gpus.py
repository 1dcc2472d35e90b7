"""Each GPU's evidence and verdict from the runs acceptance stored: its NVML facts (a run's fingerprint), its
health counters and XIDs, its samples, its probes, its screen's checks and its ResNet-50 img/s, judged against
its board's expected values and its peers (report/gpu_verdicts.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from statistics import median
from typing import Any

from dltestbed import expected
from dltestbed.accept.facts import (
    RESNET50,
    case_conditions,
    gpu_evidence,
    measure_of,
    rate,
    revisions,
    run_measures,
)
from dltestbed.accept.golden import Golden
from dltestbed.choices import NODE
from dltestbed.orchestrate.presets import PRESETS
from dltestbed.report.gpu_evidence import MEASURES, GpuEvidence, GpuVerdict, Reason, worst
from dltestbed.report.gpu_verdicts import judge
from dltestbed.report.verdicts import FAIL, UNDECIDED
from dltestbed.results.records import RunRecord
from dltestbed.results.store import Store
from dltestbed.workload.events import CheckEvent


def boards(site: Path | None) -> tuple[expected.Board, ...]:
    """The shipped boards, with a site's values over them."""
    shipped = expected.shipped()
    return expected.with_site(shipped, site) if site is not None else shipped


def _device(r: RunRecord) -> tuple[int, dict[str, Any]] | None:
    """The GPU a run used: a per-GPU run's (its index, NVML's as the controller read it), or the one GPU of a
    machine that has one; and its NVML facts. None: no GPU, or one of several not named."""
    index, uuid = r.spec.get("gpu_index"), r.spec.get("gpu")
    devices = [g for g in r.fingerprint.get("gpus") or [] if isinstance(g, Mapping)]
    if index is None:
        if len(devices) != 1 or r.device == "cpu":
            return None
        return int(devices[0].get("index", 0)), dict(devices[0])
    found = next((g for g in devices if uuid and g.get("uuid") == uuid), devices[0] if len(devices) == 1 else {})
    return int(index), dict(found)


def gpu_preset(r: RunRecord) -> bool:
    """Whether a model run ran in the `gpu` preset's settings (its batch, mixed precision, XLA, native size):
    the only ResNet-50 figure a board's expected value is for."""
    p = PRESETS["gpu"]
    return r.batch_size == p.batch_size and r.xla == p.xla and r.math.startswith("mixed") and r.image_size == 224


def _wrong(c: CheckEvent) -> Reason:
    return Reason(
        "screen",
        FAIL,
        f"computed a wrong result: {c.case}, {c.mismatches} of {c.elements} elements beyond the bound "
        f"({c.worst:.3g} > {c.tolerance:.3g}){'; ' + c.where if c.where else ''}",
        "drain the node and return the board (a GPU that computes wrong numbers silently corrupts jobs)",
        f"{c.kind} check, seed {c.seed}",
    )


def evidence(
    store: Store, runs: Sequence[RunRecord], earlier: Sequence[RunRecord] = ()
) -> tuple[list[GpuEvidence], dict[str, list[Reason]]]:
    """Every GPU's evidence from its ok runs, and the screen's wrong results per GPU (`node:index`). `earlier`:
    runs whose measures were superseded (the first pass of a node run again) but whose XIDs, ECC errors and
    wrong results still count. A run over several GPUs gives each its health and wrong results by index."""
    by: dict[tuple[str, int], dict[str, Any]] = {}

    def entry(node: str, index: int) -> dict[str, Any]:
        return by.setdefault(
            (node, index),
            {"device": {}, "checks": [], "samples": [], "measures": {}, "by": {}, "said": {}, "ips": [], "wrong": []},
        )

    for r in [*earlier, *runs]:
        measured = r in runs and r.status == "ok"
        health, checks = store.health(r.id), store.checks(r.id) if r.status == "ok" else []
        found = _device(r)
        if found is None:
            for h in health:
                for g in h.gpus:
                    entry(r.host, int(g.get("index", 0)))["checks"].append(h)
            if r.spec.get("gpus") != NODE:  # a node's all-reduce is the node's (node_wrong): no one GPU to blame
                for c in checks:
                    if c.mismatches and c.gpu is not None:
                        entry(r.host, c.gpu)["wrong"].append(c)
            continue
        index, device = found
        e = entry(r.host, index)
        e["device"] = device or e["device"]
        e["checks"] += health
        e["wrong"] += [c for c in checks if c.mismatches]
        if not measured:
            continue
        samples = store.resources(r.id)
        e["samples"] += samples
        if r.is_probe:
            measures = store.measures(r.id)
            e["measures"].update(run_measures(r, measures))
            e["by"].update(revisions(r))
            e["said"].update(case_conditions(measures, samples, index))
        elif r.model == "resnet50" and r.images_per_sec and gpu_preset(r):
            e["ips"].append(r.images_per_sec)
            e["by"][RESNET50] = revisions(r)[f"{r.model} img/s"]
    out, wrong = [], {}
    for (node, index), e in by.items():
        if e["ips"]:
            e["measures"][RESNET50] = median(e["ips"])
        ev = gpu_evidence(node, index, e["device"], e["checks"], e["samples"], e["measures"], e["by"], e["said"])
        out.append(ev)
        if e["wrong"]:
            wrong[ev.gpu] = [_wrong(e["wrong"][0])]
    return out, wrong


def node_wrong(store: Store, runs: Sequence[RunRecord]) -> dict[str, list[Reason]]:
    """The wrong sums of an all-reduce over a node's GPUs (`--gpus node`), as the node's reasons: which GPU or
    link is at fault is for nccl-tests or DCGM's diagnostic to say."""
    out: dict[str, list[Reason]] = {}
    for r in runs:
        if r.spec.get("gpus") != NODE or r.status != "ok":
            continue
        bad = [c for c in store.checks(r.id) if c.mismatches]
        if bad:
            c = bad[0]
            why = f"all-reduce over the node's GPUs gave a wrong sum: {c.case}, {c.mismatches} of {c.elements} elements"
            act = "drain the node; find the GPU or NVLink at fault with nccl-tests or dcgmi diag, then service it"
            out.setdefault(r.host, []).append(Reason("allreduce", FAIL, why, act, f"{c.kind} check, seed {c.seed}"))
    return out


def _unmeasured(ev: GpuEvidence, found: Sequence[GpuEvidence], board: expected.Board | None) -> list[Reason]:
    """What a GPU was not measured in that its board expects or another GPU of its name was measured in: cannot
    judge (a probe that could not run is never a pass)."""
    out = []
    for name, label in MEASURES.items():
        if name in ev.measures:
            continue
        others = any(name in g.measures for g in found if g.name == ev.name)
        wanted = board is not None and any(k in board.values for k in (name, f"{name}_fraction"))
        if others or wanted:
            out.append(Reason(name, UNDECIDED, f"{label} was not measured on this GPU"))
    return out


def verdicts(
    store: Store, runs: Sequence[RunRecord], site: Path | None, earlier: Sequence[RunRecord] = ()
) -> list[GpuVerdict]:
    """Every GPU's verdict: gpu_verdicts' checks, what it was not measured in, and the screen's wrong results."""
    found, wrong = evidence(store, runs, earlier)
    known = boards(site)
    out = []
    for v, ev in zip(judge(found, known), found, strict=True):
        extra = tuple(_unmeasured(ev, found, expected.for_gpu(ev.name, known)) + wrong.get(v.gpu, []))
        if extra:
            reasons = v.reasons + extra
            v = replace(v, verdict=worst(reasons), reasons=reasons)
        out.append(v)
    return out


def golden(store: Store, runs: Sequence[RunRecord]) -> list[Golden]:
    """Each GPU's samples for `accept --init`: every timed call of its probes (by measure_of's names, in
    run_measures' units: a launch's time as its rate; of cases with the same name, such as a pinned copy from
    each NUMA node, the best one's, as judging takes) and each of its gpu-preset ResNet-50 runs; with the framework
    and revision that measured each."""
    by: dict[tuple[str, int], tuple[dict[str, Any], dict[tuple[str, str], list[float]], dict[str, tuple[str, int]]]]
    by = {}
    for r in runs:
        found = _device(r)
        if found is None or r.status != "ok":
            continue
        index, device = found
        _, cases, made = by.setdefault((r.host, index), (device, {}, {}))
        if r.is_probe:
            revs = revisions(r)
            for m in store.measures(r.id):
                name = measure_of(f"{m.probe} {m.case}")
                if m.phase == "timed" and name is not None and m.value > 0:
                    cases.setdefault((name, m.case), []).append(rate(m))
                    made[name] = revs.get(f"{m.probe} {m.case}", (r.framework, 1))
        elif r.model == "resnet50" and r.images_per_sec and gpu_preset(r):
            cases.setdefault((RESNET50, ""), []).append(r.images_per_sec)
            made[RESNET50] = revisions(r)[f"{r.model} img/s"]
    out = []
    for (node, index), (dev, cases, made) in by.items():
        best: dict[str, list[float]] = {}
        for (name, _), values in cases.items():
            if name not in best or median(values) > median(best[name]):
                best[name] = values
        out.append(Golden(node, index, str(dev.get("name", "GPU")), str(dev.get("driver", "")), best, made))
    return out


def failing_nodes(site: Path | None, store: Store, runs: Sequence[RunRecord]) -> list[str]:
    """The nodes with a GPU that fails."""
    return sorted({v.gpu.rsplit(":", 1)[0] for v in verdicts(store, runs, site) if v.verdict == FAIL})
