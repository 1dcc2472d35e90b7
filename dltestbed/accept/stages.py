"""The stages of an acceptance, one registered class each, in the order they run: provision, preflight, the
measures (every GPU of a node at once), the node's GPUs together, the pairs of nodes, the fleet analysis, the
second pass and burn-in's hold; the verdict follows them (run.py). Each stage runs its benches (workloads.py)
through `run_bench`, into the store, and keeps what it found in the acceptance's state; a finished stage whose
inputs have not changed is not run again."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from math import log
from statistics import median
from typing import Any, ClassVar, Generic, TypeVar

from dltestbed import __version__
from dltestbed.accept import facts as facts_mod
from dltestbed.accept.context import PREFLIGHT, REJOIN, Ctx, frameworks_in, golden_spec, on_every_node, read_runs
from dltestbed.accept.found import (
    Batch,
    Beside,
    Facts,
    Found,
    Judged,
    Pair,
    Paired,
    Provisioned,
    Rejoined,
    Rerun,
    Rounds,
    encode,
)
from dltestbed.accept.gpus import failing_nodes
from dltestbed.accept.judge import slow_beside, suspects
from dltestbed.accept.state import StageRecord, digest
from dltestbed.accept.workloads import measure_benches, node_bench, pair_bench, pairs_of
from dltestbed.config import DEFAULT_FRAMEWORK
from dltestbed.errors import DltestbedError
from dltestbed.orchestrate import (
    DID_NOT_ANSWER,
    BenchInterrupted,
    Workloads,
)
from dltestbed.provision import provision
from dltestbed.report import drift as drift_mod
from dltestbed.requests.provision import Hosts, Install, ProvisionRequest
from dltestbed.results.records import RunRecord
from dltestbed.results.store import Store
from dltestbed.workload.frameworks import REGISTRY as FRAMEWORKS
from dltestbed.workload.probes.base import ALLREDUCE_BYTES, size_words

SKIPPABLE = ("provision", "node", "pairs", "second", "hold", REJOIN)  # the verdict needs the others
CONTROLS = 3  # known-good nodes measured beside the second pass's suspects, where there are (at least CONTROLS_MIN)
F = TypeVar("F", bound=Found)
NO_NODE_LEFT = "every node was left out by a stage before"


class StageError(DltestbedError):
    """A stage could not go on (a bench refused, a host's key changed): said with the stage, and that --resume
    goes on from it; exit 2, never a node's failure."""


class Stage(Generic[F]):
    """One stage: what its inputs are (a change reruns it), what it does and the type of what it finds (found.py,
    kept in the state file)."""

    name: ClassVar[str]
    title: ClassVar[str]
    found: type[F]
    listed: ClassVar[bool] = True  # listed among the checks left out when it does not apply

    def applies(self, ctx: Ctx) -> str | None:
        """Why the stage does not apply to these nodes (None: it does)."""
        return None

    def inputs(self, ctx: Ctx) -> dict[str, Any]:
        """What the stage depends on: the request's digest and every stage before it."""
        earlier = list(STAGES)[: list(STAGES).index(self.name)]
        return {
            "request": ctx.state.request,
            "before": {k: ctx.state.stages[k].key for k in earlier if k in ctx.state.stages},
        }

    def run(self, ctx: Ctx) -> StageRecord:
        raise NotImplementedError


STAGES: dict[str, type[Stage[Any]]] = {}


def stage(cls: type[Stage[F]]) -> type[Stage[F]]:
    """Register a stage class under its name, in the order stages run."""
    STAGES[cls.name] = cls
    return cls


@stage
class Provision(Stage[Provisioned]):
    name = "provision"
    title = "provision the nodes (offline, idempotent)"
    found = Provisioned

    def inputs(self, ctx: Ctx) -> dict[str, Any]:
        # not the acceptance's: a provisioning that passed stands until the nodes, the inventory or dltestbed change
        return {
            "inventory": ctx.inventory_digest,
            "nodes": sorted(ctx.nodes),
            "dltestbed": __version__,
            "framework": ctx.request.nodes.framework,
        }

    def run(self, ctx: Ctx) -> StageRecord:
        report_id, out = provision_nodes(ctx, ctx.request.nodes.limit)
        return StageRecord("", data=encode(Provisioned(out, report_id)))


def provision_nodes(ctx: Ctx, limit: str | None) -> tuple[str, dict[str, str]]:
    """Provision the nodes (or `limit`'s): the report's id, and the nodes not provisioned with why (said in one
    line: they are left out of the stages after)."""
    asked = ctx.request.nodes.framework or DEFAULT_FRAMEWORK  # none named: the default, beside what the nodes have
    others = () if asked == DEFAULT_FRAMEWORK else (asked,)
    layout = "distributed" if len(ctx.nodes) > 1 else "single"
    request = ProvisionRequest(Hosts(layout, ctx.request.nodes.inventory, limit), Install(frameworks=others))
    said = ctx.observer.say
    report = provision(request, on_phase=lambda phase: said(f"provision: {phase}"), on_notice=said)
    out = {h.name: h.reason or "not provisioned" for h in report.failed}
    if out:
        first = report.failed[0]
        ctx.observer.say(
            f"provision: {len(out)} of {len(report.hosts)} node(s) not provisioned ({first.name}: {first.reason}): "
            f"left out of the stages after, each judged on its own; once mended, {ctx.resume} measures them beside "
            "controls"
        )
    return report.id, out


@stage
class Preflight(Stage[Facts]):
    name = PREFLIGHT
    title = "preflight: each node's GPU and host facts, for the drift check"
    found = Facts

    def applies(self, ctx: Ctx) -> str | None:
        return None if ctx.live else NO_NODE_LEFT

    def run(self, ctx: Ctx) -> StageRecord:
        bench, facts, packages = preflight_facts(ctx, ctx.live)
        return StageRecord("", [bench], encode(dataclasses.replace(facts, framework=self.framework(ctx, packages))))

    @staticmethod
    def framework(ctx: Ctx, packages: Mapping[str, Mapping[str, str]]) -> str:
        """The framework the stages after preflight compute with: the one asked for, else the one every node that
        answered has installed (the default where they have both); one line where they share none."""
        if ctx.request.nodes.framework is not None or not packages:
            return ctx.framework
        common = on_every_node(packages)
        if not common:
            said = "; ".join(f"{host}: {', '.join(sorted(frameworks_in(p))) or 'none'}" for host, p in packages.items())
            raise DltestbedError(f"no framework is installed on every node ({said}): name one with --framework")
        return common[0]


def preflight_facts(ctx: Ctx, nodes: Sequence[str]) -> tuple[str, Facts, dict[str, dict[str, str]]]:
    """A light probe on the nodes, every node at once, for the facts in its fingerprint: its bench, what it found
    (facts, GPUs and the nodes it could not measure), and each node's packages."""
    probe = Workloads(suite="micro", preset="quick", probes=("membw",), warmup=0, steps=1, probe_scale="small")
    bench = ctx.bench(probe, limit=nodes, parallel=True)
    runs = ctx.runs([bench])
    found = {r.host: facts_mod.node_facts(r.fingerprint) for r in runs if r.status == "ok"}
    gpus = {r.host: len(r.fingerprint.get("gpus") or []) for r in runs if r.status == "ok"}
    out = {r.host: r.reason or r.status for r in runs if r.status != "ok"}
    out |= {n: "no preflight run reported its facts" for n in nodes if n not in found and n not in out}
    packages = {r.host: r.fingerprint.get("packages") or {} for r in runs if r.status == "ok"}
    return bench, Facts(out, found, {k: v for k, v in gpus.items() if v}), packages


@stage
class Measure(Stage[Found]):
    name = "measure"
    found = Found
    title = "measure every node (every GPU of a node at once): the screen, the probes, the model"

    def applies(self, ctx: Ctx) -> str | None:
        return None if ctx.live else NO_NODE_LEFT

    def run(self, ctx: Ctx) -> StageRecord:
        # --init: the screen gives no expected value (its minutes are a verdict's, not a reference's)
        benches = measure_benches(ctx, None, skip=("screen",) if ctx.init else ())
        return StageRecord("", benches, encode(Found(unanswered(ctx.runs(benches)))))


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


@stage
class NodeGpus(Stage[Found]):
    name = "node"
    found = Found
    title = "all of a node's GPUs together: all-reduce bus bandwidth"

    def applies(self, ctx: Ctx) -> str | None:
        if not ctx.live:
            return NO_NODE_LEFT
        if not ctx.gpu:
            return "the nodes have no GPU"
        fw = FRAMEWORKS[ctx.framework]
        return None if fw.node_jobs else f"{fw.label} runs no process over every GPU (--gpus node)"

    def run(self, ctx: Ctx) -> StageRecord:
        return StageRecord("", [node_bench(ctx, None)])


@stage
class Pairs(Stage[Paired]):
    name = "pairs"
    title = "across nodes: the network and all-reduce between pairs"
    found = Paired

    def applies(self, ctx: Ctx) -> str | None:
        return None if len(ctx.live) > 1 else "one node: no pair" if len(ctx.nodes) == 1 else "fewer than 2 nodes left"

    def run(self, ctx: Ctx) -> StageRecord:
        pairs = pairs_of(ctx.live)
        bench = pair_bench(ctx, pairs)  # every disjoint pair at once: one round (an odd node's pair after)
        return StageRecord("", [bench], encode(Paired(pairs=tuple(Pair(a, b, bench) for a, b in pairs))))


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


@stage
class Fleet(Stage[Judged]):
    name = "fleet"
    title = "the fleet analysis: who is slower than its peers, whose runs failed"
    found = Judged

    def applies(self, ctx: Ctx) -> str | None:
        return None if ctx.live else NO_NODE_LEFT

    def run(self, ctx: Ctx) -> StageRecord:
        store = Store.open(ctx.request.pack.results, read_only=True)
        try:
            runs = read_runs(store, ctx.state.stages[Measure.name].benches + ctx.data_benches(NodeGpus.name))
            runs = [r for r in runs if r.host in ctx.live]
            measures = node_measures(runs, store)
            gpu_nodes = failing_nodes(ctx.request.judging.expected, store, runs) if ctx.gpu else []
            bad_pairs = []
            for pair in ctx.found(Pairs).pairs:
                both = (pair.node, pair.partner or "")
                prs = pair_runs(read_runs(store, [pair.bench or ""]), both)
                if not prs or any(r.status != "ok" for r in prs):
                    bad_pairs.append(both)
        finally:
            store.close()
        slow = sorted({s.node for s in suspects(measures, ctx.request.judging.slowdown)})
        failed = failures(runs)
        rerun = sorted(set(slow) | set(failed) | set(gpu_nodes), key=ctx.nodes.index)
        return StageRecord(
            "", [], encode(Judged(measures=measures, failed=failed, rerun=tuple(rerun), pairs=tuple(bad_pairs)))
        )


def known_good(ctx: Ctx) -> list[str]:
    """The nodes still measured that passed the first pass: not rerun, in no failed pair, with no drift."""
    fleet = ctx.found(Fleet)
    suspect = {n for pair in fleet.pairs for n in pair} | set(fleet.rerun)
    facts = ctx.found(Preflight).facts
    drifted = {d.node for d in drift_mod.drift(facts, golden_spec(ctx.request.judging.golden))} if facts else set()
    return [n for n in ctx.live if n not in suspect and n not in drifted]


def beside_controls(ctx: Ctx, plan: Batches) -> Beside:
    """Each batch of nodes measured beside the controls (one bench per measure, and all of a node's GPUs together
    where that stage ran)."""
    batches = []
    for batch in plan.batches:
        nodes = [*batch, *plan.controls]
        benches = measure_benches(ctx, nodes)
        if NodeGpus.name in ctx.state.stages:
            benches.append(node_bench(ctx, nodes))
        batches.append(Batch(tuple(batch), tuple(benches)))
    return Beside(tuple(plan.controls) if batches else (), tuple(batches), plan.together)


def choose_controls(measures: Mapping[str, Mapping[str, float]], good: Sequence[str], count: int) -> list[str]:
    """The `count` known-good nodes nearest their fleet's median over every measure (the sum of each measure's
    |log(value / median)|), in that order; ties in the order given."""

    def distance(node: str) -> float:
        mids = {name: median(v.values()) for name, v in measures.items()}
        kept = [(v[node], mids[name]) for name, v in measures.items() if v.get(node, 0) > 0 and mids[name] > 0]
        return sum(abs(log(value / mid)) for value, mid in kept)

    return sorted(good, key=lambda n: (distance(n), good.index(n)))[:count]


@dataclass(frozen=True)
class Batches:
    """How the second pass runs its suspects beside its controls: the controls, the suspects of each batch
    (each batch one bench per measure, the controls in every batch), and whether a batch's nodes ran at once."""

    controls: list[str]
    batches: list[list[str]]
    together: bool


def batches_of(rerun: Sequence[str], controls: Sequence[str], at_most: int | None) -> Batches:
    """The suspects in batches beside the controls, within `at_most` nodes at once (None: no cap; 1: one after
    another, one batch). A cap too small for CONTROLS_MIN controls beside a suspect keeps one control less."""
    if not rerun:
        return Batches(list(controls), [], True)
    if at_most == 1:
        return Batches(list(controls), [list(rerun)], False)
    kept = list(controls) if at_most is None else list(controls[: max(0, at_most - 1)])
    size = len(rerun) if at_most is None else max(1, at_most - len(kept))
    return Batches(kept, [list(rerun[i : i + size]) for i in range(0, len(rerun), size)], True)


@stage
class SecondPass(Stage[Rerun]):
    name = "second"
    found = Rerun
    title = (
        "the second pass: what failed or was slow, again, beside known-good controls measured at the same time; "
        "a suspect pair's nodes each with a known-good node"
    )

    def applies(self, ctx: Ctx) -> str | None:
        return None if ctx.live else NO_NODE_LEFT

    def run(self, ctx: Ctx) -> StageRecord:
        fleet = ctx.found(Fleet)
        good = known_good(ctx)
        controls = choose_controls(fleet.measures, good, CONTROLS) if fleet.rerun else []
        beside = beside_controls(ctx, batches_of(fleet.rerun, controls, ctx.request.nodes.parallel))
        # each node of a failed pair with a known-good node: a different one each where there are, all at once
        ordered = sorted({n for pair in fleet.pairs for n in pair}, key=ctx.nodes.index)
        partners = [(node, good[i % len(good)]) for i, node in enumerate(ordered)] if good else []
        bench = pair_bench(ctx, partners) if partners else None
        pairs = [Pair(n, p, bench) for n, p in partners] + ([] if good else [Pair(n, None, None) for n in ordered])
        found = Rerun(**vars(beside), rerun=fleet.rerun, measure=beside.benches, pairs=tuple(pairs))
        return StageRecord("", [*beside.benches, *([bench] if bench else [])], encode(found))


@stage
class Hold(Stage[Rounds]):
    name = "hold"
    found = Rounds
    title = "burn-in: the model (and the screen) in rounds, held for --hold (4 h at level burn-in)"

    def applies(self, ctx: Ctx) -> str | None:
        return None if self.seconds(ctx) > 0 else f"level {ctx.level.name} holds nothing"

    @staticmethod
    def seconds(ctx: Ctx) -> float:
        return ctx.request.nodes.hold_seconds if ctx.request.nodes.hold_seconds is not None else ctx.level.hold_seconds

    def run(self, ctx: Ctx) -> StageRecord:
        end = time.monotonic() + self.seconds(ctx)
        rounds: list[list[str]] = []
        while len(rounds) < 2 or time.monotonic() < end:  # two rounds at least: a trend needs both ends
            ctx.observer.say(f"burn-in: round {len(rounds) + 1}")
            rounds.append(measure_benches(ctx, None, only=("screen", "model")))
        return StageRecord("", [b for r in rounds for b in r], encode(Rounds(rounds=tuple(map(tuple, rounds)))))


@stage
class Rejoin(Stage[Rejoined]):
    name = REJOIN
    title = "the nodes left out, tried again once mended (--resume): provisioned, read, measured beside controls"
    found = Rejoined
    listed = False  # it applies only on a resume with nodes left out

    def applies(self, ctx: Ctx) -> str | None:
        if not ctx.out:
            return "no node was left out"
        return None if ctx.state.resumes else f"not resumed: {ctx.resume} tries the nodes left out again"

    def inputs(self, ctx: Ctx) -> dict[str, Any]:
        return super().inputs(ctx) | {"resume": ctx.state.resumes, "out": sorted(ctx.out)}

    def run(self, ctx: Ctx) -> StageRecord:
        back = [n for n in ctx.nodes if n in ctx.out]
        out: dict[str, str] = {}
        if Provision.name not in ctx.request.nodes.skip:
            _, out = provision_nodes(ctx, ",".join(back))
        trying = [n for n in back if n not in out]
        benches: list[str] = []
        facts = Facts()
        if trying:
            bench, facts, _ = preflight_facts(ctx, trying)
            benches.append(bench)
            out |= facts.out
        trying = [n for n in trying if n not in out]
        controls = choose_controls(ctx.found(Fleet).measures, known_good(ctx), CONTROLS)
        plan = batches_of(trying, controls if trying else [], ctx.request.nodes.parallel)
        beside = beside_controls(ctx, plan)
        out |= {n: why for n, why in unanswered(ctx.runs(beside.benches)).items() if n in trying}
        rejoined = tuple(n for n in trying if n not in out)
        # slow beside its controls: measured beside them again, as a suspect is in the second pass (one round of
        # noise fails no node)
        slow = _slow_in(ctx, beside, rejoined)
        again = beside_controls(ctx, batches_of(slow, plan.controls, ctx.request.nodes.parallel))
        found = Rejoined(
            **vars(beside),
            out=out,
            facts=facts.facts,
            gpus=facts.gpus,
            rejoined=rejoined,
            measure=beside.benches,
            again=again,
        )
        return StageRecord("", [*benches, *beside.benches, *again.benches], encode(found))


def _slow_in(ctx: Ctx, beside: Beside, nodes: Sequence[str]) -> list[str]:
    """The nodes (of `nodes`) slow in any measure beside the controls of their batch."""
    store = Store.open(ctx.request.pack.results, read_only=True)
    try:
        slow: list[str] = []
        for batch in beside.batches:
            measured = node_measures(read_runs(store, batch.benches), store)
            mine = [n for n in batch.nodes if n in nodes]
            slow += slow_beside(measured, mine, beside.controls, ctx.request.judging.slowdown)
        return slow
    finally:
        store.close()


def run_stages(ctx: Ctx, say: Callable[[str], None], only: Collection[str] = ()) -> None:
    """Every stage in order (or those in `only`): skipped when asked, when it does not apply, or when it
    finished on the same inputs (a resumed or repeated acceptance); each kept in the state as it finishes."""
    for name, cls in STAGES.items():
        if only and name not in only:
            continue
        st = cls()
        key = digest(st.inputs(ctx))
        done = ctx.state.finished(name, key)
        if done is not None:
            say(f"stage {name}: done before ({done.finished_at}), inputs unchanged: not run again")
            continue
        if name in ctx.request.nodes.skip:
            say(f"stage {name}: skipped (--skip)")
            continue
        why_not = st.applies(ctx)
        if why_not:
            say(f"stage {name}: does not apply ({why_not})")
            continue
        say(f"stage {name}: {cls.title}")
        ctx.state.save()  # kept from the first stage on: a stage that cannot go on is gone on from with --resume
        try:
            rec = st.run(ctx)
        except BenchInterrupted:
            raise
        except DltestbedError as exc:
            raise StageError(
                f"stage {name}: {exc}; the finished stages are kept: once it is mended, {ctx.resume} goes on from "
                "this stage"
            ) from None
        rec.key = key
        ctx.state.record(name, rec)
