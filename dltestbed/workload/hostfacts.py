"""The host facts a new rack's faults change (LBNL NHC's check_hw_cpuinfo and check_hw_physmem, as Azure's node
health checks run them): the CPUs online and usable by a process (its affinity and its cgroup's quota), SMT, NUMA
nodes, hugepages and the CPU governor, read from /proc and /sys. Each parser is a pure function of a file's text;
`read()` gives what this host says (a fact it cannot read is left out)."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any


def cpu_list_count(text: str) -> int | None:
    """How many CPUs a kernel CPU list names ("0-3,8-11" → 8; "" → 0); None for text that is not one."""
    count = 0
    for part in (p.strip() for p in text.strip().split(",")):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            return None
        count += int(hi) - int(lo) + 1 if sep else 1
    return count


def cgroup_cpus(cpu_max: str) -> float | None:
    """The CPUs a cgroup v2 `cpu.max` allows ("200000 100000" → 2.0); None: no limit ("max ...") or not read."""
    quota, _, period = cpu_max.strip().partition(" ")
    if quota == "max" or not quota.isdigit() or not period.strip().isdigit() or int(period) == 0:
        return None
    return int(quota) / int(period)


def cfs_cpus(quota_us: str, period_us: str) -> float | None:
    """The CPUs a cgroup v1 CFS quota allows (cpu.cfs_quota_us 150000 over cpu.cfs_period_us 100000 → 1.5);
    None: no limit (-1) or not read."""
    quota, period = quota_us.strip(), period_us.strip()
    if not quota.isdigit() or not period.isdigit() or int(period) == 0:
        return None
    return int(quota) / int(period)


def cgroup_path(self_cgroup: str, controller: str = "") -> str | None:
    """This process's cgroup path from /proc/self/cgroup: v2's ("0::/user.slice/x" → "/user.slice/x"), or with
    `controller` v1's hierarchy that holds it ("4:cpu,cpuacct:/x" → "/x")."""
    for line in self_cgroup.splitlines():
        _, names, path = line.split(":", 2) if line.count(":") >= 2 else ("", "", "")
        if (names == "" and not controller) or (controller and controller in names.split(",")):
            return path.strip() or "/"
    return None


def hugepages(meminfo: str) -> str | None:
    """The default-size hugepages reserved, from /proc/meminfo ("HugePages_Total: 512", "Hugepagesize: 2048 kB" →
    "512 x 2048 kB"); None where the kernel does not say."""
    total = size = None
    for line in meminfo.splitlines():
        key, _, value = line.partition(":")
        if key == "HugePages_Total":
            total = value.strip()
        elif key == "Hugepagesize":
            size = value.strip()
    return f"{total} x {size}" if total is not None and size is not None else None


def usable(affinity: int | None, quota: float | None) -> int | None:
    """The CPUs a process may use at once: its affinity, capped by its cgroup's quota (rounded up)."""
    if affinity is None:
        return None
    return min(affinity, math.ceil(quota)) if quota is not None else affinity


def _text(path: str | Path) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError:
        return None


def _quota(self_cgroup: str) -> float | None:
    """The CPUs this process's cgroup allows: v2's cpu.max, else v1's CFS quota (None: no limit, or not read)."""
    v2 = cgroup_path(self_cgroup)
    cpu_max = _text(f"/sys/fs/cgroup{v2.rstrip('/')}/cpu.max") if v2 is not None else None
    if cpu_max is not None:
        return cgroup_cpus(cpu_max)
    v1 = cgroup_path(self_cgroup, "cpu")
    if v1 is None:
        return None
    base = f"/sys/fs/cgroup/cpu{v1.rstrip('/')}"
    quota, period = _text(f"{base}/cpu.cfs_quota_us"), _text(f"{base}/cpu.cfs_period_us")
    return cfs_cpus(quota, period) if quota is not None and period is not None else None


def read() -> dict[str, Any]:
    """This host's facts: cpus_online, cpus_usable, smt (on, off, notsupported…), numa_nodes, hugepages,
    cpu_governor (of CPU 0); each left out where it cannot be read."""
    out: dict[str, Any] = {}
    online = _text("/sys/devices/system/cpu/online")
    if online is not None:
        out["cpus_online"] = cpu_list_count(online)
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    out["cpus_usable"] = usable(affinity, _quota(_text("/proc/self/cgroup") or ""))
    smt = _text("/sys/devices/system/cpu/smt/control")
    if smt is not None:
        out["smt"] = smt.strip()
    nodes = _text("/sys/devices/system/node/online")
    if nodes is not None:
        out["numa_nodes"] = cpu_list_count(nodes)
    meminfo = _text("/proc/meminfo")
    if meminfo is not None:
        out["hugepages"] = hugepages(meminfo)
    governor = _text("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    if governor is not None:
        out["cpu_governor"] = governor.strip()
    return {k: v for k, v in out.items() if v is not None}
