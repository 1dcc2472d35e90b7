"""Everything an acceptance's nodes are judged on, read from its stages' data and the store: drift, the two
passes' measures and failures, what explains a slow node, the pairs, burn-in's trends, the GPUs' verdicts, and
every fact for the pack."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from statistics import median
from typing import Any, NamedTuple

from dltestbed.accept import facts as facts_mod
from dltestbed.accept import gpus as gpus_mod
from dltestbed.accept import judge as judge_mod
from dltestbed.accept import slowness
from dltestbed.accept.context import golden_spec
from dltestbed.accept.found import Beside, Rejoined, Rerun
from dltestbed.accept.readings import failures, node_measures, pair_runs
from dltestbed.accept.retest import Hold, Rejoin, SecondPass
from dltestbed.accept.stages import (
    STAGES,
    Ctx,
    Fleet,
    Measure,
    NodeGpus,
    Preflight,
    read_runs,
)
from dltestbed.report import drift as drift_mod
from dltestbed.report import gpu_verdicts
from dltestbed.report.gpu_evidence import GpuVerdict, Reason
from dltestbed.report.verdicts import FAIL, PASS, UNDECIDED
from dltestbed.results.records import RunRecord
from dltestbed.results.store import Store


def _cpu_shares(store: Store, runs: Sequence[RunRecord]) -> dict[str, float]:
    """Each node's median share of its CPUs over its ok model runs (facts.cpu_share)."""
    by: dict[str, list[float]] = {}
    for r in runs:
        if r.status == "ok" and not r.is_probe:
            share = facts_mod.cpu_share(store.resources(r.id), r.fingerprint.get("cpu_affinity"))
            if share is not None:
                by.setdefault(r.host, []).append(share)
    return {k: median(v) for k, v in by.items()}


def _causes(store: Store, runs: Sequence[RunRecord], first: Sequence[RunRecord], slow: Sequence[str]) -> dict[str, str]:
    """What explains each slow node: its own model run (the second pass's) against its peers' CPU shares."""
    shares = _cpu_shares(store, first)
    out = {}
    for node in slow:
        mine = [r for r in runs if r.host == node and r.status == "ok" and not r.is_probe]
        if not mine:
            continue
        peers = [v for k, v in shares.items() if k != node]
        out[node] = facts_mod.slow_cause(mine[-1], store.resources(mine[-1].id), median(peers) if peers else None)
    return out


def _pairs(ctx: Ctx, store: Store) -> dict[str, list[Reason]]:
    """The second pass's pairs: each node of a failed pair again, with a known-good node."""
    out: dict[str, list[Reason]] = {}
    for node, partner, bench in ctx.found(SecondPass).pairs:
        if not bench or not partner:
            why = "its pair's network or all-reduce failed, and no known-good node was left to pair it with"
            out.setdefault(node, []).append(Reason("pairs", UNDECIDED, why))
            continue
        runs = pair_runs(read_runs(store, [bench]), (node, partner))
        bad = [r for r in runs if r.status != "ok"]
        if bad or not runs:
            said = bad[0].reason if bad else "no run"
            why = f"the network or all-reduce with known-good {partner} failed too: {said}"
            act = "drain the node; look at its network (link, cabling, switch port) and accept it again"
            out.setdefault(node, []).append(Reason("pairs", FAIL, why, act, f"bench {bench}"))
        else:
            why = f"its pair failed in the first pass; with known-good {partner} it worked"
            out.setdefault(node, []).append(Reason("pairs", PASS, why, "", f"bench {bench}"))
    return out


def _controls(beside: Beside, store: Store) -> dict[str, dict[str, dict[str, float]]]:
    """Each node measured beside controls → measure → its controls' values, measured in its own batch beside it."""
    controls = beside.controls
    out: dict[str, dict[str, dict[str, float]]] = {}
    for batch in beside.batches:
        measured = node_measures(read_runs(store, batch.benches), store)
        for node in batch.nodes:
            out[node] = {
                name: {c: values[c] for c in controls if c in values}
                for name, values in measured.items()
                if node in values
            }
    return out


def _merged(*measures: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """measure → node → value, from several sets of them (each node in one)."""
    out: dict[str, dict[str, float]] = {}
    for m in measures:
        for name, values in m.items():
            out.setdefault(name, {}).update(values)
    return out


def _trends(ctx: Ctx, store: Store) -> dict[str, list[Reason]]:
    """Burn-in: each round's model img/s per node (and per GPU), judged from the first round to the last."""
    rounds = [
        {
            (r.host, r.unit, f"{r.model} img/s"): r.images_per_sec
            for b in benches
            for r in store.runs(bench_id=b)
            if r.role == "foreground" and r.status == "ok" and r.images_per_sec and not r.is_probe
        }
        for benches in ctx.found(Hold).rounds
    ]
    return slowness.trends(rounds, ctx.request.judging.slowdown)


def left_out(ctx: Ctx, gpus: Sequence[GpuVerdict]) -> list[judge_mod.LeftOut]:
    """The checks this acceptance did not make, and why: each stage skipped or that does not apply, the peer
    comparison of fewer nodes than it needs, drift with one node and no golden spec, and GPUs too few of a name to
    be compared with each other."""
    out = []
    for name, cls in STAGES.items():
        if name in ctx.state.stages or not cls.listed:
            continue
        why = "skipped (--skip)" if name in ctx.request.nodes.skip else cls().applies(ctx)
        if why:
            out.append(judge_mod.LeftOut(f"stage {name}", why))
    if len(ctx.live) < slowness.PEERS_MIN:
        why = f"{len(ctx.live)} node(s) measured: a node is compared with its peers from {slowness.PEERS_MIN}"
        out.append(judge_mod.LeftOut("peers", why))
    if len(ctx.nodes) == 1 and ctx.request.judging.golden is None:
        why = "one node and no golden spec (--golden): nothing to compare its facts with"
        out.append(judge_mod.LeftOut("drift", why))
    names = Counter(g.name for g in gpus)
    for name, count in sorted(names.items()):
        if count < gpu_verdicts.PEERS_MIN:
            why = f"{count} GPU(s) {name}: a GPU is compared with its peers from {gpu_verdicts.PEERS_MIN}"
            out.append(judge_mod.LeftOut("GPU peers", why))
    return out


def _compared(ctx: Ctx, node_facts: Mapping[str, Mapping[str, str]]) -> dict[str, list[str]]:
    """Each node's facts its drift check compared: all it reported, but with one node only those the golden spec
    names (the rest have nothing to be compared with)."""
    golden = golden_spec(ctx.request.judging.golden) if len(ctx.nodes) == 1 else None
    if len(ctx.nodes) == 1 and golden is None:
        return {}
    return {n: sorted(f for f in node_facts.get(n, {}) if golden is None or f in golden) for n in ctx.nodes}


def _failed(check: str, said: str, runs: Sequence[RunRecord]) -> dict[str, list[Reason]]:
    """A failing reason for each node with a failed run among `runs`: what it `said`, and why the run failed."""
    failed = failures(runs)
    return {node: [Reason(check, FAIL, f"{said}: {why}", judge_mod.FAILED_ACTION)] for node, why in failed.items()}


class _Runs(NamedTuple):
    """The runs an acceptance judges, by pass: the first, the second, burn-in's, a mended node's, and again."""

    first: list[RunRecord]
    second: list[RunRecord]
    hold: list[RunRecord]
    back: list[RunRecord]
    again: list[RunRecord]


def _runs(ctx: Ctx, store: Store, second: Rerun, rejoin: Rejoined) -> _Runs:
    """The stages' runs, read from the store."""
    first = read_runs(store, ctx.data_benches(Measure.name) + ctx.data_benches(NodeGpus.name))
    hold = read_runs(store, [b for r in ctx.found(Hold).rounds for b in r])
    return _Runs(
        first,
        read_runs(store, second.measure),
        hold,
        read_runs(store, rejoin.measure),
        read_runs(store, rejoin.again.benches),
    )


def _gpus(
    ctx: Ctx,
    store: Store,
    runs: _Runs,
    again: tuple[Collection[str], Collection[str]],
    seen: dict[str, int],
    extra: dict[str, list[Reason]],
) -> list[GpuVerdict]:
    """Every GPU's verdict: a rerun node's second-pass runs replace its first (`again`: the nodes rerun, and those
    mended); the controls' second-pass runs judge no GPU, but their XIDs and wrong results count, as every
    superseded run's do. A node with fewer GPUs measured than preflight `seen` cannot be judged (in `extra`)."""
    rerun, rejoined = again
    final = [r for r in runs.first if r.host not in rerun] + [r for r in runs.second if r.host in rerun]
    final += [r for r in runs.back if r.host in rejoined]
    superseded = [r for r in runs.first if r.host in rerun] + [r for r in runs.second if r.host not in rerun]
    superseded += runs.hold + [r for r in runs.back if r.host not in rejoined] + runs.again
    gpus = gpus_mod.verdicts(store, final, ctx.request.judging.expected, superseded)
    for node, count in seen.items():
        judged = sum(g.gpu.rsplit(":", 1)[0] == node for g in gpus)
        if judged < count:
            why = f"preflight saw {count} GPU(s); {judged} were measured"
            extra.setdefault(node, []).append(Reason("gpus", UNDECIDED, why))
    return gpus


def findings(ctx: Ctx, store: Store) -> tuple[judge_mod.Findings, dict[str, Any]]:
    """Everything the nodes are judged on, from the stages' data and the store; and every fact (for the pack)."""
    pre, fleet, second = ctx.found(Preflight), ctx.found(Fleet), ctx.found(SecondPass)
    rejoin = ctx.found(Rejoin)  # the nodes left out, measured once mended (--resume)
    rejoined = rejoin.rejoined
    node_facts: dict[str, dict[str, str]] = {k: dict(v) for k, v in [*pre.facts.items(), *rejoin.facts.items()]}
    drifts = drift_mod.drift(node_facts, golden_spec(ctx.request.judging.golden)) if node_facts else []
    runs = _runs(ctx, store, second, rejoin)
    first_runs, second_runs, hold_runs, back_runs, again_runs = runs
    rerun = second.rerun
    again = rejoin.again  # a mended node slow beside its controls, measured beside them again
    measures = fleet.measures or node_measures(first_runs, store)
    failed = dict(fleet.failed) if Fleet.name in ctx.state.stages else failures(first_runs)
    second_failed = failures(second_runs)
    extra: dict[str, list[Reason]] = {}
    held = _failed("burn-in", "a burn-in run failed", hold_runs)
    wrong_sums = gpus_mod.node_wrong(store, [*first_runs, *second_runs])
    back = [r for r in back_runs + again_runs if r.host in rejoined]
    mended = _failed("runs", "a run failed once the node was mended", back)
    for src in (_pairs(ctx, store), _trends(ctx, store), held, wrong_sums, mended):
        for node, reasons in src.items():
            extra.setdefault(node, []).extend(reasons)
    gpus = _gpus(ctx, store, runs, (rerun, rejoined), {**pre.gpus, **rejoin.gpus}, extra) if ctx.gpu else []
    slow = sorted({s.node for s in slowness.suspects(measures, ctx.request.judging.slowdown)})
    f = judge_mod.Findings(
        nodes=ctx.nodes,
        drifts=drifts,
        measures=measures,
        second=_merged(
            node_measures([r for r in second_runs if r.host in rerun], store),
            node_measures([r for r in back_runs if r.host in rejoined], store),
        ),
        failed=failed,
        failed_second={n: second_failed.get(n) for n in rerun},
        causes=_causes(store, second_runs or first_runs, first_runs, slow),
        gpus=gpus,
        extra=extra,
        slowdown=ctx.request.judging.slowdown,
        compared=_compared(ctx, node_facts),
        drift_basis=drift_mod.GOLDEN if len(ctx.nodes) == 1 and ctx.request.judging.golden else "the fleet's majority",
        left_out=left_out(ctx, gpus),
        out=ctx.out,
        out_verdict=FAIL if ctx.request.judging.unreachable == "fail" else UNDECIDED,
        controls=_controls(second, store) | _controls(rejoin, store),
        rejoined=rejoined,
        again=node_measures([r for r in again_runs if r.host in rejoined], store),
        controls_again=_controls(again, store),
        # whether what ran beside controls ran at the same time (the passes that ran any: one --parallel for all)
        together=all(b.together for b in (second, rejoin, again) if b.batches),
    )
    every = {
        "nodes": node_facts,
        "fingerprints": {r.host: r.fingerprint for r in first_runs if r.status == "ok"},
        "measures": {"first pass": measures, "second pass": f.second, "controls": f.controls},
        "left out": {node: {"stage": stage, "why": why} for node, (stage, why) in f.out.items()},
    }
    return f, every
