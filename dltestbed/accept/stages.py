"""The stages of an acceptance, one registered class each, in the order they run: provision, preflight, the
measures (every GPU of a node at once), the node's GPUs together, the pairs of nodes, the fleet analysis, the
second pass, burn-in's hold, and the verdict (acceptance's own module: run.py). Each stage runs its benches
through `run_bench`, into the store, and keeps what it found in the acceptance's state; a finished stage whose
inputs have not changed is not run again."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from statistics import median
from typing import Any, ClassVar

from dltestbed import __version__
from dltestbed.accept import facts as facts_mod
from dltestbed.accept.gpus import failing_nodes
from dltestbed.accept.judge import suspects
from dltestbed.accept.levels import Level
from dltestbed.accept.request import AcceptRequest
from dltestbed.accept.state import StageRecord, State, digest
from dltestbed.config import DEFAULT_FRAMEWORK
from dltestbed.errors import DltestbedError
from dltestbed.orchestrate import (
    BenchInterrupted,
    BenchObserver,
    BenchRequest,
    Machines,
    Repetitions,
    Workloads,
    run_bench,
)
from dltestbed.orchestrate.scenarios import Options
from dltestbed.provision import provision
from dltestbed.results.records import RunRecord
from dltestbed.results.store import Store
from dltestbed.workload.probes.base import ALLREDUCE_BYTES, size_words

BARE_METAL = ("bm",)  # acceptance measures the nodes themselves
SKIPPABLE = ("provision", "node", "pairs", "second", "hold")  # the verdict needs the others


@dataclass
class Ctx:
    """What every stage reads: the request, its level, the nodes, the progress, and the stages before it."""

    request: AcceptRequest
    level: Level
    nodes: tuple[str, ...]
    inventory_digest: str
    observer: BenchObserver
    state: State

    def data(self, stage: str) -> dict[str, Any]:
        """What a finished stage found ({} when it did not run)."""
        rec = self.state.stages.get(stage)
        return rec.data if rec is not None else {}

    def data_benches(self, stage: str) -> list[str]:
        """The benches a finished stage stored ([] when it did not run)."""
        rec = self.state.stages.get(stage)
        return list(rec.benches) if rec is not None else []

    @property
    def gpu(self) -> bool:
        """Whether the nodes have GPUs (as preflight saw them): the GPU checks, else the CPU's."""
        return bool(self.data(Preflight.name).get("gpus"))

    def bench(
        self,
        workloads: Workloads,
        *,
        limit: Sequence[str] | None = None,
        scenario: Options | None = None,
        repeat: int = 1,
    ) -> str:
        """Run one bench on the nodes (or `limit`'s) and return its id."""
        w = replace(workloads, frameworks=(self.request.framework,))
        options = scenario or Options(parallel=self.request.parallel)
        machines = Machines(
            targets=BARE_METAL,
            inventory=self.request.inventory,
            limit=",".join(limit) if limit is not None else self.request.limit,
        )
        req = BenchRequest(w, Repetitions(repeat=str(repeat)), options, machines, self.request.results)
        return run_bench(req, self.observer).bench_id


def read_runs(store: Store, benches: Sequence[str]) -> list[RunRecord]:
    """The foreground runs of `benches`, in order."""
    return [r for b in benches for r in store.runs(bench_id=b) if r.role == "foreground"]


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
        others = () if ctx.request.framework == DEFAULT_FRAMEWORK else (ctx.request.framework,)
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
    name = "preflight"
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
        return StageRecord(
            "", [bench], {"facts": found, "gpus": {k: v for k, v in gpus.items() if v}, "failed": failed}
        )


def workloads(ctx: Ctx) -> dict[str, tuple[Workloads, int]]:
    """What measures a node, with its repetitions: with GPUs, the screen, the probes and ResNet-50 in the gpu
    preset, on every GPU of a node at once; without, AlexNet and the CPU's probes."""
    lv = ctx.level
    if ctx.gpu:
        return {
            "screen": (
                Workloads(suite="screen", preset="gpu", gpus="per-gpu", device="gpu", screen_seconds=lv.screen_seconds),
                1,
            ),
            "probes": (
                Workloads(
                    suite="micro",
                    preset="gpu",
                    probes=("gemm", "membw", "h2d", "d2h", "d2d", "launch"),
                    probe_scale="full",
                    gpus="per-gpu",
                    device="gpu",
                    warmup=2,
                    steps=lv.probe_steps,
                ),
                1,
            ),
            "model": (
                Workloads(models=("resnet50",), preset="gpu", gpus="per-gpu", device="gpu", steps=lv.steps),
                lv.repeat,
            ),
        }
    return {
        "model": (
            Workloads(
                models=("alexnet",), preset="quick", device="cpu", image_size=64, batch_size=8, warmup=3, steps=lv.steps
            ),
            lv.repeat,
        ),
        "probes": (
            Workloads(
                suite="micro",
                preset="quick",
                probes=("gemm", "membw"),
                probe_scale="small",
                warmup=1,
                steps=lv.probe_steps,
            ),
            1,
        ),
    }


def measure_benches(ctx: Ctx, limit: Sequence[str] | None, only: Sequence[str] = ()) -> list[str]:
    """The benches of `workloads` (those named in `only`, else all) on every node (or `limit`'s)."""
    return [
        ctx.bench(w, limit=limit, repeat=repeat)
        for name, (w, repeat) in workloads(ctx).items()
        if not only or name in only
    ]


@stage
class Measure(Stage):
    name = "measure"
    title = "measure every node (every GPU of a node at once): the screen, the probes, the model"

    def run(self, ctx: Ctx) -> StageRecord:
        return StageRecord("", measure_benches(ctx, None))


@stage
class NodeGpus(Stage):
    name = "node"
    title = "all of a node's GPUs together: all-reduce bus bandwidth"

    def applies(self, ctx: Ctx) -> str | None:
        return None if ctx.gpu else "the nodes have no GPU"

    def run(self, ctx: Ctx) -> StageRecord:
        return StageRecord("", [node_bench(ctx, None)])


def node_bench(ctx: Ctx, limit: Sequence[str] | None) -> str:
    """Every GPU of each node (or `limit`'s) in one process: all-reduce over them, NCCL's (its bus bandwidth is
    judged against the other nodes')."""
    allreduce = Workloads(
        suite="micro",
        preset="gpu",
        probes=("allreduce",),
        gpus="node",
        device="gpu",
        warmup=2,
        steps=ctx.level.probe_steps,
    )
    return ctx.bench(allreduce, limit=limit)


def pairs_of(nodes: Sequence[str]) -> list[tuple[str, str]]:
    """Nodes two by two in order; an odd one out goes with the first."""
    out = [(nodes[i], nodes[i + 1]) for i in range(0, len(nodes) - 1, 2)]
    if len(nodes) % 2 and len(nodes) > 1:
        out.append((nodes[-1], nodes[0]))
    return out


def pair_bench(ctx: Ctx, pair: Sequence[str]) -> str:
    """The network and all-reduce between two nodes: one distributed job of a worker on each."""
    preset = "gpu" if ctx.gpu else "quick"
    probes = Workloads(suite="micro", preset=preset, probes=("net", "allreduce"), warmup=1, steps=ctx.level.probe_steps)
    job = Options(scenario="distributed", workers=2, baseline=False, parallel=True)
    return ctx.bench(probes, limit=pair, scenario=job)


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
    the all-reduce over a node's GPUs at its largest size, as nccl-tests quotes it); a run of one GPU is judged
    per GPU."""
    by: dict[str, dict[str, list[float]]] = {}
    for r in runs:
        if r.status != "ok" or r.spec.get("gpu"):
            continue
        largest = f"allreduce {size_words(ALLREDUCE_BYTES[r.spec.get('scale', 'small')][-1])} busbw"
        for name, value in facts_mod.run_measures(r, store.measures(r.id) if r.is_probe else []).items():
            if name.startswith("allreduce ") and name != largest:
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
