"""The library call under `dltestbed accept`: the cheap checks, the stages (stages.py), then the verdict per
node and GPU (judge.py), the remedies (dry-run unless asked), and the evidence pack (pack.py), signed."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import median
from typing import Any

import yaml

from dltestbed import __version__, evidence, inventory, remedy
from dltestbed import expected as expected_mod
from dltestbed.accept import facts as facts_mod
from dltestbed.accept import golden, pack
from dltestbed.accept import gpus as gpus_mod
from dltestbed.accept import judge as judge_mod
from dltestbed.accept.levels import level as level_of
from dltestbed.accept.request import AcceptRequest
from dltestbed.accept.stages import (
    SKIPPABLE,
    STAGES,
    Ctx,
    Fleet,
    Hold,
    Measure,
    NodeGpus,
    Preflight,
    Provision,
    SecondPass,
    failures,
    node_measures,
    read_runs,
    run_stages,
)
from dltestbed.accept.state import State, digest
from dltestbed.errors import ConfigError
from dltestbed.orchestrate import BenchInterrupted, BenchObserver
from dltestbed.report import drift as drift_mod
from dltestbed.report.gpu_verdicts import GpuVerdict, Reason
from dltestbed.report.verdicts import FAIL, PASS, UNDECIDED, WARN
from dltestbed.results.records import RunRecord, now_iso
from dltestbed.results.store import Store


@dataclass(frozen=True)
class AcceptOutcome:
    """Each node's verdict, the exit code they call for, the remedies done (or shown) and the pack."""

    id: str
    nodes: tuple[judge_mod.NodeVerdict, ...]
    exit_code: int
    remedies: tuple[remedy.Done, ...]
    pack: Path
    signed: bool


def _golden(path: Path | None) -> dict[str, str] | None:
    """The golden spec: a YAML mapping of fact → value (drift.FACTS' names), or one line."""
    if path is None:
        return None
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"--golden {str(path)!r}: cannot read ({exc.strerror})") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--golden {str(path)!r}: not YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(doc, dict) or not doc:
        raise ConfigError(f"--golden {str(path)!r}: give a mapping of fact to value, e.g. 'driver: 570.133.20'")
    return {str(k): str(v) for k, v in doc.items()}


def check(request: AcceptRequest) -> tuple[tuple[str, ...], str]:
    """Everything cheap, before any node is touched: the level, the stages named, the remedies, the key, the
    golden spec, the site's expected values and the inventory's nodes (bare_metal). The nodes, and the
    inventory's digest."""
    level_of(request.level)
    unknown = sorted(set(request.skip) - set(STAGES))
    if unknown:
        raise ConfigError(f"--skip {unknown[0]!r}: no such stage; the stages: {', '.join(STAGES)}")
    core = sorted(set(request.skip) - set(SKIPPABLE))
    if core:
        raise ConfigError(f"--skip {core[0]}: the verdict needs it; a stage may be skipped: {', '.join(SKIPPABLE)}")
    if request.on_fail is not None:
        remedy.check_spec(request.on_fail, "--on-fail")
    if request.on_pass is not None:
        remedy.check_spec(request.on_pass, "--on-pass")
    if request.sign_key is not None and not request.sign_key.is_file():
        raise ConfigError(f"--sign-key {str(request.sign_key)!r}: no such file")
    _golden(request.golden)
    gpus_mod.boards(request.expected)
    inv = inventory.load(request.inventory, request.limit)
    nodes = tuple(h.name for h in inv.in_role("bare_metal"))
    if not nodes:
        raise ConfigError(f"{request.inventory}: no node to accept in {inv.role_help('bare_metal')}")
    if request.on_fail is not None or request.on_pass is not None:
        for node in nodes:  # a remedy's name check, before any node is measured
            remedy.command(remedy.RESUME, node)
    return nodes, hashlib.sha256(request.inventory.read_bytes()).hexdigest()


def _request_digest(request: AcceptRequest, inventory_digest: str, init: bool = False) -> str:
    """What makes two acceptances the same one (for --resume): the inventory's content, the store its benches
    are in, the expected values, and the options that change what is measured."""
    site = request.expected.read_bytes() if request.expected is not None and not init else b""
    return digest(
        {
            "inventory": inventory_digest,
            "results": str(Store.where(request.results)),
            "expected": hashlib.sha256(site).hexdigest(),
            "level": request.level,
            "limit": request.limit,
            "framework": request.framework,
            "slowdown": request.slowdown,
            "parallel": request.parallel,
            "hold": request.hold_seconds,
            "skip": sorted(request.skip),
            "init": init,
        }
    )


def run_accept(request: AcceptRequest, observer: BenchObserver) -> AcceptOutcome:
    """Accept the inventory's nodes: every stage (a finished one not again, with --resume), then the verdict
    and the pack. Bad input is one DltestbedError before any node is touched; a stop (Ctrl-C) keeps the
    finished stages for --resume and is BenchInterrupted."""
    nodes, inv_digest = check(request)
    state, resumed = State.begin(request.out, _request_digest(request, inv_digest), request.resume)
    if resumed:
        observer.say(f"accept {state.id}: resumed from {request.out}")
    ctx = Ctx(request, level_of(request.level), nodes, inv_digest, observer, state)
    try:
        run_stages(ctx, observer.say)
    except BenchInterrupted as exc:
        raise BenchInterrupted(
            f"{exc}; the finished stages are kept: `dltestbed accept --resume --out {request.out}` (with the same "
            "options) goes on from there"
        ) from None
    return verdict(ctx)


INIT_STAGES = (Provision.name, Preflight.name, Measure.name)  # what --init measures of its golden nodes


def run_init(request: AcceptRequest, observer: BenchObserver) -> tuple[Path, int]:
    """`accept --init`: measure the golden nodes (provision, preflight, measure) and write the site's expected
    values to `request.expected` (golden.site_file); the file and how many values it holds."""
    target = request.expected
    if target is None:
        raise ConfigError("accept --init: --expected FILE: where to write the site's expected values")
    if level_of(request.level).repeat < golden.MIN_SAMPLES:
        raise ConfigError(
            f"accept --init: --level {request.level} runs the model once; a reference needs "
            f"{golden.MIN_SAMPLES} runs to say how much it varies: --level standard"
        )
    nodes, inv_digest = check(replace(request, expected=None))  # the file is what --init writes
    state, _ = State.begin(request.out, _request_digest(request, inv_digest, init=True), request.resume)
    ctx = Ctx(request, level_of(request.level), nodes, inv_digest, observer, state)
    try:
        run_stages(ctx, observer.say, only=INIT_STAGES[:-1])
        if not ctx.gpu:  # before the GPUs' measures are asked of nodes that have none
            raise ConfigError("accept --init: the golden nodes have no GPU; expected values are per GPU board")
        run_stages(ctx, observer.say, only=INIT_STAGES)
    except BenchInterrupted as exc:
        raise BenchInterrupted(f"{exc}; `dltestbed accept --init --resume` (with the same options) goes on") from None
    store = Store.open(request.results, read_only=True)
    try:
        found = gpus_mod.golden(store, read_runs(store, state.stages[Measure.name].benches))
    finally:
        store.close()
    text, count = golden.site_file(found, expected_mod.shipped(), now_iso()[:10])
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--expected {str(target)!r}: cannot write ({exc.strerror})") from None
    return target, count


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
    for node, partner, bench in ctx.data(SecondPass.name).get("pairs", []):
        if not bench:
            why = "its pair's network or all-reduce failed, and no known-good node was left to pair it with"
            out.setdefault(node, []).append(Reason("pairs", UNDECIDED, why))
            continue
        runs = [r for r in store.runs(bench_id=bench) if r.role == "foreground"]
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


def _trends(ctx: Ctx, store: Store) -> dict[str, list[Reason]]:
    """Burn-in: each round's model img/s per node (and per GPU), judged from the first round to the last."""
    rounds = [
        {
            (r.host, r.unit, f"{r.model} img/s"): r.images_per_sec
            for b in benches
            for r in store.runs(bench_id=b)
            if r.role == "foreground" and r.status == "ok" and r.images_per_sec and not r.is_probe
        }
        for benches in ctx.data(Hold.name).get("rounds", [])
    ]
    return judge_mod.trends(rounds, ctx.request.slowdown)


def findings(ctx: Ctx, store: Store) -> tuple[judge_mod.Findings, dict[str, Any]]:
    """Everything the nodes are judged on, from the stages' data and the store; and every fact (for the pack)."""
    pre, fleet, second = ctx.data(Preflight.name), ctx.data(Fleet.name), ctx.data(SecondPass.name)
    node_facts: dict[str, dict[str, str]] = pre.get("facts", {})
    drifts = drift_mod.drift(node_facts, _golden(ctx.request.golden)) if node_facts else []
    first_runs = read_runs(store, ctx.data_benches(Measure.name) + ctx.data_benches(NodeGpus.name))
    second_runs = read_runs(store, second.get("measure", []))
    hold_runs = read_runs(store, [b for r in ctx.data(Hold.name).get("rounds", []) for b in r])
    rerun = second.get("rerun", [])
    measures = fleet.get("measures") or node_measures(first_runs, store)
    failed = {**fleet.get("failed", failures(first_runs))}
    second_failed = failures(second_runs)
    extra: dict[str, list[Reason]] = {}
    for node, why in pre.get("failed", {}).items():
        extra.setdefault(node, []).append(Reason("preflight", UNDECIDED, f"its facts could not be read: {why}"))
    held = {
        node: [Reason("burn-in", FAIL, f"a burn-in run failed: {why}", judge_mod.FAILED_ACTION)]
        for node, why in failures(hold_runs).items()
    }
    for src in (_pairs(ctx, store), _trends(ctx, store), held):
        for node, reasons in src.items():
            extra.setdefault(node, []).extend(reasons)
    for node in ctx.nodes:
        if node not in node_facts and node not in pre.get("failed", {}) and pre:
            extra.setdefault(node, []).append(Reason("preflight", UNDECIDED, "no preflight run reported its facts"))
    gpus: list[GpuVerdict] = []
    if ctx.gpu:
        final = [r for r in first_runs if r.host not in rerun] + second_runs
        superseded = [r for r in first_runs if r.host in rerun] + hold_runs  # their XIDs and wrong results count
        gpus = gpus_mod.verdicts(store, final, ctx.request.expected, superseded)
        for node, count in pre.get("gpus", {}).items():
            judged = sum(g.gpu.rsplit(":", 1)[0] == node for g in gpus)
            if judged < count:
                why = f"preflight saw {count} GPU(s); {judged} were measured"
                extra.setdefault(node, []).append(Reason("gpus", UNDECIDED, why))
    slow = sorted({s.node for s in judge_mod.suspects(measures, ctx.request.slowdown)})
    f = judge_mod.Findings(
        nodes=ctx.nodes,
        drifts=drifts,
        measures=measures,
        second=node_measures(second_runs, store),
        failed=failed,
        failed_second={n: second_failed.get(n) for n in rerun},
        causes=_causes(store, second_runs or first_runs, first_runs, slow),
        gpus=gpus,
        extra=extra,
        slowdown=ctx.request.slowdown,
    )
    every = {
        "nodes": node_facts,
        "fingerprints": {r.host: r.fingerprint for r in first_runs if r.status == "ok"},
        "measures": {"first pass": measures, "second pass": f.second},
    }
    return f, every


def _remedies(request: AcceptRequest, nodes: Sequence[judge_mod.NodeVerdict]) -> list[remedy.Done]:
    """--on-fail for each failed node, --on-pass for each that passed: run with --apply, else shown."""
    asked = []
    for n in nodes:
        spec = request.on_fail if n.verdict == FAIL else request.on_pass if n.verdict == PASS else None
        if spec is not None:
            reason = n.summary if n.verdict == FAIL else ""
            asked.append(remedy.Remedy(n.node, remedy.command(spec, n.node, reason), f"{n.verdict}: {reason}"))
    return remedy.apply(asked, dry_run=not request.apply)


def verdict(ctx: Ctx) -> AcceptOutcome:
    """Judge every node and GPU, do (or show) the remedies, write the pack, sign its manifest."""
    store = Store.open(ctx.request.results, read_only=True)
    try:
        f, every = findings(ctx, store)
    finally:
        store.close()
    nodes = judge_mod.judge(f)
    code = judge_mod.exit_code(nodes)
    done = _remedies(ctx.request, nodes)
    counts = {v: sum(n.verdict == v for n in nodes) for v in (PASS, WARN, FAIL, UNDECIDED)}
    summary = {
        "id": ctx.state.id,
        "outcome": ", ".join(f"{c} {v}" for v, c in counts.items() if c),
        "exit_code": code,
        "level": ctx.level.name,
        "inventory": str(ctx.request.inventory),
        "dltestbed": __version__,
        "started_at": ctx.state.started_at,
        "finished_at": now_iso(),
        "benches": ctx.state.benches(),
        "stages": {k: v.finished_at for k, v in ctx.state.stages.items()},
        "sensitivity": (
            f"A node is slow in a measure when it is at least {ctx.request.slowdown:g} % below its peers' median "
            "with a leave-one-out modified z-score below −3.5 (Iglewicz & Hoaglin), over a whole run's timed "
            f"steps ({ctx.level.steps} steps; probes {ctx.level.probe_steps} calls a case), in the first pass and "
            "again in the second. A GPU fails a measure below 0.75 of what a healthy board of its kind reaches."
        ),
    }
    pack.write(ctx.request.out, summary, nodes, every, ctx.request.inventory, done)
    evidence.write_manifest(ctx.request.out)
    signed = False
    if ctx.request.sign_key is not None:
        evidence.sign(ctx.request.out, ctx.request.sign_key)
        signed = True
    return AcceptOutcome(ctx.state.id, tuple(nodes), code, tuple(done), ctx.request.out, signed)
