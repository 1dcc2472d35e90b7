"""What a stage reads from its benches' runs, node by node: each node's measures (the median over its runs), the
first of its runs that failed, whether it answered at all, and the runs of one pair of nodes."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median

from dltestbed.accept import facts as facts_mod
from dltestbed.orchestrate import DID_NOT_ANSWER
from dltestbed.results.records import RunRecord
from dltestbed.results.store import Store
from dltestbed.workload.probes.base import ALLREDUCE_BYTES, size_words


def unanswered(runs: Sequence[RunRecord]) -> dict[str, str]:
    """The nodes that did not answer when a bench began (every run of theirs failed so): node → why."""
    by: dict[str, list[RunRecord]] = {}
    for r in runs:
        by.setdefault(r.host, []).append(r)
    return {
        node: str(rs[0].reason)
        for node, rs in by.items()
        if all(r.status != "ok" and DID_NOT_ANSWER in (r.reason or "") for r in rs)
    }


def node_measures(runs: Sequence[RunRecord], store: Store) -> dict[str, dict[str, float]]:
    """measure → node → its median over the node's ok runs: the runs of the node as a whole (a CPU node's, and
    the all-reduce over a node's GPUs at its largest size, as nccl-tests quotes it), and the host's memory
    bandwidth as its GPUs' runs measured it; the rest of a GPU's run is judged per GPU."""
    by: dict[str, dict[str, list[float]]] = {}
    for r in runs:
        if r.status != "ok":
            continue
        largest = f"allreduce {size_words(ALLREDUCE_BYTES[r.spec.get('scale', 'small')][-1])} busbw"
        for name, value in facts_mod.run_measures(r, store.measures(r.id) if r.is_probe else []).items():
            if name.startswith("allreduce ") and name != largest:
                continue
            if r.spec.get("gpu") and not name.startswith("membw "):  # of a GPU's run, only the host's memory
                continue
            by.setdefault(name, {}).setdefault(r.host, []).append(value)
    return {name: {node: median(v) for node, v in nodes.items()} for name, nodes in by.items()}


def failures(runs: Sequence[RunRecord]) -> dict[str, str]:
    """node → the first failed run's reason."""
    out: dict[str, str] = {}
    for r in runs:
        if r.status != "ok":
            out.setdefault(r.host, f"{r.model}: {r.reason or r.status}")
    return out


def pair_runs(runs: Sequence[RunRecord], pair: Sequence[str]) -> list[RunRecord]:
    """The runs of the jobs over exactly this pair of nodes (a bench holds every pair's jobs)."""
    jobs: dict[str | None, list[RunRecord]] = {}
    for r in runs:
        jobs.setdefault(r.job_id, []).append(r)
    return [r for rs in jobs.values() if {x.host for x in rs} == set(pair) for r in rs]
