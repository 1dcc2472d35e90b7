"""What acceptance reads from the runs its stages stored: each node's facts for the drift check, its measures
for the peer comparison, what explains a slow one, and each GPU's evidence for its verdict. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from statistics import mean, median
from typing import Any

from dltestbed.report import health
from dltestbed.report.gpu_evidence import GpuEvidence
from dltestbed.results.records import RunRecord
from dltestbed.workload.events import HealthEvent, MeasureEvent, ResourceEvent
from dltestbed.workload.frameworks import REGISTRY
from dltestbed.workload.probes.base import GEMM_N

RESNET50 = "resnet50_gpu_preset_ips"  # the one model figure a GPU is judged on (gpus.gpu_preset)
# TensorFlow's distributions, either of which is "TensorFlow" to the drift check
# each framework's distributions, by the fact their version is compared under (TensorFlow's two as one)
PACKAGE_FACTS = {dist: fw.package_fact for fw in REGISTRY.values() for dist in fw.distributions}


def _joined(values: Iterable[Any]) -> str:
    """One fact of a node's GPUs: their value, or each distinct one in order when they differ."""
    seen = sorted({str(v) for v in values if v is not None})
    return ", ".join(seen)


def node_facts(fp: Mapping[str, Any]) -> dict[str, str]:
    """The drift check's facts (report/drift.FACTS, and NumPy's version) from a run's fingerprint: its GPUs'
    driver, CUDA, VBIOS, PCIe link at its maximum, ECC and MIG mode and power limit (where it has GPUs, and
    how many), the kernel, and the versions of dltestbed and the frameworks as their package metadata says."""
    out: dict[str, str] = {}
    gpus = [g for g in fp.get("gpus") or [] if isinstance(g, Mapping)]
    if gpus:
        out["gpu_count"] = str(len(gpus))
        out["driver"] = _joined(g.get("driver") for g in gpus)
        out["cuda"] = _joined(g.get("cuda_driver") for g in gpus)
        out["vbios"] = _joined(g.get("vbios") for g in gpus)
        out["pcie_max"] = _joined(
            f"Gen{g['pcie_gen_max']} x{g['pcie_width_max']}"
            for g in gpus
            if g.get("pcie_gen_max") is not None and g.get("pcie_width_max") is not None
        )
        out["ecc_mode"] = _joined(g.get("ecc") for g in gpus)
        out["mig_mode"] = _joined(g.get("mig") for g in gpus)
        out["power_limit_w"] = _joined(
            f"{g['power_limit_watts']:g} W" for g in gpus if g.get("power_limit_watts") is not None
        )
    if fp.get("kernel"):
        out["kernel"] = str(fp["kernel"])
    out |= host_facts(fp)
    packages = fp.get("packages") or {}
    for dist, version in packages.items():
        key = PACKAGE_FACTS.get(dist, dist)
        out[key] = str(version)
    return {k: v for k, v in out.items() if v}


HOST_FACTS = ("cpu_model", "cpus_online", "cpus_usable", "smt", "numa_nodes", "hugepages", "cpu_governor")


def host_facts(fp: Mapping[str, Any]) -> dict[str, str]:
    """The host's facts the drift check compares (workload/hostfacts.py's, the CPU model, and the memory in whole
    GiB: a node with half its DIMMs, SMT off or cores disabled in firmware drifts from its fleet)."""
    out = {k: str(fp[k]) for k in HOST_FACTS if fp.get(k) is not None}
    if fp.get("memory_bytes"):
        out["memory_gib"] = f"{round(int(fp['memory_bytes']) / 2**30)} GiB"
    return out


def cpu_share(samples: Sequence[ResourceEvent], cpus: int | None) -> float | None:
    """The share of its CPUs the workload process had while it ran: its mean CPU % over 100 × the CPUs it
    may run on (None: no sample, or unknown CPUs). Where something else on the node competes for them, it
    falls well below 1."""
    values = [s.cpu_percent for s in samples[1:]]  # psutil's first reading of a process is 0 by definition
    if not values or not cpus:
        return None
    return mean(values) / (100.0 * cpus)


def slow_cause(run: RunRecord, samples: Sequence[ResourceEvent], peers_share: float | None) -> str:
    """What explains a slow node, in words: its GPUs' samples (throttle reasons, clocks) where it has busy
    GPUs, else the share of its CPUs its workload had, against its peers'."""
    said = health.cause(samples)
    if said is not None:
        return said
    share = cpu_share(samples, run.fingerprint.get("cpu_affinity"))
    if share is None:
        return "no sample says why"
    cpus = run.fingerprint.get("cpu_affinity")
    peers = f", its peers' {peers_share * 100:.0f} %" if peers_share is not None else ""
    if peers_share is not None and share < 0.8 * peers_share:
        return (
            f"its workload had {share * 100:.0f} % of its {cpus} CPU(s){peers}: something else on the node "
            "competes for them"
        )
    return f"its workload had {share * 100:.0f} % of its {cpus} CPU(s){peers}"


def run_measures(run: RunRecord, measures: Sequence[MeasureEvent]) -> dict[str, float]:
    """A run's results by name: a model run's images/sec (`alexnet img/s`), a micro run's median of each
    case's timed measures (`gemm float32 n=256`). A launch case is a time: its rate (launches/s) is kept, so
    that for every measure more is better."""
    if not run.is_probe:
        return {f"{run.model} img/s": run.images_per_sec} if run.images_per_sec else {}
    by: dict[str, list[float]] = {}
    for m in measures:
        if m.phase == "timed" and m.value > 0:
            by.setdefault(f"{m.probe} {m.case}", []).append(rate(m))
    return {k: median(v) for k, v in by.items()}


def rate(m: MeasureEvent) -> float:
    """A measure as a rate, more is better: a latency's seconds as its inverse (launches a second)."""
    return 1.0 / m.value if m.unit == "s" else m.value


def revisions(run: RunRecord) -> dict[str, tuple[str, int]]:
    """The framework and the revision of what measured each of a run's figures, by run_measures' names: a micro
    run's cases (as its start event listed them), a model run's model. A run stored before revisions were
    recorded measured with revision 1."""
    if not run.is_probe:
        return {f"{run.model} img/s": (run.framework, int(run.spec.get("revision", 1)))}
    return {
        f"{c.get('probe')} {c.get('case')}": (run.framework, int(c.get("revision", 1)))
        for c in run.spec.get("cases", ())
        if isinstance(c, Mapping)
    }


def case_conditions(measures: Sequence[MeasureEvent], samples: Sequence[ResourceEvent], gpu: int) -> dict[str, str]:
    """Each probe case's GPU while its calls ran (health.during: the mean SM clock and power, the share at the power
    cap), by run_measures' names: a power-capped GPU is seen beside its figure."""
    return {f"{probe} {case}": v for (probe, case), v in health.case_conditions(measures, samples, gpu).items()}


def measure_of(case: str) -> str | None:
    """The name gpu_verdicts judges a probe case's figure by (run_measures' `probe case` names), or None: GEMM
    per math at the size the boards' fractions were measured at (like with like), the pinned copies (from each
    NUMA node where there are several: the best is the link's), and the device copy."""
    probe, _, rest = case.partition(" ")
    if probe == "gemm":
        math, _, n = rest.partition(" n=")
        return f"gemm_{math}" if n == str(GEMM_N["full"][-1]) else None
    if probe in ("h2d", "d2h") and rest.startswith("pinned "):
        return f"{probe}_pinned"
    if probe == "d2d":
        return "memory_copy"
    if probe == "launch" and rest == "empty kernel, launches in a row":  # run_measures keeps its rate
        return "kernel_launches_per_s"
    return None


def gpu_evidence(
    node: str,
    index: int,
    device: Mapping[str, Any],
    checks: Sequence[HealthEvent],
    samples: Sequence[ResourceEvent],
    measures: Mapping[str, float],
    measured_by: Mapping[str, tuple[str, int]],
    conditions: Mapping[str, str] | None = None,
) -> GpuEvidence:
    """One GPU's evidence from its runs: `device` its NVML facts (a fingerprint's `gpus` entry), `checks` the
    health counters before and after its runs (XIDs seen meanwhile), `samples` its runs' samples (the link
    under load), `measures` its runs' figures (run_measures' names; its gpu-preset ResNet-50 as
    `resnet50_gpu_preset_ips`), `measured_by` the framework and revision of each (revisions'), `conditions` the GPU
    while each was measured (case_conditions')."""
    after = [g for ev in checks if ev.phase == "after" for g in ev.gpus if int(g.get("index", -1)) == index]
    facts: dict[str, float] = {}
    if after:
        last = after[-1]
        if last.get("ecc_uncorrected") is not None:
            facts["ecc_uncorrected"] = float(last["ecc_uncorrected"])
    busy = health.busy(samples, index)  # an idle link trains down: only a busy GPU's link says anything
    at = health.link(busy, {}) if busy else None
    if at is not None:
        facts["pcie_gen"], facts["pcie_width"] = float(at[0]), float(at[1])
    if device.get("power_limit_watts") is not None:
        facts["power_limit_w"] = float(device["power_limit_watts"])
    if device.get("memory_total_bytes") is not None:
        facts["memory_total_bytes"] = float(device["memory_total_bytes"])
    xids = tuple(int(x["xid"]) for ev in checks for x in ev.xids if int(x.get("index", -1)) == index)
    out: dict[str, float] = {}
    by: dict[str, tuple[str, int]] = {}
    said: dict[str, str] = {}
    for case, value in measures.items():
        name = RESNET50 if case == RESNET50 else measure_of(case)
        if name is not None and value > out.get(name, 0.0):
            out[name] = value
            if case in measured_by:
                by[name] = measured_by[case]
            else:
                by.pop(name, None)
            said[name] = (conditions or {}).get(case, "")
    name = str(device.get("name", "GPU"))
    return GpuEvidence(node, index, name, facts, xids, out, by, bool(after), {k: v for k, v in said.items() if v})
