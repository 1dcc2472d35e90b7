"""The same answer everywhere: runs made with --deterministic compared step by step, each against bare metal
(or, without bare metal, against the trajectory most runs computed). Pure.

Every step's result is the loss as the workload computed it (inference: the sum of the logits). Two runs of
the same work (model, data, sizes, steps, math, seed, worker) on the same software and hardware stack must
be bit-identical under TensorFlow's op determinism; on different stacks (another CPU model or CPU count,
GPU, TensorFlow, CUDA library) each kernel may sum in another order, so they must agree within the math's
tolerances (`tolerance`: tight on the first step, looser as training amplifies rounding). A run beyond them
diverged, and the first step where it did is named.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any

from dltestbed.kinds import BASELINE
from dltestbed.results.records import RunRecord
from dltestbed.workload.events import StepEvent
from dltestbed.workload.frameworks import gathered

# The fingerprint's facts that decide which kernels run and how they sum: two runs that share them all run
# the same code on the same kind of device (TensorFlow: "op determinism ... same hardware and software").
STACK = (
    *gathered(lambda fw: fw.stack_facts),
    "cpu_model",
    "cpu_affinity",  # Eigen and oneDNN split a reduction over the threads they may use
    "gpu",
    "cuda_runtime",
    "cudnn",
    "cublas",
)
# Unit roundoff of the format a model computes its products in (IEEE 754: 2^-p, p the significand's bits):
# float32 24, TF32 11 (10 stored), float16 11, bfloat16 8. "default" (a store before math was recorded) is
# TensorFlow's default on a GPU, TF32.
ROUNDOFF = {
    "float32": 2.0**-24,
    "tf32": 2.0**-11,
    "default": 2.0**-11,
    "mixed_float16": 2.0**-11,
    "mixed_bfloat16": 2.0**-8,
}
# Between stacks, two tolerances, relative to the loss:
# - the first step (one forward pass of the same initial weights on the same images, before any update):
#   another stack only reorders its sums; each dot product's error is within γ_K·|w|·|x| (Higham, "Accuracy and
#   Stability of Numerical Algorithms", §3.5), and with rounding errors of random sign it grows as √K·u (Higham and
#   Mary, "A new approach to probabilistic rounding error analysis", SIAM J. Sci. Comput. 41(5), 2019). These
#   models' longest dot products have K ≈ 10^4 (AlexNet's 4096-wide dense layers; ResNet-50's 3x3x512
#   convolutions: 4608): √K ≈ 100 units of the compute format's roundoff.
# - later steps: each update carries the previous step's difference forward and training amplifies it, so two
#   correct stacks drift apart (measured here: bare metal and a TCG VM, another CPU model, 7e-8 apart at step 0
#   and 4.6e-4 after 22 float32 steps of AlexNet). A later step is judged against the learning curve itself: a
#   loss more than DRIFT away from the reference's is no longer the same training (a wrong weight update, a NaN).
FIRST_K_ROOT = 100
DRIFT = 0.05


def tolerance(math_mode: str) -> tuple[float, float]:
    """(first step, later steps): the relative differences allowed between two different stacks in `math_mode`."""
    return FIRST_K_ROOT * ROUNDOFF.get(math_mode, ROUNDOFF["default"]), DRIFT


IDENTICAL, WITHIN, DIVERGED, NOT_REPRODUCIBLE = "identical", "within tolerance", "diverged", "not reproducible"


@dataclass(frozen=True)
class Agreement:
    """One deterministic run against its reference: how far its per-step results were from the reference's,
    the first step beyond the tolerance, and what differed between their stacks."""

    run: RunRecord
    reference: RunRecord
    basis: str  # "bare metal", or "the majority (3 of 4 runs)" without bare metal
    differs: tuple[str, ...]  # the stack's facts that differ, "cpu_model: A → B"; none: the same stack
    tolerance: tuple[float, float]  # relative, (first step, later steps); (0, 0) on the same stack (bit for bit)
    compared: int  # steps both have
    identical: bool
    max_abs: float
    max_rel: float
    first: int | None  # the first step beyond the tolerance (its index, warm-up included)

    @property
    def verdict(self) -> str:
        """identical, within tolerance, diverged (another stack, beyond the tolerance), or not reproducible
        (the same stack, not bit for bit)."""
        if self.identical:
            return IDENTICAL
        if self.first is None:
            return WITHIN
        return NOT_REPRODUCIBLE if not self.differs else DIVERGED

    @property
    def ok(self) -> bool:
        """Whether it computed the same answer: identical, or within tolerance on another stack."""
        return self.verdict in (IDENTICAL, WITHIN)

    def describe(self) -> str:
        """The comparison in one line, e.g. "diverged from bm (bare metal) at step 12: |Δ| 0.31 (14 %), …"."""
        ref = f"{self.reference.target_kind} run {self.reference.id} ({self.basis})"
        where = "; stacks differ in " + ", ".join(self.differs) if self.differs else "; the same stack"
        if self.identical:
            return f"identical to {ref} over {self.compared} steps, bit for bit{where}"
        size = f"largest |Δ| {self.max_abs:.3g} ({self.max_rel:.2e} relative)"
        if self.first is None:
            return f"within {tolerance_text(self.tolerance)} of {ref} over {self.compared} steps: {size}{where}"
        what = "not reproducible: differs from" if not self.differs else "diverged from"
        allowed = f"allowed {tolerance_text(self.tolerance)}" if self.differs else "the same stack must be bit for bit"
        return f"{what} {ref} at step {self.first} ({allowed}): {size}{where}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "run_id": self.run.id,
            "layer": self.run.target_kind,
            "host": self.run.host,
            "framework": self.run.framework,
            "model": self.run.model,
            "worker_index": self.run.worker_index,
            "reference_run_id": self.reference.id,
            "basis": self.basis,
            "verdict": self.verdict,
            "steps_compared": self.compared,
            "identical": self.identical,
            "max_abs_diff": _finite(self.max_abs),
            "max_rel_diff": _finite(self.max_rel),
            "tolerance_first_step": self.tolerance[0],
            "tolerance_later_steps": self.tolerance[1],
            "first_divergent_step": self.first,
            "stack_differs": list(self.differs),
        }


def tolerance_text(tol: tuple[float, float]) -> str:
    """ "bit for bit", or "1e-05 at step 0, 5 % later"."""
    return "bit for bit" if tol == (0.0, 0.0) else f"{tol[0]:.0e} at step 0, {tol[1]:.0%} later"


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def stack(fingerprint: Mapping[str, Any]) -> dict[str, str]:
    """The facts of a run's fingerprint that decide how it computes (STACK), as text; the GPUs its framework
    saw by name and driver."""
    seen = int(fingerprint.get("gpus_visible_to_tf") or fingerprint.get("gpus_visible") or 0)
    gpus = [g for g in fingerprint.get("gpus") or [] if isinstance(g, dict)][:seen]
    names = ", ".join(f"{g.get('name', '?')} (driver {g.get('driver', '?')})" for g in gpus)
    facts = {**fingerprint, "gpu": names or "none"}
    return {k: str(facts.get(k)) for k in STACK if facts.get(k) is not None}


def stack_diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[str, ...]:
    """What differs between two runs' stacks (fingerprints), "fact: a → b"."""
    sa, sb = stack(a), stack(b)
    return tuple(f"{k}: {sa.get(k, '-')} → {sb.get(k, '-')}" for k in STACK if sa.get(k) != sb.get(k))


def _same(a: float, b: float) -> bool:
    """Bit for bit (NaN is NaN)."""
    return a == b or (math.isnan(a) and math.isnan(b))


def compare(
    results: Sequence[float], reference: Sequence[float], tol: tuple[float, float]
) -> tuple[int, bool, float, float, int | None]:
    """Two trajectories of per-step results: (steps compared, bit-identical, largest |Δ|, largest relative
    Δ, the first step beyond `tol`: (at step 0, later)). Relative to the larger of the two values, or to the
    reference's median magnitude where that is larger (a sum of logits near 0 would make any Δ huge); a NaN or
    inf against a number is beyond any tolerance. Pure."""
    n = min(len(results), len(reference))
    finite = [abs(v) for v in reference[:n] if math.isfinite(v)]
    scale = median(finite) if finite else 0.0
    identical, max_abs, max_rel, first = True, 0.0, 0.0, None
    for i in range(n):
        a, b = results[i], reference[i]
        if _same(a, b):
            continue
        identical = False
        if not (math.isfinite(a) and math.isfinite(b)):
            d = rel = math.inf
        else:
            d = abs(a - b)
            rel = d / max(abs(a), abs(b), scale) if max(abs(a), abs(b), scale) > 0 else math.inf
        max_abs, max_rel = max(max_abs, d), max(max_rel, rel)
        if first is None and rel > tol[i > 0]:
            first = i
    return n, identical and n > 0, max_abs, max_rel, first


WorkKey = tuple[Any, ...]


def work(run: RunRecord) -> WorkKey:
    """What must be the same for two runs to compute the same losses: the model and its data, the sizes,
    steps, math, seed, the job's shape and the worker's place in it."""
    spec = run.spec
    return (
        run.framework,  # another framework's losses are another computation (other kernels, other init)
        run.model,
        run.mode,
        run.data,
        run.fingerprint.get("dataset_digest"),
        run.batch_size,
        run.image_size,
        spec.get("classes"),
        run.warmup,
        run.steps,
        run.math,
        run.xla,
        spec.get("seed"),
        run.workers,
        run.worker_index,
    )


def _results(steps: Sequence[StepEvent]) -> list[float]:
    """A run's per-step results in step order, up to the first step that recorded none."""
    out: list[float] = []
    for s in sorted(steps, key=lambda s: s.index):
        if s.result is None or s.index != len(out):
            break
        out.append(s.result)
    return out


def _reference(runs: Sequence[RunRecord], results: Mapping[str, list[float]]) -> tuple[RunRecord, str]:
    """The run the others are held against: the first bare-metal run (not an A′ arm), else one of the
    trajectory most runs computed bit for bit (when more than half did), else the first run."""
    for r in runs:
        if r.target_kind == BASELINE and not r.arm:
            return r, "bare metal"
    counts = Counter(tuple(results[r.id]) for r in runs)
    top, n = counts.most_common(1)[0]
    if n * 2 > len(runs):
        return next(r for r in runs if tuple(results[r.id]) == top), f"the majority ({n} of {len(runs)} runs)"
    return runs[0], f"the first run (no bare metal, no majority among {len(runs)})"


def agreements(runs: Sequence[RunRecord], steps: Mapping[str, Sequence[StepEvent]]) -> list[Agreement]:
    """Every deterministic run with per-step results against its work's reference (bare metal, or the
    majority), in the runs' order; the reference itself is not listed."""
    groups: dict[WorkKey, list[RunRecord]] = defaultdict(list)
    results: dict[str, list[float]] = {}
    for r in runs:
        if r.spec.get("deterministic") and r.measured and (got := _results(steps.get(r.id, ()))):
            results[r.id] = got
            groups[work(r)].append(r)
    out: list[Agreement] = []
    for members in groups.values():
        if len(members) < 2:
            continue
        ref, basis = _reference(members, results)
        for r in members:
            if r is ref:
                continue
            differs = stack_diff(ref.fingerprint, r.fingerprint)
            tol = tolerance(r.math) if differs else (0.0, 0.0)
            n, identical, max_abs, max_rel, first = compare(results[r.id], results[ref.id], tol)
            out.append(Agreement(r, ref, basis, differs, tol, n, identical, max_abs, max_rel, first))
    order = {r.id: i for i, r in enumerate(runs)}
    return sorted(out, key=lambda a: order[a.run.id])
