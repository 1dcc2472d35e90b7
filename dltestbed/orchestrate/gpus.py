"""Whether a bench's targets have the GPU its options need, judged before any run: `--device gpu`, `--math tf32`,
`--gpu-memory-mib` and `--cotenant gpu` on a target known to have none is one line, not a failed run per
repetition. What each target has is read where the launcher sees it: this machine's nvidia-smi (and whether
its TensorFlow is the CUDA build), a host's the same way over SSH, a VM's by construction (GPUs passed
through or none). Fail closed: a driver that fails, or no driver, is no GPU; only what cannot be known before
running (a Slurm node not allocated yet, a host whose GPUs could not be read) is said, not refused."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from dltestbed.choices import NODE, PER_GPU
from dltestbed.config import DEFAULT_FRAMEWORK, WorkloadSpec
from dltestbed.errors import ConfigError
from dltestbed.orchestrate.planning import Plan
from dltestbed.orchestrate.scenarios import Options, scenario
from dltestbed.provision import facts, localfacts
from dltestbed.workload.frameworks import REGISTRY


@dataclass(frozen=True)
class Need:
    """An option that needs a GPU on every target: as the user wrote it, and what to do instead."""

    option: str
    instead: str


@dataclass(frozen=True)
class Seen:
    """What a bench knows of a target's GPUs before it runs: its label (`bm:local`), whether it has one
    (None: not known before it runs) and how that is known, in words."""

    target: str
    has: bool | None
    how: str
    memory_mib: int | None = None  # the smallest of its GPUs' memory, where the driver said it


# About what a TensorFlow process holds on a GPU outside its memory pool: the CUDA context and the cuDNN
# and cuBLAS handles (an estimate for CUDA 12 on an H100; it grows with the libraries loaded).
CUDA_CONTEXT_MIB = 600


def needs(plan: Plan, options: Options) -> list[Need]:
    """The bench's options that need a GPU on every target, in the order they are judged."""
    out = []
    if any(s.device == "gpu" for s in plan.specs):
        out.append(Need("--device gpu", "use --device auto or cpu"))
    if any(isinstance(s, WorkloadSpec) and s.math == "tf32" for s in plan.specs):
        out.append(Need("--math tf32", "TF32 is the tensor-core math of an Ampere-or-later GPU; use --math float32"))
    sized = next((s.gpu_memory_mib for s in plan.specs if s.gpu_memory_mib is not None), None)
    if sized is not None:
        out.append(Need(f"--gpu-memory-mib {sized}", "it sizes GPU memory: leave it out there"))
    for how, what in ((NODE, "one job of a machine's GPUs"), (PER_GPU, "a process on each GPU of a machine")):
        if plan.gpus == how:
            out.append(Need(f"--gpus {how}", f"it is {what}: leave it out there"))
    out += [Need(option, instead) for option, instead in scenario(options.scenario).gpu_needs(options)]
    return out


def check(need: Sequence[Need], seen: Sequence[Seen]) -> list[str]:
    """A ConfigError line for the first option that needs a GPU on a target known to have none; else the
    lines that say which targets' GPUs are known only once they run (none: every target has one)."""
    if not need:
        return []
    for n in need:
        for s in seen:
            if s.has is False:
                raise ConfigError(f"{n.option}: no GPU on {s.target} ({s.how}); {n.instead}")
    options = " and ".join(n.option for n in need)
    return [
        f"note: {options}: whether {s.target} has a GPU is known only once it runs ({s.how}); a run without one fails"
        for s in seen
        if s.has is None
    ]


def fit(plan: Plan, options: Options, seen: Sequence[Seen]) -> None:
    """With --scenario shared and --gpu-memory-mib, the co-tenant gets a pool of the same size on the same GPU
    (except the cpu co-tenant): both pools and both CUDA contexts must fit the smallest GPU of every target
    whose memory is known; else one line before any run, not an out-of-memory failure per repetition."""
    sized = next((s.gpu_memory_mib for s in plan.specs if s.gpu_memory_mib is not None), None)
    if sized is None or scenario(options.scenario).gpu_pools(options) < 2:
        return
    need = 2 * (sized + CUDA_CONTEXT_MIB)
    for s in seen:
        if s.memory_mib is not None and s.memory_mib < need:
            most = s.memory_mib // 2 - CUDA_CONTEXT_MIB
            raise ConfigError(
                f"--gpu-memory-mib {sized} with --scenario shared: the foreground's and the co-tenant's pools and "
                f"their CUDA contexts need about 2 x ({sized} + {CUDA_CONTEXT_MIB}) = {need} MiB, and the GPU of "
                f"{s.target} has {s.memory_mib} MiB; give each at most {most}, or --cotenant cpu"
            )


def _memory_mib(text: str) -> int | None:
    """nvidia-smi's memory.total ("81559 MiB") in MiB; None where it is not a number."""
    number = text.split()[0] if text.split() else ""
    return int(number) if number.isdigit() else None


def from_probe(target: str, found: dict[str, Any], where: str) -> Seen:
    """A target's GPUs from the facts role's GPU facts (this machine's, or a host's read over SSH): NVIDIA's
    driver listing GPUs is a GPU; no driver, a failing one or an empty list is none."""
    listed = facts.parse_nvidia_smi([str(x) for x in found.get("nvidia_smi") or []])
    rc = int(found.get("nvidia_smi_rc", 127))
    if rc == 0 and listed:
        sizes = [m for g in listed if (m := _memory_mib(g.memory)) is not None]
        return Seen(target, True, f"nvidia-smi lists {len(listed)} on {where}", min(sizes) if sizes else None)
    if rc == 0:
        return Seen(target, False, f"nvidia-smi lists none on {where}")
    if rc in (2, 127):
        return Seen(target, False, f"no nvidia-smi on {where}: no NVIDIA driver")
    said = [*str(found.get("nvidia_smi_error") or "").splitlines(), *map(str, found.get("nvidia_smi") or [])]
    why = next((x.strip() for x in said if x.strip()), f"rc {rc}")  # "No devices were found" is on stdout
    return Seen(target, False, f"nvidia-smi fails on {where}: {why}")


class Local:
    """This machine's GPUs, read once a bench (nvidia-smi may take a second): what its driver lists, and
    whether the frameworks the bench runs are builds that would use them."""

    def __init__(self, frameworks: Sequence[str] = (DEFAULT_FRAMEWORK,)) -> None:
        self.frameworks = tuple(frameworks)

    @cached_property
    def facts(self) -> dict[str, Any]:
        """nvidia-smi's answer, as the facts role reports it."""
        return localfacts.gpu_facts()

    def _without_cuda(self) -> str | None:
        """Why a framework of the bench would use no GPU here: "tensorflow-cpu, not TensorFlow's CUDA build";
        None: each is a CUDA build."""
        for fw in (REGISTRY[n] for n in self.frameworks if n in REGISTRY):  # an unknown one: the plan says so
            found = fw.installed()
            if found is None or not found[1]:
                return f"{found[0] if found else f'no {fw.label}'}, not {fw.label}'s CUDA build"
        return None

    def used_gpus(self) -> list[str]:
        """The GPUs this machine's frameworks would use: what NVIDIA's driver lists, where each is a CUDA build
        (not tensorflow-cpu, not torch's +cpu); [] otherwise. Reads nvidia-smi and package metadata, not the
        frameworks (seconds to import)."""
        if self._without_cuda() is not None or self.facts["nvidia_smi_rc"] != 0:
            return []
        return [g.name for g in facts.parse_nvidia_smi(self.facts["nvidia_smi"])]

    def seen(self, kind: str) -> Seen:
        """bm (this machine's frameworks) or cbm (a container of this machine's flavour, given its GPUs)."""
        target = f"{kind}:local"
        driver = from_probe(target, self.facts, "this machine")
        if kind == "cbm" or not driver.has:
            return driver
        without = self._without_cuda()
        if without is not None:
            return Seen(target, False, f"{driver.how}, but this venv has {without}")
        return driver


def of_vm(target: str, settings: Any, in_container: bool) -> Seen:
    """A VM's GPUs by construction: those passed through (--vm-gpus, dltestbed_vm_gpus), or none; cvm's
    container runs in dltestbed's guest image, which has no GPU in this version."""
    if in_container:
        return Seen(target, False, "cvm runs in dltestbed's guest image, which has no GPU in this version")
    if settings.passthrough:
        return Seen(target, True, f"GPUs passed through: {settings.gpus}")
    return Seen(target, False, "its VM has no GPU passed through: --vm-gpus or dltestbed_vm_gpus gives it one")
