"""What every scenario shares: its options, the words for an interrupted run, and probes of the
machine under a target (a free port, its CPUs, whether it has a GPU)."""

from __future__ import annotations

from dataclasses import dataclass

from dltestbed.errors import TargetError
from dltestbed.targets.base import Target, machine_under


@dataclass(frozen=True)
class Options:
    """What a scenario needs beyond the plan (each documented in `dltestbed bench --help`)."""

    scenario: str = "single"
    workers: int | None = None  # distributed: workers per job (default: one per host; this machine: 2)
    baseline: bool = True  # distributed: one worker alone per job, for scaling efficiency
    # distributed: these jobs, each over its hosts (inventory names), those that share no host at once (within
    # hosts_at_once), instead of one job over every host; acceptance's pairs of nodes
    jobs: tuple[tuple[str, ...], ...] = ()
    cotenant: str = "alexnet"
    cotenant_batch: int | None = None  # default: 512 with a GPU, else 64
    isolate: bool = False  # shared: foreground and co-tenant pinned to disjoint CPUs
    parallel: bool = True
    hosts_at_once: int | None = None  # with `parallel`: at most this many hosts measured at once (None: all)
    # --gpus per-gpu: a host's GPUs one after another (what they share, a PCIe switch's uplink or the host's
    # memory, measured by one at a time), not at once; hosts still as `parallel` says
    gpus_in_turn: bool = False
    timeout: float | None = None


def probe(target: Target, code: str, *, inside: bool = False) -> str:
    """The first stdout line of a Python snippet run on the machine under a target (a container shares
    its host's network and GPUs), or `inside` the target itself (what a container's own limits allow)."""
    machine = target if inside else machine_under(target)
    lines: list[str] = []
    res = machine.run([machine.python, "-c", code], timeout=60, on_line=lines.append)
    if not res.ok or not lines:
        raise TargetError(f"{machine.host}: probe failed ({res.describe()}): {' '.join(res.stderr_tail[-1:])}")
    return lines[0].strip()


FREE_PORT = "import socket; s = socket.socket(); s.bind(('', 0)); print(s.getsockname()[1])"
CPUS = "import os; print(','.join(map(str, sorted(os.sched_getaffinity(0)))))"
HAS_GPU = (
    "import shutil, subprocess; print(int(bool(shutil.which('nvidia-smi')) and "
    "subprocess.run(['nvidia-smi', '-L'], capture_output=True).returncode == 0))"
)
