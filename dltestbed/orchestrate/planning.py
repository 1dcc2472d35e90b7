"""A bench's plan: which workloads (a preset's, or the options'), how often, in which order; the scenarios run it."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from dltestbed import dataset, paths
from dltestbed.choices import FRAMEWORKS, GPUS, NODE, ONE, ORDERS, PER_GPU, SUITES, Device, or_list
from dltestbed.config import (
    ALONE_PROBES,
    DEFAULT_FRAMEWORK,
    FRAMEWORK_PROBES,
    PAIR_PROBES,
    SCREEN_PROBES,
    STEADY,
    ProbeSpec,
    RunSpec,
    Spec,
    WorkloadSpec,
    parse_warmup,
    probe_spec,
    resolve_path,
    workload_spec,
)
from dltestbed.errors import ConfigError
from dltestbed.orchestrate.presets import Preset, preset
from dltestbed.requests.bench import Compute, Repetitions, Workloads
from dltestbed.results.records import new_id
from dltestbed.workload.frameworks import REGISTRY

T = TypeVar("T")
AA_ARM = "A′"  # the baseline kind's second run in a repetition (--aa)
PROBE_WARMUP, PROBE_STEPS = 1, 5  # per probe case, unless --warmup / --steps say otherwise


def arms(kinds: Sequence[str]) -> list[str]:
    """Per kind of a machine's list: "" for the first of a kind, AA_ARM for its repeat (--aa)."""
    return [AA_ARM if k in kinds[:i] else "" for i, k in enumerate(kinds)]


@dataclass(frozen=True)
class Plan:
    """The runs of a bench, in order: repetitions outermost, so drift hits every model alike. Immutable."""

    bench_id: str
    specs: list[Spec]
    repeat: int
    scenario: str = "single"
    order: str = "interleaved"  # or random: each repetition's runs shuffled, seeded
    seed: int = 0
    precision: float | None = None  # --repeat auto: add repetitions until every overhead is within ±precision %
    aa: bool = False  # the baseline kind runs twice per repetition, as A and A′ (the noise floor)
    preset: str = "quick"  # the preset its defaults came from
    gpus: str = ONE  # choices.Gpus, the controller's placement: per-gpu runs each spec once per GPU of a machine

    def runs(self) -> list[tuple[int, Spec]]:
        """(repetition, spec) pairs in execution order."""
        return [(rep, spec) for rep in range(1, self.repeat + 1) for spec in self.specs_in(rep)]

    def specs_in(self, rep: int) -> list[Spec]:
        """The specs a repetition runs: every one, but a screen (a health check of each GPU, passed or failed, not
        a measure that repetitions sharpen) only in the first."""
        return [s for s in self.specs if rep == 1 or not is_screen(s)]

    @property
    def models(self) -> list[Spec]:
        """The specs that run a model (not the microbenchmarks)."""
        return [s for s in self.specs if s.mode != "probe"]

    def rounds(self, kinds: Sequence[T], reps: Sequence[int] | None = None) -> list[list[tuple[int, Spec, T]]]:
        """Per repetition (all, or `reps`), every (spec, kind) once: in order (interleaved) or shuffled
        with a seeded RNG (random) — either way drift hits every kind alike."""
        out = []
        for rep in reps or range(1, self.repeat + 1):
            items = [(rep, seeded(spec, rep), k) for spec in self.specs_in(rep) for k in kinds]
            if self.order == "random":
                random.Random(f"{self.seed}:{rep}").shuffle(items)
            out.append(items)
        return out


def is_screen(spec: Spec) -> bool:
    """Whether a spec is --suite screen's checks (run once per bench and target)."""
    return isinstance(spec, ProbeSpec) and spec.screen_seconds is not None


def seeded(spec: Spec, rep: int) -> Spec:
    """The spec a repetition runs: an --accuracy run trains from the seed plus the repetition, the same on every
    target of it (the spread over repetitions is the training's own; each layer pairs with bare metal's)."""
    if isinstance(spec, WorkloadSpec) and spec.accuracy:
        return spec.model_copy(update={"seed": spec.seed + rep - 1})
    return spec


@dataclass(frozen=True)
class Given:
    """What the user gave of a workload's settings (None: the preset's)."""

    image_size: int | None
    batch_size: int | None
    warmup: int | str | None
    steps: int | None
    math: str | None
    xla: bool | None
    data_dir: str | None


def plan(
    workloads: Workloads | None = None,
    compute: Compute | None = None,
    repetitions: Repetitions | None = None,
    device: Device = "auto",
    scenario: str = "single",
    preset_name: str | None = None,
) -> Plan:
    """The bench's plan of its groups, every value checked up front: a bad one fails before any run starts.
    repeat: a count, or "auto" (until every overhead's interval is within ±precision %, at most max_repeat).
    warmup: a count, STEADY, or None (the preset's; the probes' PROBE_WARMUP). suite: study (the models, each with
    each framework), micro (`probes` per target and repetition; by default those of one target, or between a
    distributed job's workers) or full; screen: the checks for `screen_seconds` per GPU (first repetition) and a
    deterministic training of the first model. The preset's XLA is left out of a deterministic run
    (config.XLA_NOT_DETERMINISTIC). gpus: the controller's placement (choices.Gpus); each spec is given the GPUs
    one of its processes uses (per-gpu: one). The preset is the workloads' unless `preset_name` says (auto's
    choice). Every other field of a group that a run's spec has goes to the spec as given (`passed`)."""
    w, c, r = workloads or Workloads(), compute or Compute(), repetitions or Repetitions()
    p = preset(preset_name or w.preset)
    chosen = _check_suite(w, c)
    common = {**passed(w, c), "device": device, "gpus": _process_gpus(w.gpus, scenario, device)}
    if device == "cpu" and c.gpu_memory_mib is not None:
        raise ConfigError("--gpu-memory-mib sizes GPU memory, and --device cpu hides the GPUs: leave one out")
    count, auto = _repetitions(r.repeat, r.precision, r.max_repeat)
    if r.order not in ORDERS:
        raise ConfigError(f"--order: unknown order {r.order!r}; known: {', '.join(ORDERS)}")
    data_dir = str(resolve_path(w.data_dir)) if w.data_dir is not None else None
    if w.data == "real":
        common.update(_real_data(data_dir, w.accuracy))
    names = list(dict.fromkeys(w.models)) if w.models else list(p.models)
    if w.suite == "screen":
        names, common = names[:1], {**common, "deterministic": True}
    given = Given(w.image_size, w.batch_size, w.warmup, w.steps, c.math, c.xla, data_dir)
    trained = names if w.suite != "micro" else []
    specs: list[Spec] = [_model_spec(p, n, given, {**common, "framework": fw}) for n in trained for fw in chosen]
    for i, fw in enumerate(chosen if w.suite != "study" else ()):  # the probes with each framework
        spec = _probe_spec(p, w, scenario, given, {**common, "framework": fw})
        own = tuple(x for x in spec.probes if x in FRAMEWORK_PROBES)  # the others once, with the first framework
        specs += [spec] if not i else [spec.model_copy(update={"probes": own})] if own else []
    return Plan(
        bench_id=new_id("b"),
        specs=specs,
        repeat=count,
        order=r.order,
        seed=r.seed,
        precision=r.precision if auto else None,
        aa=r.aa,
        scenario=scenario,
        preset=p.name,
        gpus=w.gpus,
    )


# the groups' fields a spec has that the plan reads itself: the preset's when not given, or turned into the spec's
PLANNED = frozenset({*Given.__dataclass_fields__, "gpus", "models", "frameworks"})


def passed(*groups: Any) -> dict[str, Any]:
    """The fields of `groups` that a model's spec has, as given (those the plan reads itself, PLANNED, aside; one
    not given, None, left at the spec's default)."""
    spec = WorkloadSpec.model_fields
    values = {f.name: getattr(g, f.name) for g in groups for f in dataclasses.fields(g)}
    return {k: v for k, v in values.items() if k in spec and k not in PLANNED and v is not None}


def _process_gpus(gpus: str, scenario: str, device: object) -> str:
    """The GPUs each process of a placement uses (config.RunSpec.gpus): node's every one, else one (per-gpu gives
    each of its processes one GPU, by UUID, when the bench starts); a ConfigError for a placement not known, or
    per-gpu where there is no machine's GPUs to place."""
    if gpus not in GPUS:
        raise ConfigError(f"--gpus: unknown placement {gpus!r}; known: {', '.join(GPUS)}")
    if gpus == PER_GPU and device == "cpu":
        raise ConfigError(f"--gpus {PER_GPU} runs a process on each GPU, and --device cpu hides them")
    if gpus == PER_GPU and scenario == "distributed":
        raise ConfigError(f"--gpus {PER_GPU} is for one machine's GPUs; a distributed job's workers use theirs")
    return NODE if gpus == NODE else ONE


def _model_spec(p: Preset, name: str, given: Given, common: dict[str, Any]) -> WorkloadSpec:
    """A model's spec: what the user gave, else the preset's (its XLA left out of a deterministic run)."""
    g = given
    return workload_spec(
        model=name,
        image_size=g.image_size if g.image_size is not None else p.sizes.get(name),
        data_dir=g.data_dir,
        batch_size=g.batch_size if g.batch_size is not None else p.batches.get(name, p.batch_size),
        warmup=p.warmup if g.warmup is None else _warmup(g.warmup),
        steps=g.steps if g.steps is not None else p.steps,
        math=g.math if g.math is not None else p.math,
        xla=g.xla if g.xla is not None else p.xla and not common.get("deterministic"),
        **common,
    )


def _probe_spec(p: Preset, w: Workloads, scenario: str, given: Given, common: dict[str, Any]) -> ProbeSpec:
    """The probes' spec with a framework: those given, else the suite's and scenario's, at the preset's scale; of the
    rest, what every run's spec has (RunSpec)."""
    pair, screen = scenario == "distributed", w.suite == "screen"
    return probe_spec(
        probes=tuple(w.probes) if w.probes else SCREEN_PROBES if screen else PAIR_PROBES if pair else ALONE_PROBES,
        scale=w.probe_scale or p.probe_scale,
        distributed=pair,
        screen_seconds=w.screen_seconds if screen else None,
        warmup=PROBE_WARMUP if given.warmup in (None, STEADY) else _warmup(given.warmup),
        steps=given.steps if given.steps is not None else PROBE_STEPS,
        **{k: v for k, v in {**common, "data_dir": given.data_dir}.items() if k in RunSpec.model_fields},
    )


def _frameworks(frameworks: Sequence[str] | None, gpus: str) -> list[str]:
    """The frameworks each model and the probes (the screen's checks too) run with (none given: the default),
    known and each once, each able to run --gpus as asked."""
    chosen: list[str] = list(dict.fromkeys(frameworks)) if frameworks else [DEFAULT_FRAMEWORK]
    for fw in chosen:
        if fw not in FRAMEWORKS:
            raise ConfigError(f"--framework: unknown framework {fw!r}; known: {or_list(FRAMEWORKS)}")
        if gpus == NODE and not REGISTRY[fw].node_jobs:
            raise ConfigError(
                f"--gpus {NODE} runs one process over every GPU, which {REGISTRY[fw].label} does not here: "
                f"use --gpus {PER_GPU}, or --scenario distributed (one process per GPU)"
            )
    return chosen


def _check_suite(w: Workloads, c: Compute) -> list[str]:
    """The suite is known and the options given go with it; the frameworks each model runs with."""
    if w.suite not in SUITES:
        raise ConfigError(f"--suite: unknown suite {w.suite!r}; known: {', '.join(SUITES)}")
    if w.probes and w.suite == "study":
        raise ConfigError("--probes goes with --suite micro or full")
    if w.suite == "micro" and w.models:
        raise ConfigError("--model goes with --suite study or full (micro runs no model)")
    if w.suite == "micro" and (c.math is not None or c.xla is not None):
        raise ConfigError("--math and --xla go with --suite study or full (the gemm probe measures every math)")
    other = [p for p in w.probes or () if p not in SCREEN_PROBES]
    if w.suite == "screen" and other:
        raise ConfigError(f"--probes: --suite screen checks {' and '.join(SCREEN_PROBES)}, not {other[0]}")
    return _frameworks(w.frameworks, w.gpus)


def _warmup(warmup: int | str) -> int | None:
    """--warmup (config.parse_warmup), or one ConfigError line."""
    try:
        return parse_warmup(warmup)
    except ValueError as exc:
        raise ConfigError(f"--warmup: {exc}") from None


def _repetitions(repeat: int | str, precision: float, max_repeat: int) -> tuple[int, bool]:
    """How many repetitions at most, and whether --repeat auto stops earlier."""
    if repeat == "auto":
        if not 0 < precision < 100:
            raise ConfigError(f"--precision: a half-width in % between 0 and 100 (got {precision})")
        if max_repeat < 2:
            raise ConfigError(f"--max-repeat: at least 2 for an interval (got {max_repeat})")
        return max_repeat, True
    if not str(repeat).isdigit():
        raise ConfigError(f"--repeat: a number of repetitions or 'auto' (got {repeat!r})")
    if int(repeat) < 1:
        raise ConfigError(f"--repeat: at least 1 (got {repeat})")
    return int(repeat), False


def _real_data(data_dir: str | None, accuracy: bool = False) -> dict[str, Any]:
    """The dataset's classes and identity, read once per change of its content; with `accuracy`, a held-out
    image at least."""
    if not data_dir:
        raise ConfigError("--data real needs --data-dir DIR (make one with `dltestbed data make`)")
    index = dataset.scan(data_dir)
    if len(index.classes) < 2:
        raise ConfigError(f"data dir {data_dir!r} has 1 class; at least 2 are needed")
    if accuracy and not dataset.split(index)[1].files:
        raise ConfigError(
            f"--accuracy: data dir {data_dir!r} has no class of {dataset.HOLDOUT_EVERY} images or more, "
            "so none is held out; make one with `dltestbed data make --images-per-class 50`"
        )
    ident = dataset.identify(index, paths.cache_dir() / "dataset-digests.json")
    return {
        "classes": len(index.classes),
        "data_digest": ident.digest,
        "data_files": ident.files,
        "data_bytes": ident.bytes,
    }
