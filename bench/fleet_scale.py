"""Fleet scale, measured on lab hosts (root): one `bench` over 8, 16, 32 and 64 hosts.

The lab's hosts see this checkout and its venv read-only at the same path (`lab up --share`, a site's
shared filesystem); the inventory names that venv with `dltestbed_venv_shared: true`, so `provision`
installs nothing (it checks the venv on every host). Then, for each size N, `dltestbed bench` on the
first N hosts, all at once, as a user runs it, while this script samples the bench process: its peak
RSS (VmHWM) and its open file descriptors. One untimed bench at the first size comes first, so that no
size pays for cold caches (the first bench after `lab up` ran about 1 s slower).

The workload is the disk microbenchmark, 3 timed steps (`--suite micro --probes disk --steps 3`): a real
run of dltestbed's workload that costs its host about 0.4 CPU-s. A TensorFlow model costs 5 CPU-s and
about 1 GB per host just to start, and the lab's hosts share this machine's cores and memory: 64 of
them would measure this machine, not the controller. Even so the hosts' work grows with N on the same
cores; the table gives the CPU time of the controller and of the whole machine beside the wall time, so
the controller's share is read directly.

Prints a table and the ratios against the goals: T(64) / T(8) <= 4; peak RSS <= 500 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

CLI = [sys.executable, "-m", "dltestbed"]
ROOT = Path(__file__).resolve().parents[1]
GOAL_RATIO, GOAL_RSS_MB = 4.0, 500.0


def machine_cpu_seconds() -> float:
    """CPU time this machine has spent, all cores (user, nice, system, irq, softirq), in seconds."""
    with open("/proc/stat", encoding="ascii") as f:
        fields = f.readline().split()[1:8]
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields)
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


class Sampler(threading.Thread):
    """Samples a process every 50 ms: peak RSS (VmHWM, kept by the kernel) and the most open fds."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.hwm_kb = 0
        self.fds = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            try:
                with open(f"/proc/{self.pid}/status", encoding="ascii") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            self.hwm_kb = max(self.hwm_kb, int(line.split()[1]))
                self.fds = max(self.fds, len(os.listdir(f"/proc/{self.pid}/fd")))
            except (OSError, ValueError):
                pass
            self.done.wait(0.05)


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([*CLI, *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"dltestbed {' '.join(args[:2])} failed:\n{proc.stderr[-3000:]}")
    return proc


def bench(inventory: Path, hosts: list[str], results: Path, steps: int, env: dict[str, str]) -> dict:
    """One bench on `hosts`, sampled; what it measured."""
    argv = [
        *CLI,
        "bench",
        "--inventory",
        str(inventory),
        "--limit",
        ",".join(hosts),
        "--suite",
        "micro",
        "--probes",
        "disk",
        "--steps",
        str(steps),
        "--repeat",
        "1",
        "--format",
        "json",
        "--results",
        str(results),
    ]
    out_path, err_path = results.with_suffix(".out"), results.with_suffix(".err")
    with out_path.open("w") as out, err_path.open("w") as err:  # files, not pipes: nothing blocks the bench
        cpu0, t0 = machine_cpu_seconds(), time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, text=True, env=env)
        sampler = Sampler(proc.pid)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)  # the bench's own rusage: its CPU time and peak RSS
        wall = time.perf_counter() - t0
        cpu = machine_cpu_seconds() - cpu0
    sampler.done.set()
    sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"bench on {len(hosts)} hosts failed ({proc.returncode}):\n{err_path.read_text()[-3000:]}")
    runs = json.loads(out_path.read_text())
    return {
        "hosts": len(hosts),
        "wall_s": wall,
        "runs": len(runs),
        "ok": sum(r["status"] == "ok" for r in runs),
        "controller_cpu_s": usage.ru_utime + usage.ru_stime,
        "machine_cpu_s": cpu,
        "peak_rss_mb": max(sampler.hwm_kb, usage.ru_maxrss) / 1024,
        "max_fds": sampler.fds,
    }


def shares() -> list[str]:
    venv = Path(sys.prefix).resolve()
    return [str(ROOT)] + ([] if venv.is_relative_to(ROOT) else [str(venv)])


def workspace(script: str, prefix: str) -> tuple[Path, dict[str, str]]:
    """A lab measurement's folder and environment (its labs in the folder unless $DLTESTBED_LAB_DIR says where);
    root only: a lab needs it."""
    if os.geteuid() != 0:
        sys.exit(f"{script} makes a lab: run it as root")
    work = Path(tempfile.mkdtemp(prefix=prefix))
    env = {**os.environ, "DLTESTBED_LAB_DIR": os.environ.get("DLTESTBED_LAB_DIR", str(work / "labs")), "COLUMNS": "200"}
    return work, env


def shared_lab(name: str, subnet: str, hosts: int, work: Path, env: dict[str, str]) -> tuple[Path, list[str]]:
    """`lab up` of `hosts` hosts that share this checkout and its venv; the inventory naming that venv (shared:
    provision installs nothing), written in `work`, and the hosts' names."""
    lab = run(
        "lab",
        "up",
        "--hosts",
        str(hosts),
        "--name",
        name,
        "--subnet",
        subnet,
        *(a for s in shares() for a in ("--share", s)),
        env=env,
    )
    doc = yaml.safe_load(Path(lab.stdout.strip().splitlines()[-1]).read_text())
    doc["all"]["vars"].update(dltestbed_venv=sys.prefix, dltestbed_venv_shared=True)
    inventory = work / "inventory.yml"
    inventory.write_text(yaml.safe_dump(doc))
    return inventory, list(doc["all"]["children"]["bare_metal"]["hosts"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", default="8,16,32,64", help="sizes to bench, comma-separated (default 8,16,32,64)")
    ap.add_argument("--steps", type=int, default=3, help="timed steps per run (default 3)")
    ap.add_argument("--subnet", default="10.213.87.0/24", help="the lab's network")
    ap.add_argument("--name", default="fleet", help="the lab's name")
    ap.add_argument("--json", type=Path, help="also write the measurements here")
    args = ap.parse_args()
    sizes = sorted({int(x) for x in args.hosts.split(",") if x.strip()})
    work, env = workspace("fleet_scale.py", "dltestbed-fleet-")
    try:
        t0 = time.perf_counter()
        inventory, names = shared_lab(args.name, args.subnet, max(sizes), work, env)
        up_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        prov = run("provision", "--layout", "distributed", "--inventory", str(inventory), env=env)
        prov_s = time.perf_counter() - t0
        said = next((ln for ln in (prov.stdout + prov.stderr).splitlines() if "provisioned" in ln), "?")
        print(f"lab up {max(sizes)} hosts: {up_s:.1f} s; provision (shared venv): {prov_s:.1f} s — {said}")
        bench(inventory, names[: sizes[0]], work / "warmup.sqlite", args.steps, env)  # untimed: caches warm for all
        rows = [bench(inventory, names[:n], work / "results.sqlite", args.steps, env) for n in sizes]
    finally:
        subprocess.run([*CLI, "lab", "teardown", "--name", args.name], capture_output=True, env=env)
    print(
        f"\n{'hosts':>5} {'wall s':>7} {'T/T(first)':>10} {'runs ok':>8} {'ctl CPU s':>9} {'ctl ms/host':>11} "
        f"{'machine CPU s':>13} {'peak RSS MB':>11} {'max fds':>7}"
    )
    for r in rows:
        print(
            f"{r['hosts']:>5} {r['wall_s']:>7.1f} {r['wall_s'] / rows[0]['wall_s']:>10.2f} "
            f"{r['ok']:>4}/{r['runs']:<3} {r['controller_cpu_s']:>9.1f} "
            f"{1000 * r['controller_cpu_s'] / r['hosts']:>11.0f} {r['machine_cpu_s']:>13.1f} "
            f"{r['peak_rss_mb']:>11.0f} {r['max_fds']:>7}"
        )
    first, last = rows[0], rows[-1]
    ratio = last["wall_s"] / first["wall_s"]
    peak = max(r["peak_rss_mb"] for r in rows)
    print(
        f"\nT({last['hosts']}) / T({first['hosts']}) = {ratio:.2f} (goal <= {GOAL_RATIO:g} for 64 / 8); "
        f"peak RSS {peak:.0f} MB (goal <= {GOAL_RSS_MB:g} MB); most fds {max(r['max_fds'] for r in rows)}"
    )
    floor = (last["machine_cpu_s"] - last["controller_cpu_s"]) / os.cpu_count()  # type: ignore[operator]
    others = last["machine_cpu_s"] - last["controller_cpu_s"]
    print(
        f"at {last['hosts']} hosts everything but the controller (the hosts' sshd and workloads) used {others:.1f} "
        f"CPU-s of this machine's {os.cpu_count()} cores: {floor:.1f} s of the {last['wall_s']:.1f} s wall time "
        "would pass with a controller that cost nothing"
    )
    if args.json:
        args.json.write_text(json.dumps({"lab_up_s": up_s, "provision_s": prov_s, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
