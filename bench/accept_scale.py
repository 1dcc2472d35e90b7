"""Acceptance at scale, measured on lab hosts (root): `dltestbed accept --level quick --parallel 8` over 8, 16 and
32 hosts, as a user runs it, with the controller's CPU time and peak RSS.

The lab is fleet_scale.py's: hosts that see this checkout and its venv read-only at the same path, an inventory
naming that venv with `dltestbed_venv_shared: true` (provision installs nothing, it checks the venv on every
host). For each size N one acceptance of the first N hosts in a folder of its own, every stage with its defaults
but `--parallel` (at most 8 nodes measured at once: the lab's hosts share this machine's cores and memory) and
`--framework`. The controller is the `accept` process and what it waits for (ansible, ssh clients): its CPU time
is its own rusage and its children's (wait4), its peak RSS the kernel's high-water mark of the process itself
(sampled). The hosts' workloads run under their own sshd: not the controller's.

Prints a table, the pairs stage's rounds at each size, and the ratios against the goals: at the largest size
peak RSS <= 500 MB, controller CPU per host <= 1.5x that at the smallest, the pairs stage one round.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from fleet_scale import CLI, GOAL_RSS_MB, Sampler, machine_cpu_seconds, shared_lab, workspace

GOAL_CPU_RATIO = 1.5


def accept(inventory: Path, hosts: list[str], folder: Path, parallel: int, framework: str, env: dict[str, str]) -> dict:
    """One acceptance of `hosts`, sampled; what it measured and how it ended."""
    folder.mkdir(parents=True)
    results = folder / "results.sqlite"
    argv = [
        *CLI,
        "accept",
        "--inventory",
        str(inventory),
        "--limit",
        ",".join(hosts),
        "--level",
        "quick",
        "--parallel",
        str(parallel),
        "--framework",
        framework,
        "--out",
        str(folder / "pack"),
        "--results",
        str(results),
        "--format",
        "json",
    ]
    out_path, err_path = folder / "accept.out", folder / "accept.err"
    with out_path.open("w") as out, err_path.open("w") as err:  # files, not pipes: nothing blocks the controller
        cpu0, t0 = machine_cpu_seconds(), time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, text=True, env=env)
        sampler = Sampler(proc.pid)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)  # its rusage: its own CPU and its waited-for children's
        wall = time.perf_counter() - t0
        cpu = machine_cpu_seconds() - cpu0
    sampler.done.set()
    sampler.join()
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1, 3):
        sys.exit(f"accept on {len(hosts)} hosts could not finish ({code}):\n{err_path.read_text()[-3000:]}")
    doc = json.loads(out_path.read_text())
    state = json.loads((folder / "pack" / "accept-state.json").read_text())["stages"]
    return {
        "hosts": len(hosts),
        "exit": code,
        "wall_s": wall,
        "outcome": doc["outcome"],
        "controller_cpu_s": usage.ru_utime + usage.ru_stime,
        "machine_cpu_s": cpu,
        "peak_rss_mb": sampler.hwm_kb / 1024,
        "pairs_rounds": pair_rounds(results, state["pairs"]["benches"]) if "pairs" in state else 0,
        "stages": {k: v["finished_at"] for k, v in state.items()},
    }


def pair_rounds(results: Path, benches: list[str]) -> int:
    """How many rounds the pairs stage's jobs ran in: jobs whose runs overlap in time are one round."""
    with sqlite3.connect(f"file:{results}?mode=ro", uri=True) as db:
        rows = db.execute(
            f"select job_id, min(started_at), max(finished_at) from runs where bench_id in "
            f"({', '.join('?' for _ in benches)}) and role = 'foreground' group by job_id order by 2",
            benches,
        ).fetchall()
    rounds, end = 0, ""
    for _, start, finish in rows:
        if start >= end:  # starts after every job so far ended: a new round
            rounds += 1
        end = max(end, finish or "")
    return rounds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", default="8,16,32", help="sizes to accept, comma-separated (default 8,16,32)")
    ap.add_argument("--parallel", type=int, default=8, help="accept's --parallel: nodes measured at once (8)")
    ap.add_argument("--framework", default="tensorflow", help="accept's --framework (default tensorflow)")
    ap.add_argument("--subnet", default="10.213.88.0/24", help="the lab's network")
    ap.add_argument("--name", default="ascale", help="the lab's name")
    ap.add_argument("--json", type=Path, help="also write the measurements here")
    args = ap.parse_args()
    sizes = sorted({int(x) for x in args.hosts.split(",") if x.strip()})
    work, env = workspace("accept_scale.py", "dltestbed-accept-scale-")
    try:
        inventory, names = shared_lab(args.name, args.subnet, max(sizes), work, env)
        rows = []
        for n in sizes:
            rows.append(accept(inventory, names[:n], work / f"accept-{n}", args.parallel, args.framework, env))
            r = rows[-1]
            print(f"{n} hosts: {r['wall_s']:.0f} s, exit {r['exit']} ({r['outcome']})", flush=True)
    finally:
        subprocess.run([*CLI, "lab", "teardown", "--name", args.name], capture_output=True, env=env)
    print(
        f"\n{'hosts':>5} {'wall s':>7} {'exit':>4} {'ctl CPU s':>9} {'ctl CPU s/host':>14} {'machine CPU s':>13} "
        f"{'peak RSS MB':>11} {'pair rounds':>11}"
    )
    for r in rows:
        print(
            f"{r['hosts']:>5} {r['wall_s']:>7.0f} {r['exit']:>4} {r['controller_cpu_s']:>9.1f} "
            f"{r['controller_cpu_s'] / r['hosts']:>14.2f} {r['machine_cpu_s']:>13.0f} {r['peak_rss_mb']:>11.0f} "
            f"{r['pairs_rounds']:>11}"
        )
    first, last = rows[0], rows[-1]
    per = [r["controller_cpu_s"] / r["hosts"] for r in (first, last)]
    print(
        f"\nat {last['hosts']} hosts: peak RSS {last['peak_rss_mb']:.0f} MB (goal <= {GOAL_RSS_MB:g}); controller CPU "
        f"per host {per[1]:.2f} s = {per[1] / per[0]:.2f} x that at {first['hosts']} (goal <= {GOAL_CPU_RATIO:g}); "
        f"the pairs stage in {last['pairs_rounds']} round(s) (goal 1)"
    )
    if args.json:
        args.json.write_text(json.dumps({"rows": rows}, indent=2))


if __name__ == "__main__":
    main()
