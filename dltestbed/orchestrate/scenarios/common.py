"""What every scenario shares: its options, the words for an interrupted run, and probes of the
machine under a target (a free port, its CPUs, whether it has a GPU)."""

from __future__ import annotations

from dltestbed.errors import TargetError
from dltestbed.targets.base import Target, machine_under


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
