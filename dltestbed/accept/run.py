"""The library call under `dltestbed accept`: the cheap checks, the stages (stages.py), then the verdict per
node and GPU (judge.py), the remedies (dry-run unless asked), and the evidence pack (pack.py), signed."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from dltestbed import __version__, evidence, inventory, remedy
from dltestbed import expected as expected_mod
from dltestbed.accept import golden, pack, slowness
from dltestbed.accept import gpus as gpus_mod
from dltestbed.accept import judge as judge_mod
from dltestbed.accept.context import golden_spec
from dltestbed.accept.findings import findings
from dltestbed.accept.found import Beside, Rejoined
from dltestbed.accept.levels import level as level_of
from dltestbed.accept.retest import Rejoin, SecondPass
from dltestbed.accept.stages import (
    SKIPPABLE,
    STAGES,
    Ctx,
    Measure,
    Preflight,
    Provision,
    read_runs,
    run_stages,
)
from dltestbed.accept.state import State, digest
from dltestbed.choices import UNREACHABLE
from dltestbed.errors import ConfigError
from dltestbed.orchestrate import BenchInterrupted, BenchObserver
from dltestbed.remedy.kubernetes import KUBECONFIG_VAR
from dltestbed.report import gpu_verdicts
from dltestbed.report.verdicts import FAIL, PASS, UNDECIDED, WARN
from dltestbed.requests.accept import AcceptRequest
from dltestbed.results.records import now_iso
from dltestbed.results.store import Store
from dltestbed.workload import frameworks


@dataclass(frozen=True)
class AcceptOutcome:
    """Each node's verdict, the exit code they call for, the remedies done (or shown) and the pack."""

    id: str
    nodes: tuple[judge_mod.NodeVerdict, ...]
    exit_code: int
    remedies: tuple[remedy.Done, ...]
    pack: Path
    signed: bool


def check(request: AcceptRequest) -> tuple[tuple[str, ...], str]:
    """Everything cheap, before any node is touched: the level, the stages named, the remedies, the key, the
    golden spec, the site's expected values and the inventory's nodes (bare_metal). The nodes, and the
    inventory's digest."""
    level_of(request.nodes.level)
    if request.judging.unreachable not in UNREACHABLE:
        raise ConfigError(f"--unreachable {request.judging.unreachable!r}: give {' or '.join(UNREACHABLE)}")
    if request.nodes.parallel is not None and request.nodes.parallel < 1:
        raise ConfigError(f"--parallel {request.nodes.parallel}: give how many nodes at once, 1 or more")
    if request.nodes.framework is not None:
        frameworks.framework(request.nodes.framework)
    unknown = sorted(set(request.nodes.skip) - set(STAGES))
    if unknown:
        raise ConfigError(f"--skip {unknown[0]!r}: no such stage; the stages: {', '.join(STAGES)}")
    core = sorted(set(request.nodes.skip) - set(SKIPPABLE))
    if core:
        raise ConfigError(f"--skip {core[0]}: the verdict needs it; a stage may be skipped: {', '.join(SKIPPABLE)}")
    for spec, option, _ in _remedies_asked(request):
        remedy.check_spec(spec, option)
    golden_spec(request.judging.golden)
    gpus_mod.boards(request.judging.expected)
    inv = inventory.load(request.nodes.inventory, request.nodes.limit)
    nodes = tuple(h.name for h in inv.in_role("bare_metal"))
    if not nodes:
        raise ConfigError(f"{request.nodes.inventory}: no node to accept in {inv.role_help('bare_metal')}")
    if _remedies_asked(request):
        for node in nodes:  # a remedy's name check, before any node is measured
            remedy.checked_node(node)
        where = _where(request, inv)
        for spec, option, _ in _remedies_asked(request) if request.pack.apply else ():
            remedy.check_found(spec, option, nodes, where)  # a hook that is not there: said now, not at the end
    if request.pack.sign_key is not None:  # last: it runs ssh-keygen
        evidence.check_key(request.pack.sign_key)
    return nodes, hashlib.sha256(request.nodes.inventory.read_bytes()).hexdigest()


def _remedies_asked(request: AcceptRequest) -> list[tuple[str, str, str]]:
    """(the command, its option, what the node does for it) of each of --on-fail and --on-pass given."""
    asked = ((request.pack.on_fail, "--on-fail", "fails"), (request.pack.on_pass, "--on-pass", "passes"))
    return [(spec, option, does) for spec, option, does in asked if spec is not None]


def _where(request: AcceptRequest, inv: inventory.Inventory | None = None) -> remedy.Where:
    """Where the built-in remedies act: the cluster of --kubeconfig, else of the inventory's dltestbed_kubeconfig
    (else the client's default, $KUBECONFIG)."""
    asked = {spec for spec, _, _ in _remedies_asked(request)}
    if request.pack.kubeconfig is not None or not asked & remedy.ON_A_CLUSTER:
        return remedy.Where(request.pack.kubeconfig)
    inv = inv or inventory.load(request.nodes.inventory, request.nodes.limit)
    return remedy.Where(inv.site_var(KUBECONFIG_VAR, "--kubeconfig"))


def remedies_shown(request: AcceptRequest, nodes: Sequence[str]) -> list[str]:
    """--on-fail and --on-pass as they will run, on the first node: a line each, said before any stage."""
    lines = []
    when = "run at the end (--apply)" if request.pack.apply else "shown at the end, run with --apply"
    where = _where(request)
    for spec, option, does in _remedies_asked(request):
        act = remedy.action(spec, nodes[0], does == "fails", "<why it failed>" if does == "fails" else "", where)
        lacking = act.missing()
        lost = f" ({lacking})" if lacking else ""
        lines.append(f"{option}: for a node that {does}, e.g. {nodes[0]}: {act.shown}{lost}; {when}")
    return lines


def _request_digest(request: AcceptRequest, inventory_digest: str, init: bool = False) -> str:
    """What makes two acceptances the same one (for --resume): the inventory's content, the store its benches
    are in, the expected values, and the options that change what is measured."""
    site = request.judging.expected.read_bytes() if request.judging.expected is not None and not init else b""
    return digest(
        {
            "inventory": inventory_digest,
            "results": str(Store.where(request.pack.results)),
            "expected": hashlib.sha256(site).hexdigest(),
            "level": request.nodes.level,
            "limit": request.nodes.limit,
            "framework": request.nodes.framework,
            "slowdown": request.judging.slowdown,
            "parallel": request.nodes.parallel,
            "hold": request.nodes.hold_seconds,
            "skip": sorted(request.nodes.skip),
            "init": init,
        }
    )


def run_accept(request: AcceptRequest, observer: BenchObserver) -> AcceptOutcome:
    """Accept the inventory's nodes: every stage (a finished one not again, with --resume), then the verdict
    and the pack. Bad input is one DltestbedError before any node is touched; a stop (Ctrl-C) keeps the
    finished stages for --resume and is BenchInterrupted."""
    nodes, inv_digest = check(request)
    for line in remedies_shown(request, nodes):
        observer.say(line)
    state, resumed = State.begin(request.pack.out, _request_digest(request, inv_digest), request.pack.resume)
    if resumed:
        observer.say(f"accept {state.id}: resumed from {request.pack.out}")
    ctx = Ctx(request, level_of(request.nodes.level), nodes, inv_digest, observer, state)
    try:
        run_stages(ctx, observer.say)
    except BenchInterrupted as exc:
        raise BenchInterrupted(f"{exc}; the finished stages are kept: {ctx.resume} goes on from there") from None
    return verdict(ctx)


INIT_STAGES = (Provision.name, Preflight.name, Measure.name)  # what --init measures of its golden nodes


def run_init(request: AcceptRequest, observer: BenchObserver) -> tuple[Path, int]:
    """`accept --init`: measure the golden nodes (provision, preflight, measure) and write the site's expected
    values to `request.judging.expected` (golden.site_file); the file and how many values it holds."""
    target = request.judging.expected
    if target is None:
        raise ConfigError("accept --init: --expected FILE: where to write the site's expected values")
    if level_of(request.nodes.level).repeat < golden.MIN_SAMPLES:
        raise ConfigError(
            f"accept --init: --level {request.nodes.level} runs the model once; a reference needs "
            f"{golden.MIN_SAMPLES} runs to say how much it varies: --level standard"
        )
    nodes, inv_digest = check(
        replace(request, judging=replace(request.judging, expected=None))
    )  # the file is what --init writes
    state, _ = State.begin(request.pack.out, _request_digest(request, inv_digest, init=True), request.pack.resume)
    ctx = Ctx(request, level_of(request.nodes.level), nodes, inv_digest, observer, state, init=True)
    try:
        run_stages(ctx, observer.say, only=INIT_STAGES[:-1])
        if not ctx.gpu:  # before the GPUs' measures are asked of nodes that have none
            raise ConfigError("accept --init: the golden nodes have no GPU; expected values are per GPU board")
        run_stages(ctx, observer.say, only=INIT_STAGES)
    except BenchInterrupted as exc:
        raise BenchInterrupted(f"{exc}; {ctx.resume} goes on") from None
    store = Store.open(request.pack.results, read_only=True)
    try:
        found = gpus_mod.golden(store, read_runs(store, state.stages[Measure.name].benches))
    finally:
        store.close()
    where = str(Store.where(request.pack.results))
    text, count = golden.site_file(found, expected_mod.shipped(), now_iso()[:10], where)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--expected {str(target)!r}: cannot write ({exc.strerror})") from None
    return target, count


def _remedies(request: AcceptRequest, nodes: Sequence[judge_mod.NodeVerdict]) -> list[remedy.Done]:
    """--on-fail for each failed node, --on-pass for each that passed: run with --apply, else shown."""
    asked = []
    where = _where(request)
    for n in nodes:
        spec = request.pack.on_fail if n.verdict == FAIL else request.pack.on_pass if n.verdict == PASS else None
        if spec is not None:
            why = n.summary if n.verdict == FAIL else ""
            act = remedy.action(spec, n.node, n.verdict == FAIL, why, where)
            asked.append(remedy.Remedy(n.node, act, f"{n.verdict}: {why}"))
    return remedy.apply(asked, dry_run=not request.pack.apply)


def _beside(beside: Beside) -> dict[str, object]:
    """What a stage ran beside controls (the second pass, rejoin): its nodes in batches, each beside the same
    controls, and whether at once."""
    return {
        "controls": list(beside.controls),
        "together": beside.together,
        "batches": [{"suspects": list(b.nodes), "benches": list(b.benches)} for b in beside.batches],
    }


def _rejoined(found: Rejoined) -> dict[str, object]:
    """What rejoin ran: the mended nodes, beside controls, and those slow there again beside them."""
    return _beside(found) | {"nodes": list(found.rejoined), "again": _beside(found.again)}


def verdict(ctx: Ctx) -> AcceptOutcome:
    """Judge every node and GPU, do (or show) the remedies, write the pack, sign its manifest."""
    store = Store.open(ctx.request.pack.results, read_only=True)
    try:
        f, every = findings(ctx, store)
    finally:
        store.close()
    nodes = judge_mod.judge(f)
    code = gpu_verdicts.exit_code(nodes)  # a node's, as a GPU's: 0 pass, 1 any fail, 3 any cannot judge
    done = _remedies(ctx.request, nodes)
    counts = {v: sum(n.verdict == v for n in nodes) for v in (PASS, WARN, FAIL, UNDECIDED)}
    summary = {
        "id": ctx.state.id,
        "outcome": ", ".join(f"{c} {v}" for v, c in counts.items() if c),
        "exit_code": code,
        "level": ctx.level.name,
        "framework": ctx.framework,
        "inventory": str(ctx.request.nodes.inventory),
        "dltestbed": __version__,
        "started_at": ctx.state.started_at,
        "finished_at": now_iso(),
        "benches": ctx.state.benches(),
        "stages": {k: v.finished_at for k, v in ctx.state.stages.items()},
        "sensitivity": _sensitivity(ctx),
        "second_pass": _beside(ctx.found(SecondPass)),
        "rejoined": _rejoined(ctx.found(Rejoin)),
    }
    pack.write(ctx.request.pack.out, summary, nodes, every, ctx.request.nodes.inventory, done, f.left_out)
    evidence.write_manifest(ctx.request.pack.out)
    signed = False
    if ctx.request.pack.sign_key is not None:
        evidence.sign(ctx.request.pack.out, ctx.request.pack.sign_key)
        signed = True
    return AcceptOutcome(ctx.state.id, tuple(nodes), code, tuple(done), ctx.request.pack.out, signed)


def _sensitivity(ctx: Ctx) -> str:
    """What makes a node slow and a GPU fail, in words, with this acceptance's figures."""
    slowdown = ctx.request.judging.slowdown
    return (
        f"A node is slow in a measure when it is at least {slowdown:g} % below its peers' median "
        "with a leave-one-out modified z-score below −3.5 (Iglewicz & Hoaglin), over a whole run's timed "
        f"steps ({ctx.level.steps} steps; probes {ctx.level.probe_steps} calls a case), in the first pass; and "
        f"again in the second, at least {slowdown:g} % below the median of {slowness.CONTROLS_MIN} "
        "or more known-good controls measured beside it. A GPU fails a measure below 0.75 of what a healthy "
        "board of its kind reaches."
    )
