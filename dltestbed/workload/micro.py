"""A spec whose model is "micro": the microbenchmarks (probes/) planned on this target, timed, checked where
they have a check, or (--suite screen) only checked for a set time per GPU."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dltestbed.choices import NODE
from dltestbed.config import NODE_PROBES, ProbeSpec
from dltestbed.errors import ConfigError
from dltestbed.workload.emit import Emitter
from dltestbed.workload.events import (
    CheckEvent,
    MeasureEvent,
    ProbesDoneEvent,
    SkipEvent,
    StartEvent,
)
from dltestbed.workload.frameworks import ProbeFramework, ProbeSetup, framework, gathered
from dltestbed.workload.start import prepare

if TYPE_CHECKING:
    from dltestbed.workload.checked import Checked
    from dltestbed.workload.gpu import Nvml
    from dltestbed.workload.probes import Case, Probe, Where


def _plan_cases(names: Sequence[str], where: Where, cases: list[Case], table: Mapping[str, Probe]) -> list[SkipEvent]:
    """Each probe's cases on this target (from `table`: the probes by name), appended to `cases` (so that cleanup
    reaches every case planned, even when a later probe fails); the skips, each with its reason."""
    # lazy: TensorFlow, NVML, the CUDA runtime load only in the modes that use them
    from dltestbed.workload import probes

    skips: list[SkipEvent] = []
    for name in names:
        try:
            planned = table[name](where)
        except probes.Skip as why:
            skips.append(SkipEvent(probe=name, case="", reason=str(why)))
            continue
        for c in planned:
            if isinstance(c, probes.Skip):
                skips.append(SkipEvent(probe=name, case=c.case, reason=str(c)))
            else:
                cases.append(c)
    return skips


def _time_cases(cases: Sequence[Case], spec: ProbeSpec, where: Where, emitter: Emitter) -> int:
    """Time every case, a measure event per value per call, then check its result where it has a check (a
    check event each); the number of timed measures sent."""
    # lazy: TensorFlow, NVML, the CUDA runtime load only in the modes that use them
    from dltestbed.workload import probes

    measures = 0
    for c in cases:
        for i, phase, values, dt in probes.timed(c, spec.scale, spec.warmup, spec.steps, where.agree):
            for name, unit, value in values:
                event = MeasureEvent(
                    probe=c.probe, case=name, index=i, phase=phase, value=value, unit=unit, seconds=dt, t=time.time()
                )
                emitter.emit(event)
                measures += phase == "timed"
        if c.check is not None:
            for checked in c.check(spec.seed):
                emitter.emit(check_event(c.probe, c.name, checked, spec.seed))
    return measures


def check_event(probe: str, case: str, checked: Checked, seed: int) -> CheckEvent:
    """The event of a probe's checked result."""
    v = checked.verdict
    return CheckEvent(
        probe=probe,
        case=checked.name or case,
        kind=checked.kind,
        elements=v.elements,
        mismatches=v.mismatches,
        worst=v.worst,
        tolerance=v.tolerance,
        seed=seed,
        t=time.time(),
        gpu=checked.gpu,
        where=v.where() if not v.ok else "",
    )


def _in_tf_order(gpus: list[dict[str, Any]], visible: int) -> list[dict[str, Any]]:
    """NVML's facts of each GPU TensorFlow sees, in TensorFlow's (CUDA's) order, matched by PCI bus id
    (gpu.in_cuda_order). Where the CUDA runtime cannot say which is which: NVML's order only when nothing can
    have reordered it (the same count, no CUDA_VISIBLE_DEVICES), else no facts ({}: the GPU's name and limits
    unknown, never another GPU's)."""
    if not visible:
        return []
    # lazy: TensorFlow, NVML, the CUDA runtime load only in the modes that use them
    from dltestbed.workload import cudart
    from dltestbed.workload.gpu import in_cuda_order

    try:
        return in_cuda_order(gpus, cudart.pci_bus_ids())[:visible]
    except cudart.CudaError:
        if len(gpus) == visible and "CUDA_VISIBLE_DEVICES" not in os.environ:
            return list(gpus)
        return [{} for _ in range(visible)]


def run_micro(spec: ProbeSpec, emitter: Emitter, watch_stdin: bool = False) -> None:
    """Plan every probe's cases on this target, say so in the start event (with each skip), then time
    each case and emit a measure per call, then probes_done. Scratch files are removed whatever happens."""
    # lazy: TensorFlow, NVML, the CUDA runtime load only in the modes that use them
    from dltestbed.workload import fingerprint, probes

    index, data_facts, cluster = prepare(spec, watch_stdin, min_classes=1)  # disk reads any dataset
    # lazy: TensorFlow, NVML, the CUDA runtime load only in the modes that use them
    from dltestbed.workload.gpu import Nvml

    nvml = Nvml.open()
    gpus = nvml.devices() if nvml else []
    fp = fingerprint.base(gathered(lambda f: f.distributions))
    fw = ProbeFramework()  # membw and disk alone start in a second, even in an emulated VM: no framework loaded
    if set(spec.probes) & probes.NEED_FRAMEWORK:  # seconds to import: only the probes that need it load it
        node = spec.gpus == NODE and bool(set(spec.probes) & set(NODE_PROBES))  # the others: as on one GPU
        setup = ProbeSetup(spec.gpu_memory_mib, cluster, gpus, fp, node, spec.cpu_devices)
        fw = framework(spec.framework).for_probes(setup)
    visible, strategy = fw.gpus, fw.strategy
    seen = visible if fw.module is not None else len(gpus)  # no framework loaded (membw, disk): NVML's count
    if spec.device == "gpu" and not seen:
        raise ConfigError(f"--device gpu: no GPU is visible to {framework(spec.framework).label} on {fp['host']}")
    fp.update(data_facts)
    fp.setdefault("gpus", gpus)  # NVML's view, also where no framework loaded (acceptance's preflight reads it)
    facts = _in_tf_order(gpus, visible)
    where = probes.Where(
        fw.module,
        tuple(str(f.get("name", "GPU")) for f in facts),
        spec.scale,
        tuple(index.files) if index else (),
        spec.seed,
        strategy,
        cluster.size if cluster else 1,
        tuple(facts),
        cluster.index if cluster else 0,
        fw.agree or probes.alone,
        fw.checks,
    )
    table = {**probes.PROBES, **fw.probes}
    cases: list[probes.Case] = []
    try:
        if spec.screen_seconds is not None:
            _screen(spec, spec.screen_seconds, where, fp, nvml, emitter)
            return
        skips = _plan_cases(spec.probes, where, cases, table)
        _announce(spec, cases, skips, visible, fp, emitter)
        # lazy: TensorFlow, NVML, the CUDA runtime load only in the modes that use them
        from dltestbed.workload.sampler import Sampler, watched

        sampler = Sampler(emitter.emit, spec.sample_interval, nvml)
        with watched(nvml, emitter.emit, sampler), sampler.running():
            measures = _time_cases(cases, spec, where, emitter)
        emitter.emit(ProbesDoneEvent(measures=measures, skips=len(skips)))
    finally:
        _clean_up(cases, nvml)


def _announce(
    spec: ProbeSpec,
    cases: Sequence[Case],
    skips: Sequence[SkipEvent],
    visible: int,
    fp: dict[str, Any],
    emitter: Emitter,
) -> None:
    """The start event, with every case planned, then each skip."""
    cases_of = [d for c in cases for d in c.describe()]
    resolved = spec.model_dump() | {"cases": cases_of, "device_used": "gpu" if visible else "cpu"}
    emitter.emit(StartEvent(spec=resolved, fingerprint=fp, t=time.time()))
    for skip in skips:
        emitter.emit(skip)


def _clean_up(cases: Sequence[Case], nvml: Nvml | None) -> None:
    """Each planned case's cleanup, then NVML closed."""
    for c in cases:
        if c.cleanup is not None:
            c.cleanup()
    if nvml:
        nvml.close()


def _screen(spec: ProbeSpec, seconds: float, where: Where, fp: dict[str, Any], nvml: Any, emitter: Emitter) -> None:
    """--suite screen: the start event, then the checks for `seconds` per device (screen.py),
    sampled and health-checked like any run, then probes_done (no timed measure)."""
    # lazy: TensorFlow, NVML, the CUDA runtime load only in the modes that use them
    from dltestbed.workload import screen
    from dltestbed.workload.sampler import Sampler, watched

    devices = [d for d, _ in screen.devices(where)]
    resolved = spec.model_dump() | {"devices": devices, "device_used": "gpu" if where.gpu_names else "cpu"}
    emitter.emit(StartEvent(spec=resolved, fingerprint=fp, t=time.time()))
    sampler = Sampler(emitter.emit, spec.sample_interval, nvml)
    with watched(nvml, emitter.emit, sampler), sampler.running():
        for ev in screen.run(where, spec.probes, seconds, spec.seed, check_event):
            emitter.emit(ev)
    emitter.emit(ProbesDoneEvent(measures=0, skips=0))
