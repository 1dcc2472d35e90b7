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
from dltestbed.accept.facts import gpu_evidence, run_measures
from dltestbed.report.gpu_verdicts import GpuEvidence, GpuVerdict, Reason, judge
from dltestbed.report.verdicts import FAIL
from dltestbed.results.records import RunRecord
from dltestbed.results.store import Store


def boards(site: Path | None) -> tuple[expected.Board, ...]:
    """The shipped boards, with a site's values over them."""
    shipped = expected.shipped()
    return expected.with_site(shipped, site) if site is not None else shipped


def _device(r: RunRecord) -> tuple[int, dict[str, Any]] | None:
    """The GPU a per-GPU run used: its index (NVML's, as the controller read it) and its NVML facts."""
    index, uuid = r.spec.get("gpu_index"), r.spec.get("gpu")
    if index is None:
        return None
    devices = [g for g in r.fingerprint.get("gpus") or [] if isinstance(g, Mapping)]
    found = next((g for g in devices if uuid and g.get("uuid") == uuid), devices[0] if len(devices) == 1 else {})
    return int(index), dict(found)


def evidence(store: Store, runs: Sequence[RunRecord]) -> tuple[list[GpuEvidence], dict[str, list[Reason]]]:
    """Every GPU's evidence from its ok runs, and the screen's wrong results per GPU (`node:index`)."""
    by: dict[tuple[str, int], dict[str, Any]] = {}
    for r in runs:
        found = _device(r)
        if found is None:
            continue
        index, device = found
        e = by.setdefault((r.host, index), {"device": {}, "checks": [], "samples": [], "measures": {}, "ips": []})
        e["device"] = device or e["device"]
        e["checks"] += store.health(r.id)
        if r.status != "ok":
            continue
        e["samples"] += store.resources(r.id)
        if r.is_probe:
            e["measures"].update(run_measures(r, store.measures(r.id)))
            for c in store.checks(r.id):
                if c.mismatches:
                    e.setdefault("wrong", []).append(c)
        elif r.model == "resnet50" and r.images_per_sec:
            e["ips"].append(r.images_per_sec)
    out, wrong = [], {}
    for (node, index), e in by.items():
        ips = median(e["ips"]) if e["ips"] else None
        ev = gpu_evidence(node, index, e["device"], e["checks"], e["samples"], e["measures"], ips)
        out.append(ev)
        if e.get("wrong"):
            c = e["wrong"][0]
            wrong[ev.gpu] = [
                Reason(
                    "screen",
                    FAIL,
                    f"computed a wrong result: {c.case}, {c.mismatches} of {c.elements} elements beyond the bound "
                    f"({c.worst:.3g} > {c.tolerance:.3g}){'; ' + c.where if c.where else ''}",
                    "drain the node and return the board (a GPU that computes wrong numbers silently corrupts jobs)",
                    f"{c.kind} check, seed {c.seed}",
                )
            ]
    return out, wrong


def verdicts(store: Store, runs: Sequence[RunRecord], site: Path | None) -> list[GpuVerdict]:
    """Every GPU's verdict: gpu_verdicts' checks, and the screen's wrong results."""
    found, wrong = evidence(store, runs)
    out = []
    for v in judge(found, boards(site)):
        extra = tuple(wrong.get(v.gpu, ()))
        out.append(replace(v, verdict=FAIL, reasons=v.reasons + extra) if extra else v)
    return out


def failing_nodes(site: Path | None, store: Store, runs: Sequence[RunRecord]) -> list[str]:
    """The nodes with a GPU that fails."""
    return sorted({v.gpu.rsplit(":", 1)[0] for v in verdicts(store, runs, site) if v.verdict == FAIL})
