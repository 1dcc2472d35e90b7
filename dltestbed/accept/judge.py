"""A verdict for each node of an acceptance: pass, warn, fail or cannot judge, the worst of its reasons. A node
is judged on its drift from the fleet (report/drift.py), on each measure against its peers' (the other nodes'),
confirmed by a second pass before it fails, on runs that failed, and on its GPUs' verdicts
(report/gpu_verdicts.py). Pure.

The peer rule, as the fleet report's: a node is slow in a measure when its leave-one-out modified z-score is
below −3.5 and it is at least `slowdown` % below the other nodes' median (Iglewicz & Hoaglin; needs 3 nodes).
A slowdown counts only when it holds over a whole run's timed steps in the first pass and again in the second,
where the suspect is rerun at the same time as known-good controls and judged against their median alone, by
the same `slowdown` bar (a z-score needs more peers than a second pass has): what slows every node of a pass
(a shared fabric, filesystem or power budget; in a lab, shared cores) slows its controls too. Fewer than
CONTROLS_MIN controls: the suspicion cannot be confirmed.

A node the stages could not reach, provision or measure is left out of the stages after, and judged on that
alone: cannot judge (or fail, as the site chooses), naming the stage and why. Once mended (--resume), it is
measured beside controls; a measure it is slow in there is measured again beside them, and it fails only when
slow both times (as a suspect must be slow in both passes)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dltestbed.accept.slowness import CONTROLS_MIN, PEERS_MIN, Suspect, against_controls, suspects
from dltestbed.report import FLEET_MIN_SLOWDOWN, ROBUST_Z
from dltestbed.report.drift import Drift
from dltestbed.report.gpu_evidence import GpuVerdict, Reason, worst
from dltestbed.report.verdicts import FAIL, PASS, UNDECIDED, WARN

SLOW_ACTION = "drain the node; look at what else runs on it, its clocks, power and cooling; accept it again once mended"
DRIFT_ACTION = "install the fleet's (or the golden spec's) version on the node and accept it again"
FAILED_ACTION = "drain the node and read the run's log; accept it again once mended"
OUT_ACTION = (
    "mend the node (power, network, SSH, install); `dltestbed accept --resume` (with the same options) measures it "
    "beside controls"
)


@dataclass(frozen=True)
class LeftOut:
    """A check the acceptance did not make, and why (a stage that does not apply, peers one node cannot have)."""

    check: str
    why: str


@dataclass(frozen=True)
class Findings:
    """Everything a node is judged on. measures: first pass, measure → node → value (more is better); second:
    the suspects' reruns; failed: node → the first failed run's reason per pass (second: None where the rerun
    worked); causes: node → what explains its slowness; extra: reasons found elsewhere (the pairs, burn-in)."""

    nodes: tuple[str, ...]
    drifts: Sequence[Drift] = ()
    measures: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    second: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    failed: Mapping[str, str] = field(default_factory=dict)
    failed_second: Mapping[str, str | None] = field(default_factory=dict)
    causes: Mapping[str, str] = field(default_factory=dict)
    gpus: Sequence[GpuVerdict] = ()
    extra: Mapping[str, Sequence[Reason]] = field(default_factory=dict)
    slowdown: float = FLEET_MIN_SLOWDOWN
    compared: Mapping[str, Sequence[str]] = field(default_factory=dict)  # node → the facts its drift compared
    drift_basis: str = "the fleet's majority"  # what they were compared with (or "the golden spec")
    left_out: Sequence[LeftOut] = ()  # checks not made, with why (one node: no peers, no pair)
    out: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # node → (stage, why) it was left out
    out_verdict: str = UNDECIDED  # what a node left out gets: cannot judge, or fail (--unreachable fail)
    # the second pass: suspect → measure → control → its value, measured beside it; and whether at the same time
    controls: Mapping[str, Mapping[str, Mapping[str, float]]] = field(default_factory=dict)
    together: bool = True
    rejoined: Sequence[str] = ()  # nodes left out, then measured once mended (--resume): `second` has their values
    # a mended node measured again where it was slow beside its controls: measure → node → value, and its controls'
    # values in that round (as `controls`)
    again: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    controls_again: Mapping[str, Mapping[str, Mapping[str, float]]] = field(default_factory=dict)

    @property
    def judged(self) -> tuple[str, ...]:
        """The nodes measured: every node not left out."""
        return tuple(n for n in self.nodes if n not in self.out)


@dataclass(frozen=True)
class NodeVerdict:
    """A node's verdict (its worst reason's), every reason, and its GPUs' verdicts."""

    node: str
    verdict: str
    reasons: tuple[Reason, ...]
    gpus: tuple[GpuVerdict, ...] = ()
    slow: tuple[
        str, ...
    ] = ()  # its measures confirmed slow, each in a few words ("alexnet img/s 50 % below its peers")
    cause: str = ""  # what explains its slowness, where it is slow

    @property
    def summary(self) -> str:
        """Its worst reasons in one short line (what a drain's reason says): each drift and failure in words,
        the slow measures named once, then their cause."""
        worst = [r for r in self.reasons if r.verdict == self.verdict and r.verdict != PASS]
        said = [r.why for r in worst if not (r.verdict == FAIL and r.action == SLOW_ACTION)]
        if self.slow and self.verdict == FAIL:
            more = f" and {len(self.slow) - 1} more measure(s)" if len(self.slow) > 1 else ""
            said.append(
                f"slow: {self.slow[0]}{more}, in both passes" + (f"; cause: {self.cause}" if self.cause else "")
            )
        return "; ".join(said) or self.verdict


def _measured(f: Findings, node: str, mine: Sequence[Suspect]) -> list[Reason]:
    """Each of the node's suspects (`mine`) after the second pass, each measure it is within its peers in, and each
    measure too few nodes had (fewer nodes in all than a peer comparison needs: peers are left out)."""
    out = []
    for s in mine:
        below = (1 - s.value / s.score.median) * 100
        first = f"{s.measure} {below:.0f} % below its {s.peers} peers' median (modified z {s.score.z:.1f})"
        rerun = f.second.get(s.measure, {}).get(node)
        if rerun is None:
            why = f"{first}; the second pass did not measure it again"
            out.append(Reason(s.measure, UNDECIDED, why, "accept the node again", f"{s.value:.4g}"))
            continue
        r = _beside(f, node, s.measure, rerun, f"first {s.value:.4g}, second {rerun:.4g}, ")
        if r is None:
            controls = f.controls.get(node, {}).get(s.measure, {})
            why = (
                f"{first} in the first pass; the suspicion cannot be confirmed: {len(controls)} known-good node(s) "
                f"ran beside it in the second pass, where {CONTROLS_MIN} are needed"
            )
            out.append(Reason(s.measure, UNDECIDED, why, "accept it again with more like nodes", f"{rerun:.4g}"))
        elif r.verdict == PASS:
            why = f"{first} in the first pass; cleared by the second pass: {r.why}"
            out.append(Reason(s.measure, PASS, why, "", r.evidence))
        else:
            cause = f.causes.get(node)
            why = f"{first}; the second pass measured it {r.why}" + (f"; cause: {cause}" if cause else "")
            out.append(Reason(s.measure, FAIL, why, SLOW_ACTION, r.evidence))
    suspected = {s.measure for s in mine}
    alone = sorted(name for name, values in f.measures.items() if node in values)
    if alone and len(f.judged) < PEERS_MIN and not any(g.gpu.rsplit(":", 1)[0] == node for g in f.gpus):
        why = (
            f"{len(f.judged)} node(s): its measures ({', '.join(alone)}) have no peers to be compared with (from "
            f"{PEERS_MIN}) and no board's values: a node without GPUs is not judged on its speed alone"
        )
        out.append(Reason("peers", UNDECIDED, why, "accept it with 2 or more like nodes, or against golden ones"))
    for name, values in f.measures.items():
        if node not in values or name in suspected or len(f.judged) < PEERS_MIN:
            continue
        if len(values) < PEERS_MIN:
            why = f"{name}: {len(values)} node(s) measured it; a peer comparison needs {PEERS_MIN}"
            out.append(Reason(name, UNDECIDED, why))
        else:
            why = (
                f"{name} not slower than its {len(values) - 1} peers' median (a node is slow from {f.slowdown:g} % "
                f"below it with a modified z below −{ROBUST_Z:g})"
            )
            out.append(Reason(name, PASS, why, "", f"{values[node]:.4g}"))
    return out


def _beside(
    f: Findings,
    node: str,
    name: str,
    rerun: float,
    first: str,
    among: Mapping[str, Mapping[str, Mapping[str, float]]] | None = None,
) -> Reason | None:
    """A value measured beside controls (a suspect's rerun, or a mended node's), against their median (the
    controls of `among`, or of the second pass and rejoin): a reason, or None where the controls are too few (the
    caller says so in its words)."""
    controls = (f.controls if among is None else among).get(node, {}).get(name, {})
    if len(controls) < CONTROLS_MIN:
        return None
    mid, off = against_controls(rerun, controls)
    when = "at the same time" if f.together else "in the same pass, one after another (--no-parallel)"
    evidence = f"{first}controls' median {mid:.4g} (" + ", ".join(f"{c} {v:.4g}" for c, v in controls.items()) + ")"
    said = f"{off:.0f} % below" if off >= 0 else f"{-off:.0f} % above"
    beside = f"{said} the median of its controls {', '.join(controls)}, measured {when}"
    if off < f.slowdown:
        return Reason(name, PASS, beside, "", evidence)
    return Reason(name, FAIL, beside, SLOW_ACTION, evidence)


def _mended(f: Findings, node: str) -> list[Reason]:
    """A node left out and measured once mended (--resume): each measure against the controls measured beside it;
    one it was slow in, against the controls measured beside it again (slow both times: a fail)."""
    mine = {name: values[node] for name, values in f.second.items() if node in values}
    if not mine:
        return [Reason("measures", UNDECIDED, "not measured once mended", "accept it again")]
    out = []
    for name, value in mine.items():
        r = _beside(f, node, name, value, f"once mended {value:.4g}, ")
        again = f.again.get(name, {}).get(node)
        if r is None:
            few = f"{name}: measured once mended; fewer than {CONTROLS_MIN} known-good nodes ran beside it"
            out.append(Reason(name, UNDECIDED, few, "accept it again with more like nodes", f"{value:.4g}"))
        elif r.verdict == FAIL and again is not None:
            out.append(_mended_again(f, node, name, r, f"once mended {value:.4g}, again {again:.4g}, "))
        else:
            out.append(Reason(name, r.verdict, f"{name} once mended (--resume): {r.why}", r.action, r.evidence))
    return out


def _mended_again(f: Findings, node: str, name: str, first: Reason, values: str) -> Reason:
    """A mended node's measure that was slow beside its controls, measured again beside them: cleared or failed."""
    again = f.again[name][node]
    r = _beside(f, node, name, again, values, f.controls_again)
    said = f"{name} once mended (--resume): {first.why}"
    if r is None:
        few = f"{said}; measured again, fewer than {CONTROLS_MIN} known-good nodes ran beside it"
        return Reason(name, UNDECIDED, few, "accept it again with more like nodes", f"{again:.4g}")
    if r.verdict == PASS:
        return Reason(name, PASS, f"{said}; cleared when measured again: {r.why}", "", r.evidence)
    return Reason(name, FAIL, f"{said}; and again: {r.why}", r.action, r.evidence)


def _failures(f: Findings, node: str) -> list[Reason]:
    first = f.failed.get(node)
    if first is None:
        ran = any(node in values for values in f.measures.values())
        return [Reason("runs", PASS, "every run of the first pass worked")] if ran else []
    if len(f.failed) == len(f.judged) and all(f.failed_second.get(n) for n in f.judged):
        return [Reason("runs", UNDECIDED, f"a check failed on every node, twice ({first}): it cannot run here")]
    if node not in f.failed_second:
        return [Reason("runs", UNDECIDED, f"a run failed ({first}) and was not run again")]
    again = f.failed_second[node]
    if again is None:
        return [Reason("runs", WARN, f"a run failed in the first pass ({first}) and worked in the second")]
    return [Reason("runs", FAIL, f"a run failed in both passes: {again}", FAILED_ACTION, first)]


def _drift(f: Findings, node: str) -> list[Reason]:
    """Its facts that drifted from the fleet's (or the golden spec's); a pass naming the facts compared where none
    did."""
    mine = [d for d in f.drifts if d.node == node]
    out = [
        Reason(f"drift {d.fact}", d.verdict, d.why, DRIFT_ACTION if d.verdict == FAIL else "", d.basis) for d in mine
    ]
    facts = f.compared.get(node, ())
    if not mine and facts and not any(x.check == "drift" for x in f.left_out):
        out.append(Reason("drift", PASS, f"its {len(facts)} facts match {f.drift_basis}", "", ", ".join(facts)))
    return out


def _gpus(f: Findings, node: str) -> list[Reason]:
    out = []
    for g in f.gpus:
        if g.gpu.rsplit(":", 1)[0] != node:
            continue
        if g.verdict == PASS:
            said = f"GPU {g.gpu} ({g.name}): its {len(g.reasons)} checks passed"
            out.append(Reason(f"gpu {g.gpu}", PASS, said))
            continue
        worst = [r for r in g.reasons if r.verdict == g.verdict]
        out.append(
            Reason(
                f"gpu {g.gpu}",
                g.verdict,
                f"GPU {g.gpu} ({g.name}): " + "; ".join(r.why for r in worst),
                worst[0].action if worst else "",
                "; ".join(r.evidence for r in worst if r.evidence),
            )
        )
    return out


def _left_out(f: Findings, node: str) -> NodeVerdict:
    """A node the stages left out: judged on that alone, naming the stage and why."""
    stage, why = f.out[node]
    said = f"not measured: left out at stage {stage}: {why}"
    return NodeVerdict(node, f.out_verdict, (Reason(f"stage {stage}", f.out_verdict, said, OUT_ACTION),))


def judge(f: Findings) -> list[NodeVerdict]:
    """Every node's verdict, in the order of `f.nodes`."""
    out = []
    found = suspects(f.measures, f.slowdown)
    for node in f.nodes:
        if node in f.out:
            out.append(_left_out(f, node))
            continue
        if node in f.rejoined:
            reasons = _drift(f, node) + _mended(f, node) + _gpus(f, node) + [*f.extra.get(node, ())]
            gpus = tuple(g for g in f.gpus if g.gpu.rsplit(":", 1)[0] == node)
            out.append(NodeVerdict(node, worst(reasons), tuple(reasons), gpus))
            continue
        mine = [s for s in found if s.node == node]
        reasons = _drift(f, node) + _failures(f, node) + _measured(f, node, mine) + _gpus(f, node)
        reasons += f.extra.get(node, ())
        gpus = tuple(g for g in f.gpus if g.gpu.rsplit(":", 1)[0] == node)
        slow = tuple(
            f"{s.measure} {(1 - s.value / s.score.median) * 100:.0f} % below its peers"
            for s in mine
            if any(r.check == s.measure and r.verdict == FAIL for r in reasons)
        )
        out.append(NodeVerdict(node, worst(reasons), tuple(reasons), gpus, slow, f.causes.get(node, "")))
    return out
