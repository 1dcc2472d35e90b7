"""A lab host's own share of this machine's cores (`lab up --capacity`), as a rack's node has its own: each host
a CPU cgroup with a hard quota in proportion to its CPUs (this machine's cores shared out over the lab's CPUs),
that everything the host runs starts in. A host's speed then does not depend on what the others run, a load on
one host slows that host alone, and a host with half the CPUs has half the capacity, whatever else runs. Without
it the hosts' processes compete one thread against another on the shared cores.

The quota sits on the host's cgroup and its processes one level below (`node`), so a process reading its own
cgroup sees no quota (as a node sees its cores, not a limit): acceptance's host facts read the CPUs it was given.
cgroup v1's cpu controller (`cpu.cfs_quota_us`) or v2's (`cpu.max`), whichever this machine mounts; a machine
with neither is one LabError line."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from dltestbed.lab.net import LabError

V1 = Path("/sys/fs/cgroup/cpu")
V2 = Path("/sys/fs/cgroup")
BASE = "dltestbed-lab"
# the quota's period, 10 ms, measured here with four 2-CPU hosts and one 1-CPU host at once: the hosts' GEMM and
# memory probes within 0.78-0.96 of each other and AlexNet within 1 % (the 1-CPU host at 0.52); at 100 ms a probe
# call is stalled for tens of ms and the next not (0.23-0.79), at 1 ms the kernel's 4 ms tick overruns the quota
# (the 1-CPU host at 0.84)
PERIOD_US = 10_000
LEAF = "node"  # where the host's processes are: below the quota, which they do not see as theirs


@dataclass(frozen=True)
class Hierarchy:
    """Where the CPU controller is mounted, and which version."""

    root: Path
    v2: bool


def hierarchy() -> Hierarchy:
    """This machine's CPU controller, or a LabError."""
    if (V1 / "cpu.cfs_quota_us").exists():
        return Hierarchy(V1, False)
    controllers = V2 / "cgroup.controllers"
    if controllers.exists() and "cpu" in controllers.read_text().split():
        return Hierarchy(V2, True)
    raise LabError("--capacity: this machine mounts no cgroup CPU controller (v1 cpu, or v2 with cpu)")


def share(cpus: int, lab_cpus: int, cores: int | None = None) -> float:
    """The cores a host of `cpus` CPUs gets when this machine's `cores` are shared out over the lab's CPUs."""
    have = cores if cores is not None else len(os.sched_getaffinity(0))
    return have * cpus / lab_cpus


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError as exc:
        raise LabError(f"--capacity: cannot write {path} ({exc.strerror})") from None


def make(lab: str, host: str, cores: float) -> Path:
    """The host's cgroup with its quota of `cores`, and the leaf below it; the file a process joins it through."""
    h = hierarchy()
    group = h.root / BASE / lab / host
    try:
        (group / LEAF).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LabError(f"--capacity: cannot make the cgroup {group} ({exc.strerror})") from None
    quota = max(1000, round(cores * PERIOD_US))
    if h.v2:  # v2: the controller is handed down level by level
        for parent in (h.root, h.root / BASE, h.root / BASE / lab):
            _write(parent / "cgroup.subtree_control", "+cpu")
        _write(group / "cpu.max", f"{quota} {PERIOD_US}")
    else:
        _write(group / "cpu.cfs_period_us", str(PERIOD_US))
        _write(group / "cpu.cfs_quota_us", str(quota))
    return group / LEAF / "cgroup.procs"


def prefix(procs: Path) -> list[str]:
    """argv that joins the cgroup, then runs what follows it (so every process it starts is in it)."""
    return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(procs)]


def remove(lab: str) -> list[str]:
    """The lab's cgroups, removed once their processes are gone (the lab's down kills them); what was removed."""
    removed: list[str] = []
    for root in (V1, V2):
        top = root / BASE / lab
        if not top.is_dir():
            continue
        hosts = sorted(p for p in top.iterdir() if p.is_dir())
        removed += remove_groups([*(h / LEAF for h in hosts), *hosts, top])
    return removed


def remove_groups(groups: list[Path]) -> list[str]:
    """Cgroups removed in this order once their processes are gone, then the labs' folder above the last when
    no lab has a cgroup in it; what was removed."""
    removed = []
    for group in groups:
        for _ in range(50):  # a killed process leaves its cgroup a moment after it is reaped
            try:
                group.rmdir()
                removed.append(str(group))
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)
    if groups:
        with contextlib.suppress(OSError):
            groups[-1].parent.rmdir()
    return removed
