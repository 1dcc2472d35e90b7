"""The stages of an acceptance, one registered class each, in the order they run: provision, preflight, the
measures (every GPU of a node at once), the node's GPUs together, the pairs of nodes, the fleet analysis, the
second pass and burn-in's hold; the verdict follows them (run.py). Each stage runs its benches (workloads.py)
through `run_bench`, into the store, and keeps what it found in the acceptance's state; a finished stage whose
inputs have not changed is not run again."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from statistics import median
from typing import Any, ClassVar

from dltestbed import __version__
from dltestbed.accept import facts as facts_mod
from dltestbed.accept.context import PREFLIGHT, Ctx, frameworks_in, on_every_node, read_runs
from dltestbed.accept.gpus import failing_nodes
from dltestbed.accept.judge import suspects
from dltestbed.accept.state import StageRecord, digest
from dltestbed.accept.workloads import measure_benches, node_bench, pair_bench, pairs_of
from dltestbed.config import DEFAULT_FRAMEWORK
from dltestbed.errors import DltestbedError
from dltestbed.orchestrate import (
    BenchInterrupted,
    Workloads,
)
from dltestbed.orchestrate.scenarios import Options
from dltestbed.provision import provision
from dltestbed.results.records import RunRecord
from dltestbed.results.store import Store
from dltestbed.workload.frameworks import REGISTRY as FRAMEWORKS
from dltestbed.workload.probes.base import ALLREDUCE_BYTES, size_words

SKIPPABLE = ("provision", "node", "pairs", "second", "hold")  # the verdict needs the others


class StageError(DltestbedError):
    """A stage could not go on (a bench refused, a host's key changed): said with the stage, and that --resume
    goes on from it; exit 2, never a node's failure."""


class Stage:
    """One stage: what its inputs are (a change reruns it) and what it does."""

    name: ClassVar[str]
    title: ClassVar[str]

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


STAGES: dict[str, type[Stage]] = {}


def stage(cls: type[Stage]) -> type[Stage]:
    """Register a stage class under its name, in the order stages run."""
    STAGES[cls.name] = cls
    return cls


@stage
class Provision(Stage):
    name = "provision"
    title = "provision the nodes (offline, idempotent)"

    def inputs(self, ctx: Ctx) -> dict[str, Any]:
        # not the acceptance's: a provisioning that passed stands until the nodes, the inventory or dltestbed change
        return {
            "inventory": ctx.inventory_digest,
            "nodes": sorted(ctx.nodes),
            "dltestbed": __version__,
            "framework": ctx.request.framework,
        }

    def run(self, ctx: Ctx) -> StageRecord:
        asked = ctx.request.framework or DEFAULT_FRAMEWORK  # none named: the default, beside what the nodes have
        others = () if asked == DEFAULT_FRAMEWORK else (asked,)
        layout = "distributed" if len(ctx.nodes) > 1 else "single"
        report = provision(
            ctx.request.inventory,
            layout,
            ctx.request.limit,
            on_phase=lambda phase: ctx.observer.say(f"provision: {phase}"),
            on_notice=ctx.observer.say,
            frameworks=others,
        )
        if report.failed:
            first = report.failed[0]
            raise DltestbedError(
                f"provision: {len(report.failed)} of {len(report.hosts)} node(s) not provisioned ({first.name}: "
                f"{first.reason}); mend them or leave them out (--limit), then accept again"
            )
        return StageRecord("", data={"provision": report.id})


@stage
class Preflight(Stage):
    name = PREFLIGHT
    title = "preflight: each node's GPU and host facts, for the drift check"

    def run(self, ctx: Ctx) -> StageRecord:
        probe = Workloads(suite="micro", preset="quick", probes=("membw",), warmup=0, steps=1, probe_scale="small")
        bench = ctx.bench(probe, scenario=Options(parallel=True))
        store = Store.open(ctx.request.results, read_only=True)
        try:
            runs = read_runs(store, [bench])
        finally:
            store.close()
        found = {r.host: facts_mod.node_facts(r.fingerprint) for r in runs if r.status == "ok"}
        gpus = {r.host: len(r.fingerprint.get("gpus") or []) for r in runs if r.status == "ok"}
        failed = {r.host: r.reason or r.status for r in runs if r.status != "ok"}
        packages = {r.host: r.fingerprint.get("packages") or {} for r in runs if r.status == "ok"}
        data = {"facts": found, "gpus": {k: v for k, v in gpus.items() if v}, "failed": failed}
        return StageRecord("", [bench], data | {"framework": self.framework(ctx, packages)})

    @staticmethod
    def framework(ctx: Ctx, packages: Mapping[str, Mapping[str, str]]) -> str:
        """The framework the stages after preflight compute with: the one asked for, else the one every node that
        answered has installed (the default where they have both); one line where they share none."""
        if ctx.request.framework is not None or not packages:
            return ctx.framework
        common = on_every_node(packages)
        if not common:
            said = "; ".join(f"{host}: {', '.join(sorted(frameworks_in(p))) or 'none'}" for host, p in packages.items())
            raise DltestbedError(f"no framework is installed on every node ({said}): name one with --framework")
        return common[0]


@stage
class Measure(Stage):
    name = "measure"
    title = "measure every node (every GPU of a node at once): the screen, the probes, the model"

    def run(self, ctx: Ctx) -> StageRecord:
        # --init: the screen gives no expected value (its minutes are a verdict's, not a reference's)
        return StageRecord("", measure_benches(ctx, None, skip=("screen",) if ctx.init else ()))


@stage
class NodeGpus(Stage):
    name = "node"
    title = "all of a node's GPUs together: all-reduce bus bandwidth"

    def applies(self, ctx: Ctx) -> str | None:
        if not ctx.gpu:
            return "the nodes have no GPU"
        fw = FRAMEWORKS[ctx.framework]
        return None if fw.node_jobs else f"{fw.label} runs no process over every GPU (--gpus node)"

    def run(self, ctx: Ctx) -> StageRecord:
        return StageRecord("", [node_bench(ctx, None)])


@stage
class Pairs(Stage):
    name = "pairs"
    title = "across nodes: the network and all-reduce between pairs"

    def applies(self, ctx: Ctx) -> str | None:
        return None if len(ctx.nodes) > 1 else "one node: no pair"

    def run(self, ctx: Ctx) -> StageRecord:
        done = [[a, b, pair_bench(ctx, (a, b))] for a, b in pairs_of(ctx.nodes)]
        return StageRecord("", [b for *_, b in done], {"pairs": done})


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


@stage
class Fleet(Stage):
    name = "fleet"
    title = "the fleet analysis: who is slower than its peers, whose runs failed"

    def run(self, ctx: Ctx) -> StageRecord:
        store = Store.open(ctx.request.results, read_only=True)
        try:
            runs = read_runs(store, ctx.state.stages[Measure.name].benches + ctx.data_benches(NodeGpus.name))
            measures = node_measures(runs, store)
            gpu_nodes = failing_nodes(ctx.request.expected, store, runs) if ctx.gpu else []
            bad_pairs = []
            for a, b, bench in ctx.data(Pairs.name).get("pairs", []):
                prs = read_runs(store, [bench])
                if not prs or any(r.status != "ok" for r in prs):
                    bad_pairs.append([a, b])
        finally:
            store.close()
        slow = sorted({s.node for s in suspects(measures, ctx.request.slowdown)})
        failed = failures(runs)
        rerun = sorted(set(slow) | set(failed) | set(gpu_nodes), key=ctx.nodes.index)
        return StageRecord("", [], {"measures": measures, "failed": failed, "rerun": rerun, "pairs": bad_pairs})


@stage
class SecondPass(Stage):
    name = "second"
    title = "the second pass: only what failed, again; a suspect pair's nodes each with a known-good node"

    def run(self, ctx: Ctx) -> StageRecord:
        fleet = ctx.data(Fleet.name)
        rerun, bad_pairs = fleet.get("rerun", []), fleet.get("pairs", [])
        measured = measure_benches(ctx, rerun) if rerun else []
        if rerun and NodeGpus.name in ctx.state.stages:
            measured.append(node_bench(ctx, rerun))
        suspect = {n for pair in bad_pairs for n in pair}
        good = [n for n in ctx.nodes if n not in suspect and n not in rerun]
        pairs = []
        for node in sorted(suspect, key=ctx.nodes.index):
            if not good:
                pairs.append([node, "", ""])
                continue
            pairs.append([node, good[0], pair_bench(ctx, (node, good[0]))])
        benches = measured + [b for *_, b in pairs if b]
        return StageRecord("", benches, {"rerun": rerun, "measure": measured, "pairs": pairs})


@stage
class Hold(Stage):
    name = "hold"
    title = "burn-in: the model (and the screen) in rounds, held for --hold (4 h at level burn-in)"

    def applies(self, ctx: Ctx) -> str | None:
        return None if self.seconds(ctx) > 0 else f"level {ctx.level.name} holds nothing"

    @staticmethod
    def seconds(ctx: Ctx) -> float:
        return ctx.request.hold_seconds if ctx.request.hold_seconds is not None else ctx.level.hold_seconds

    def run(self, ctx: Ctx) -> StageRecord:
        end = time.monotonic() + self.seconds(ctx)
        rounds: list[list[str]] = []
        while len(rounds) < 2 or time.monotonic() < end:  # two rounds at least: a trend needs both ends
            ctx.observer.say(f"burn-in: round {len(rounds) + 1}")
            rounds.append(measure_benches(ctx, None, only=("screen", "model")))
        return StageRecord("", [b for r in rounds for b in r], {"rounds": rounds})


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
        if name in ctx.request.skip:
            say(f"stage {name}: skipped (--skip)")
            continue
        why_not = st.applies(ctx)
        if why_not:
            say(f"stage {name}: does not apply ({why_not})")
            continue
        say(f"stage {name}: {cls.title}")
        try:
            rec = st.run(ctx)
        except BenchInterrupted:
            raise
        except DltestbedError as exc:
            raise StageError(
                f"stage {name}: {exc}; the finished stages are kept: once it is mended, `dltestbed accept --resume` "
                "(with the same options) goes on from this stage"
            ) from None
        rec.key = key
        ctx.state.record(name, rec)
