"""The stages of an acceptance, one registered class each, in the order they run: provision, preflight, the
measures (every GPU of a node at once), the node's GPUs together, the pairs of nodes, the fleet analysis, then
the second pass and burn-in's hold (retest.py, registered after these); the verdict follows them (run.py). Each
stage runs its benches (workloads.py) through `run_bench`, into the store, and keeps what it found in the
acceptance's state; a finished stage whose inputs have not changed is not run again."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from dltestbed import __version__
from dltestbed.accept import facts as facts_mod
from dltestbed.accept.context import PREFLIGHT, REJOIN, Ctx, frameworks_in, on_every_node, read_runs
from dltestbed.accept.found import Facts, Found, Judged, Pair, Paired, Provisioned, encode
from dltestbed.accept.gpus import failing_nodes
from dltestbed.accept.readings import failures, node_measures, pair_runs, unanswered
from dltestbed.accept.slowness import suspects
from dltestbed.accept.state import StageRecord, digest
from dltestbed.accept.workloads import measure_benches, node_bench, pair_bench, pairs_of
from dltestbed.config import DEFAULT_FRAMEWORK
from dltestbed.errors import DltestbedError
from dltestbed.orchestrate import BenchInterrupted, Workloads
from dltestbed.provision import provision
from dltestbed.requests.provision import Hosts, Install, ProvisionRequest
from dltestbed.results.store import Store
from dltestbed.workload.frameworks import REGISTRY as FRAMEWORKS

SKIPPABLE = ("provision", "node", "pairs", "second", "hold", REJOIN)  # the verdict needs the others
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
