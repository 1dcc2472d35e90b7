"""--gpus per-gpu: a process on each GPU of a machine, all at once. Each run is given its GPU by UUID (the only
one it sees, `--gpu`) and the CPUs of that GPU's NUMA node, so that every GPU of a node is measured,
health-checked and named, and the report compares GPUs within and across nodes. The GPUs are read on the
machine before any run: NVIDIA's driver lists them (index, UUID, PCI bus id); the kernel says each one's CPUs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dltestbed.choices import PER_GPU
from dltestbed.config import GPU_UUID, Spec, format_cpu_list, parse_cpu_list
from dltestbed.errors import ConfigError
from dltestbed.results.records import gpu_label

if TYPE_CHECKING:
    from dltestbed.orchestrate.planning import Plan

# Run on the machine under a target (scenarios.common.probe): one JSON line, a list of [NVML index, UUID, PCI
# bus id, MIG mode, CPUs of its NUMA node or ""], or {"error": ...} where the driver does not answer.
SLOTS = r"""
import json, pathlib, subprocess
q = ["nvidia-smi", "--query-gpu=index,uuid,pci.bus_id,mig.mode.current", "--format=csv,noheader"]
try:
    p = subprocess.run(q, capture_output=True, text=True, timeout=60)
except (OSError, subprocess.TimeoutExpired) as e:
    print(json.dumps({"error": str(e)})); raise SystemExit
if p.returncode:
    said = (p.stdout + p.stderr).strip().splitlines()
    print(json.dumps({"error": said[0] if said else f"rc {p.returncode}"})); raise SystemExit
out = []
for line in p.stdout.splitlines():
    f = [x.strip() for x in line.split(",")]
    if len(f) != 4:
        continue
    cpus = pathlib.Path("/sys/bus/pci/devices", f[2][-12:].lower(), "local_cpulist")
    out.append([*f, cpus.read_text().strip() if cpus.exists() else ""])
print(json.dumps(out))
""".strip()


@dataclass(frozen=True)
class GpuSlot:
    """One GPU of a machine, as its runs are given it."""

    index: int  # NVML's (nvidia-smi's) index: how the report names it beside the host
    uuid: str
    pci_bus_id: str
    cpus: str | None  # its NUMA node's CPUs (cpuset list); None where the kernel does not say

    @property
    def label(self) -> str:
        """`gpu3`: the GPU's name in a run's unit (`host/gpu3`)."""
        return gpu_label(self.index)

    def bind(self, spec: Spec, pin: bool = True) -> Spec:
        """The spec of this GPU's run: its UUID and index, `--device gpu` (a GPU CUDA cannot see fails the run, it
        never falls back to the CPU), and its NUMA node's CPUs where `pin` and the spec pins none itself."""
        update: dict[str, object] = {"gpu": self.uuid, "gpu_index": self.index, "device": "gpu"}
        update["cpus"] = spec.cpus or (self.cpus if pin else None)
        return spec.model_copy(update=update)


def parse_slots(line: str, where: str) -> list[GpuSlot]:
    """The GPUs of a machine from SLOTS' line, in NVML's order; a ConfigError where there are none (fail closed:
    per-gpu runs on GPUs, and a driver that does not answer is no GPU)."""
    try:
        doc = json.loads(line)
    except ValueError:
        raise ConfigError(f"--gpus {PER_GPU}: the GPUs of {where} could not be read: {line[:200]!r}") from None
    if isinstance(doc, dict):
        why = doc.get("error")
        raise ConfigError(f"--gpus {PER_GPU}: no GPU on {where} (nvidia-smi: {why})")
    slots = []
    for row in doc:
        index, uuid, bus, mig, cpus = (str(x) for x in row)
        if not index.isdigit() or not GPU_UUID.fullmatch(uuid):
            continue
        if mig == "Enabled":  # its slices are other devices, with UUIDs of their own, that NVML opens otherwise
            raise ConfigError(f"--gpus {PER_GPU}: GPU {index} of {where} is in MIG mode: not in this version")
        try:
            parse_cpu_list(cpus)
        except ValueError:
            cpus = ""
        slots.append(GpuSlot(int(index), uuid, bus, cpus or None))
    if not slots:
        raise ConfigError(f"--gpus {PER_GPU}: no GPU on {where} (nvidia-smi lists none)")
    return slots


def usable(cpus: str, allowed: Sequence[int]) -> str:
    """The CPUs of a cpuset list that a run may use (`allowed`: the machine's affinity, a Slurm job's or a
    cgroup's), as a cpuset list; "" where none."""
    return format_cpu_list([c for c in parse_cpu_list(cpus) if c in set(allowed)])


def wanted(plan: Plan) -> bool:
    """Whether a plan runs a process per GPU."""
    return plan.gpus == PER_GPU
