"""What a run's environment was (TensorFlow build, CUDA, GPUs, effective device, kernel, images) and how
two sets of runs differ in it. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from dltestbed.results.records import RunRecord

ENV_FIELDS = ("tensorflow", "tensorflow_cuda_build", "tensorflow_cuda", "tensorflow_cudnn", "gpu_driver",
              "gpu_model", "effective_device", "kernel", "os", "cpu_model", "python", "container_image_digest",
              "container_limits", "vm_image")  # fmt: skip


def environment(run: RunRecord) -> dict[str, str]:
    """The facts of a run's environment that can change a result (fingerprint, GPUs, effective device)."""
    fp = run.fingerprint
    gpus = fp.get("gpus") or []
    out = {k: str(fp[k]) for k in ENV_FIELDS if fp.get(k) not in (None, "")}
    if gpus:
        out["gpu_model"] = ", ".join(sorted({str(g.get("name", "?")) for g in gpus}))
        out["gpu_driver"] = ", ".join(sorted({str(g.get("driver", "?")) for g in gpus}))
    if "tensorflow" in fp:
        out["effective_device"] = effective_device(run)
    return out


def effective_device(run: RunRecord) -> str:
    """Where TensorFlow ran the steps: gpu when it saw a GPU and the run did not hide them, else cpu."""
    seen = int(run.fingerprint.get("gpus_visible_to_tf") or 0)
    return "gpu" if seen > 0 and run.device != "cpu" else "cpu"


def shared_environment(runs: Sequence[RunRecord]) -> dict[str, str]:
    """The environment of a set of runs: each fact's value, or its values joined with "; " when the runs differ."""
    out: dict[str, str] = {}
    for field in ENV_FIELDS:
        values = sorted({environment(r).get(field, "—") for r in runs})
        if values and values != ["—"]:
            out[field] = "; ".join(values)
    return out


def env_diff(a: Sequence[RunRecord], b: Sequence[RunRecord], a_name: str = "A", b_name: str = "B") -> list[str]:
    """One line per environment fact whose values differ between two sets of runs."""
    lines = []
    for field in ENV_FIELDS:
        va = sorted({environment(r).get(field, "—") for r in a})
        vb = sorted({environment(r).get(field, "—") for r in b})
        if va != vb:
            lines.append(f"{field}: {', '.join(va)} ({a_name}) / {', '.join(vb)} ({b_name})")
    return lines


def device_mismatch(a: Sequence[RunRecord], b: Sequence[RunRecord], a_name: str, b_name: str) -> str | None:
    """Why two sets of runs cannot be compared: they ran on different effective devices; None when they can."""
    da = sorted({effective_device(r) for r in a if "tensorflow" in r.fingerprint})
    db = sorted({effective_device(r) for r in b if "tensorflow" in r.fingerprint})
    if da and db and da != db:
        return f"refused: {a_name} ran on {'/'.join(da)}, {b_name} on {'/'.join(db)}; no overhead across devices"
    return None


def tf_build(run: RunRecord) -> str:
    """The TensorFlow a run used, in words: its version and whether it is the CUDA build."""
    fp = run.fingerprint
    return f"TensorFlow {fp.get('tensorflow')} ({'CUDA' if fp.get('tensorflow_cuda_build') else 'CPU'} build)"


def unlike(a: Sequence[RunRecord], b: Sequence[RunRecord], a_name: str, b_name: str) -> str | None:
    """Why a layer's runs cannot be compared with its baseline's: another effective device, or another
    TensorFlow build (version or CUDA/CPU); None when they are like for like."""
    refused = device_mismatch(a, b, a_name, b_name)
    if refused is not None:
        return refused
    ba = sorted({tf_build(r) for r in a if "tensorflow" in r.fingerprint})
    bb = sorted({tf_build(r) for r in b if "tensorflow" in r.fingerprint})
    if ba and bb and ba != bb:
        return (f"refused: {a_name} ran {' / '.join(ba)}, {b_name} {' / '.join(bb)}; no overhead across "
                "TensorFlow builds")  # fmt: skip
    return None
