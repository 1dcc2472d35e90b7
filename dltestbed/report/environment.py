"""What a run's environment was (TensorFlow build, CUDA, GPUs, effective device, kernel, images) and how
two sets of runs differ in it. Pure."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dltestbed.results.records import RunRecord
from dltestbed.workload.frameworks import REGISTRY, gathered

ENV_FIELDS = (
    *gathered(lambda fw: fw.build_facts),
    "cuda_runtime",
    "cudnn",
    "cublas",
    "gpu_driver",
    "gpu_model",
    "gpu_vbios",
    "gpu_pcie",
    "gpu_power_limit",
    "gpu_ecc",
    "gpu_mig",
    "gpu_clocks",
    "gpu_numa_node",
    "effective_device",
    "effective_math",
    "replicas",  # a distributed job's replicas in sync (a device each) and how they all-reduce
    "collective",
    "kernel",
    "os",
    "cpu_model",
    "python",
    "container_image_digest",
    "container_limits",
    "k8s_network",  # a pod's on a Kubernetes node: the node's (host) or the pod network (pod: an overlay)
    "k8s_qos",  # a pod's QoS class (Guaranteed: its share of the node's CPU and memory as requests and limits)
    "vm_image",
    "dataset_digest",
)
# What each GPU fact of the environment shows of a GPU's NVML facts (workload/gpu.py), one value per GPU.
GPU_FIELDS = {
    "gpu_vbios": lambda g: g.get("vbios"),
    "gpu_pcie": lambda g: (
        g.get("pcie_gen")
        and f"Gen{g['pcie_gen']} x{g.get('pcie_width')} (max Gen{g.get('pcie_gen_max')} x{g.get('pcie_width_max')})"
    ),
    "gpu_power_limit": lambda g: g.get("power_limit_watts") and f"{g['power_limit_watts']:g} W",
    "gpu_ecc": lambda g: g.get("ecc"),
    "gpu_mig": lambda g: g.get("mig"),
    "gpu_clocks": lambda g: (
        g.get("sm_clock_app_mhz")
        and f"SM {g['sm_clock_app_mhz']} / memory "
        f"{g.get('mem_clock_app_mhz')} MHz (max {g.get('sm_clock_max_mhz')} / "
        f"{g.get('mem_clock_max_mhz')})"
    ),
    "gpu_numa_node": lambda g: (
        "pci_bus_id" in g and "uuid" in g and (str(g["numa_node"]) if g.get("numa_node") is not None else "unknown")
    ),
}


def environment(run: RunRecord) -> dict[str, str]:
    """The facts of a run's environment that can change a result (fingerprint, GPUs, effective device)."""
    fp = run.fingerprint
    gpus = fp.get("gpus") or []
    out = {k: str(fp[k]) for k in ENV_FIELDS if fp.get(k) not in (None, "")}
    if gpus:
        out["gpu_model"] = ", ".join(sorted({str(g.get("name", "?")) for g in gpus}))
        out["gpu_driver"] = ", ".join(sorted({str(g.get("driver", "?")) for g in gpus}))
        for field, show in GPU_FIELDS.items():
            values = sorted({str(v) for g in gpus if (v := show(g))})
            if values:
                out[field] = ", ".join(values)
    if _ran(run):
        out["effective_device"] = effective_device(run)
        if not run.is_probe:
            out["effective_math"] = effective_math(run)
    return out


def effective_device(run: RunRecord) -> str:
    """Where the run's steps ran, as the run recorded it (its workload's start event, then the device of its
    first step's result); "unknown" for a run that ended before it said."""
    return run.used_device or "unknown"


def math_words(math: str, xla: bool) -> str:
    """A math mode in words, XLA said beside it: "mixed_bfloat16 + XLA"."""
    return math + (" + XLA" if xla else "")


def effective_math(run: RunRecord) -> str:
    """The math a run's steps used (`mixed` resolved to bfloat16 or float16 on the target, as its workload said),
    XLA said beside it."""
    return math_words(run.math, run.xla)


def _values(runs: Sequence[RunRecord]) -> dict[str, list[str]]:
    """Per environment fact, the sorted values the runs show ("—" for a run without it); each run read once."""
    envs = [environment(r) for r in runs]
    return {field: sorted({e.get(field, "—") for e in envs}) for field in ENV_FIELDS}


def shared_environment(runs: Sequence[RunRecord]) -> dict[str, str]:
    """The environment of a set of runs: each fact's value, or its values joined with "; " when the runs differ."""
    return {field: "; ".join(values) for field, values in _values(runs).items() if values and values != ["—"]}


def env_diff(a: Sequence[RunRecord], b: Sequence[RunRecord], a_name: str = "A", b_name: str = "B") -> list[str]:
    """One line per environment fact whose values differ between two sets of runs."""
    lines = []
    values_a, values_b = _values(a), _values(b)
    for field in ENV_FIELDS:
        va, vb = values_a[field], values_b[field]
        if va != vb:
            lines.append(f"{field}: {', '.join(va)} ({a_name}) / {', '.join(vb)} ({b_name})")
    return lines


def _sides(
    a: Sequence[RunRecord], b: Sequence[RunRecord], what: Callable[[RunRecord], str]
) -> tuple[list[str], list[str]] | None:
    """What each set of runs (those whose workload reported its framework) shows of `what`, when both show
    something and it differs; None otherwise."""
    va = sorted({what(r) for r in a if _ran(r)})
    vb = sorted({what(r) for r in b if _ran(r)})
    return (va, vb) if va and vb and va != vb else None


def _ran(run: RunRecord) -> bool:
    """Whether a run's workload reported its framework (one that failed before loading it did not, nor did a
    run of a framework this dltestbed does not know)."""
    known = REGISTRY.get(run.framework)
    return known is not None and known().ran(run.fingerprint)


def framework_build(run: RunRecord) -> str:
    """The framework a run used, in words: its name, version and build ("TensorFlow 2.20.0 (CPU build)")."""
    known = REGISTRY.get(run.framework)
    return known().build(run.fingerprint) if known is not None else run.framework


def dataset_of(run: RunRecord) -> str:
    """The dataset a run read, in words: synthetic, or real with its digest's first 12 digits."""
    digest = run.fingerprint.get("dataset_digest")
    if run.data != "real":
        return "synthetic data"
    return f"dataset {str(digest)[:12]}" if digest else "a dataset without a digest"


@dataclass(frozen=True)
class Unlike:
    """A fact two sets of runs must share to be compared: what a run shows of it, and how a refusal says it
    ("refused: bm ran on gpu, cbm on cpu; no overhead across devices")."""

    what: Callable[[RunRecord], str]
    verb: str  # said of the first side only: "ran"
    prep: str  # said of both sides: "on"
    sep: str  # between a side's values
    across: str  # "devices"


DEVICE_AND_MATH = (
    Unlike(effective_device, "ran", "on", "/", "devices"),
    Unlike(effective_math, "computed", "in", "/", "math modes"),
)
LIKE_FOR_LIKE = (
    *DEVICE_AND_MATH,
    Unlike(framework_build, "ran", "", " / ", "framework builds"),
    Unlike(dataset_of, "read", "", " / ", "datasets"),
)


def unlike(
    a: Sequence[RunRecord], b: Sequence[RunRecord], a_name: str, b_name: str, facts: Sequence[Unlike] = LIKE_FOR_LIKE
) -> str | None:
    """Why a layer's runs cannot be compared with its baseline's, from the first of `facts` they differ in:
    by default another effective device or math, another framework build (version or CUDA/CPU), or other
    data (another dataset digest); None when they are like for like."""
    for fact in facts:
        sides = _sides(a, b, fact.what)
        if sides is not None:
            prep = f" {fact.prep}" if fact.prep else ""
            return (
                f"refused: {a_name} {fact.verb}{prep} {fact.sep.join(sides[0])}, {b_name}{prep} "
                f"{fact.sep.join(sides[1])}; no overhead across {fact.across}"
            )
    return None
