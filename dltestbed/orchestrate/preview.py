"""What a bench will run, before it runs: the count the progress counts against, and `bench --dry-run`'s
list (pytest's --collect-only, ReFrame's --list)."""

from __future__ import annotations

from collections.abc import Sequence

from dltestbed.choices import NODE, PER_GPU
from dltestbed.config import DEFAULT_FRAMEWORK, STEADY, ProbeSpec, WorkloadSpec
from dltestbed.orchestrate import pergpu
from dltestbed.orchestrate.planning import Plan, Spec
from dltestbed.orchestrate.scenarios import Options, scenario


def per_item(options: Options, hosts: Sequence[object]) -> int:
    """Runs one (repetition, workload, kind) makes: one per host alone; a job's workers (and the worker
    alone) distributed; the foreground alone and beside its co-tenant shared (the co-tenant not counted)."""
    return scenario(options.scenario).runs_per_item(options, hosts)


def count(plan: Plan, kinds: Sequence[str], options: Options, hosts: Sequence[object]) -> int:
    """Runs the bench makes (with --repeat auto: at most)."""
    return len(plan.runs()) * len(kinds) * per_item(options, hosts)


def describe(spec: Spec) -> str:
    """A workload in a few words: `alexnet train synthetic 64px bs8 2+20 steps float32` (the size the run
    uses: the preset's, or the model's native one; a framework other than the default named after the model)."""
    framework = f" ({spec.framework})" if spec.framework != DEFAULT_FRAMEWORK else ""
    if isinstance(spec, ProbeSpec):
        if spec.screen_seconds is not None:
            return f"screen {','.join(spec.probes)} for {spec.screen_seconds:g} s per GPU (once per bench)"
        return f"micro{framework} {','.join(spec.probes)} ({spec.scale})"
    assert isinstance(spec, WorkloadSpec)
    extra = (" deterministic" if spec.deterministic else "") + (" every GPU" if spec.gpus == NODE else "")
    return (
        f"{spec.model}{framework} {spec.mode} {spec.data} {spec.size}px bs{spec.batch_size} "
        f"{STEADY if spec.warmup is None else spec.warmup}+{spec.steps} steps {spec.math}{extra}"
    )


def scope(options: Options, hosts: Sequence[object]) -> str:
    """How one (repetition, workload, kind) runs, after its workload: ` (a job of 2 workers + 1 alone)`."""
    return scenario(options.scenario).scope(options, hosts)


def lines(plan: Plan, kinds: Sequence[str], options: Options, hosts: Sequence[object]) -> list[str]:
    """`bench --dry-run`: a line per repetition, workload and kind, in the order they run, then the total
    (with --gpus per-gpu, per GPU: the GPUs are read on each host when the bench starts, not by a dry run)."""
    each = pergpu.wanted(plan)
    how = scope(options, hosts) + (" on each GPU" if each else "")
    out = [f"rep {rep}  {kind:<4} {describe(spec)}{how}" for round_ in plan.rounds(kinds) for rep, spec, kind in round_]
    upto = f" at most ({plan.repeat} repetitions, --repeat auto)" if plan.precision else ""
    per = f" per GPU (--gpus {PER_GPU}: times the GPUs the bench finds)" if each else ""
    out.append(f"{count(plan, kinds, options, hosts)} run(s){per}{upto}; none was run (--dry-run)")
    return out
