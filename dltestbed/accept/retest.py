"""The stages of an acceptance that measure nodes again, after the fleet analysis (stages.py), registered in
the order they run: the second pass (what failed or was slow, beside known-good controls measured at the same
time), burn-in's hold (the model in rounds) and the rejoin (the nodes left out, once mended, beside controls);
and how the controls are chosen and the suspects batched beside them."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import log
from statistics import median
from typing import Any

from dltestbed.accept.context import REJOIN, Ctx, golden_spec, read_runs
from dltestbed.accept.found import Batch, Beside, Facts, Pair, Rejoined, Rerun, Rounds, encode
from dltestbed.accept.readings import node_measures, unanswered
from dltestbed.accept.slowness import slow_beside
from dltestbed.accept.stages import (
    NO_NODE_LEFT,
    Fleet,
    NodeGpus,
    Preflight,
    Provision,
    Stage,
    preflight_facts,
    provision_nodes,
    stage,
)
from dltestbed.accept.state import StageRecord
from dltestbed.accept.workloads import measure_benches, node_bench, pair_bench
from dltestbed.report import drift as drift_mod
from dltestbed.results.store import Store

CONTROLS = 3  # known-good nodes measured beside the second pass's suspects, where there are (at least CONTROLS_MIN)


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
