"""A real Slurm cluster in the lab (`lab up --slurm`): Debian's slurm-wlm and munge.

This machine is the cluster's controller and submit host: slurmctld runs here (in a UTS namespace
of its own, so its host name is the config's `SlurmctldHost`) with a munged of the lab's own, on the
lab's key and socket. Every lab host runs its own munged and slurmd inside its namespaces, under its
own node name and address. The config (`slurm.conf`, written to the lab's folder and into every
host's /etc/slurm) is one a Slurm admin would recognise: whole nodes per job (select/linear), no
accounting database, process tracking without cgroups (lab hosts share this machine's kernel).

Slurm's commands here find the cluster through $SLURM_CONF (`lab up` prints the line to export).
`lab.down` kills the controller's processes, found by the lab's paths in their command lines, so a
crashed `up` leaves nothing either."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import socket
import subprocess
import time
from pathlib import Path

from dltestbed.config import parse_cpu_list
from dltestbed.lab.net import LabError
from dltestbed.lab.procs import log_tail, pids_where
from dltestbed.lab.state import LabHost, LabState

CTL_PORT = 6817  # Slurm's standard ports
SLURMD_PORT = 6818
TOOLS = ("slurmctld", "slurmd", "munged", "sinfo")
PACKAGES = "slurmctld slurmd slurm-client munge"


def controller_name(lab: LabState) -> str:
    """slurmctld's host name (SlurmctldHost)."""
    return f"{lab.name}-ctl"


def munge_dir(lab_name: str) -> str:
    """The munge socket's folder: the same path on this machine (the lab's munged) and in every host
    (each host's own munged, on its private /run)."""
    return f"/run/dltestbed-munge-{lab_name}"


def folder(lab: LabState) -> Path:
    """The controller's files: slurm.conf, state, logs, the munge key."""
    return lab.dir / "slurm"


def conf_path(lab: LabState) -> Path:
    """The cluster's slurm.conf on this machine (what $SLURM_CONF names)."""
    return folder(lab) / "slurm.conf"


def node_cpus(host: LabHost) -> int:
    """The CPUs a node declares: its --host-cpus, else this machine's."""
    if host.cpus:
        return len(parse_cpu_list(host.cpus))
    return len(os.sched_getaffinity(0))


def config_text(lab: LabState) -> str:
    """slurm.conf for the lab: one node per lab host, one partition `lab` of them all."""
    d = folder(lab)
    nodes = "\n".join(f"NodeName={h.name} NodeAddr={h.ip} CPUs={node_cpus(h)} State=UNKNOWN" for h in lab.hosts)
    return f"""\
# slurm.conf of dltestbed lab {lab.name!r}: written by `dltestbed lab up --slurm`, removed by `lab teardown`.
ClusterName=dltestbed-{lab.name}
SlurmctldHost={controller_name(lab)}({lab.bridge_ip})
SlurmctldPort={CTL_PORT}
SlurmdPort={SLURMD_PORT}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_dir(lab.name)}/munge.socket.2
StateSaveLocation={d}/state
SlurmctldPidFile={d}/slurmctld.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdPidFile=/run/slurmd.pid
SlurmdSpoolDir=/var/spool/slurmd
SlurmdLogFile=/var/log/slurm/slurmd.log
# lab hosts share this machine's kernel: no cgroup plugins; each node declares its CPUs as configured
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
# whole nodes per job, as the studies had them (exclusive node access through the scheduler)
SelectType=select/linear
SchedulerType=sched/backfill
ReturnToService=2
InactiveLimit=0
KillWait=5
MinJobAge=300
SlurmctldTimeout=30
SlurmdTimeout=60
{nodes}
PartitionName=lab Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=EXCLUSIVE
"""


def check_installed() -> None:
    """A LabError naming the packages when a Slurm or munge program is missing."""
    missing = [t for t in TOOLS if not shutil.which(t, path=os.environ.get("PATH", "") + ":/usr/sbin")]
    if missing:
        raise LabError(f"--slurm needs {', '.join(missing)} (apt-get install {PACKAGES})")


def check_port_free() -> None:
    """slurmctld listens on this machine: its port must be free (one lab with --slurm at a time)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", CTL_PORT))
        except OSError:
            raise LabError(
                f"--slurm: port {CTL_PORT} (slurmctld) is taken on this machine: another lab with "
                "--slurm, or a Slurm controller; `lab teardown` it first"
            ) from None


def prepare(lab: LabState) -> None:
    """The controller's folder, the munge key and slurm.conf (before any host is prepared)."""
    d = folder(lab)
    for sub in ("state", "munge"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(d / "munge", 0o700)
    key = d / "munge" / "munge.key"
    if not key.exists():
        key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)
    conf_path(lab).write_text(config_text(lab))


def prepare_host(lab: LabState, upper: Path) -> None:
    """A host's own slurm.conf, munge key and daemon folders, in its overlay's upper layer."""
    (upper / "etc" / "slurm").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(conf_path(lab), upper / "etc" / "slurm" / "slurm.conf")
    munge_etc = upper / "etc" / "munge"
    munge_etc.mkdir(parents=True, exist_ok=True)
    os.chmod(munge_etc, 0o700)
    key = munge_etc / "munge.key"
    with contextlib.suppress(FileNotFoundError):
        key.unlink()
    shutil.copyfile(folder(lab) / "munge" / "munge.key", key)
    os.chmod(key, 0o400)
    for sub in ("var/spool/slurmd", "var/log/slurm", "var/log/munge", "var/lib/munge"):
        (upper / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(upper / "var/lib/munge", 0o700)
    os.chmod(upper / "var/log/munge", 0o700)


def host_folders(lab: LabState, merged: str) -> list[str]:
    """Start-script lines (before the host's root is its overlay) that make munged's folder in it."""
    run = munge_dir(lab.name)
    return [f"mkdir -p {merged}{run}", f"chmod 755 {merged}{run}"]


def host_commands(lab: LabState) -> list[str]:
    """Start-script lines (in the host's root, before its sshd) that start the host's munged, then its slurmd."""
    run = munge_dir(lab.name)
    munged = (
        f"munged --force --key-file=/etc/munge/munge.key --socket={run}/munge.socket.2 "
        f"--pid-file={run}/munged.pid --log-file=/var/log/munge/munged.log "
        "--seed-file=/var/lib/munge/munged.seed"
    )
    return [munged, "slurmd -f /etc/slurm/slurm.conf"]


def start_controller(lab: LabState) -> None:
    """This machine's munged (the lab's key and socket) and slurmctld, detached; they die with `lab.down`."""
    d, run = folder(lab), munge_dir(lab.name)
    os.makedirs(run, mode=0o755, exist_ok=True)
    munged = [
        "munged",
        "--force",
        f"--key-file={d}/munge/munge.key",
        f"--socket={run}/munge.socket.2",
        f"--pid-file={run}/munged.pid",
        f"--log-file={d}/munged.log",
        f"--seed-file={d}/munge/munged.seed",
    ]
    done = subprocess.run(munged, capture_output=True, text=True)
    if done.returncode != 0:
        raise LabError(f"lab {lab.name}: munged did not start{log_tail(d / 'munged.log')}")
    q = shlex.quote
    script = f"hostname {q(controller_name(lab))} && exec slurmctld -D -i -f {q(str(conf_path(lab)))}"
    log = (d / "slurmctld.out").open("ab")
    subprocess.Popen(
        ["unshare", "--uts", "--", "sh", "-c", script],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    log.close()


def env(lab: LabState) -> dict[str, str]:
    """The environment Slurm's commands here need to find the lab's cluster."""
    return {**os.environ, "SLURM_CONF": str(conf_path(lab))}


def node_states(lab: LabState) -> dict[str, str]:
    """Node → state as `sinfo` reports it (idle, alloc, down*, ...); empty while slurmctld does not answer."""
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True, env=env(lab), timeout=15
        )
    except subprocess.TimeoutExpired:
        return {}
    return parse_sinfo(out.stdout) if out.returncode == 0 else {}


def parse_sinfo(text: str) -> dict[str, str]:
    """`sinfo -h -N -o "%N %T"` lines → node → state (a node in several partitions once)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            out[parts[0]] = parts[1]
    return out


def wait_ready(lab: LabState, timeout: float = 60.0) -> None:
    """Wait until every node is idle in slurmctld's view; a LabError quoting the logs otherwise."""
    deadline = time.monotonic() + timeout
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        states = node_states(lab)
        if states and all(states.get(h.name) == "idle" for h in lab.hosts):
            return
        time.sleep(0.5)
    if not states:
        raise LabError(f"lab {lab.name}: slurmctld does not answer{log_tail(folder(lab) / 'slurmctld.log')}")
    bad = next(h for h in lab.hosts if states.get(h.name) != "idle")
    log = bad.dir(lab.dir) / "upper" / "var" / "log" / "slurm" / "slurmd.log"
    raise LabError(
        f"lab {lab.name}: Slurm node {bad.name} is {states.get(bad.name, 'unknown')}, not idle, after "
        f"{timeout:.0f} s{log_tail(log)}"
    )


def controller_pids(lab_name: str, lab_dir: Path) -> list[int]:
    """This machine's processes of the lab's Slurm controller (slurmctld, munged), by the lab's paths
    in their command lines; processes inside the lab's hosts are not looked at here."""
    marks = (f"{munge_dir(lab_name)}/".encode(), f"{lab_dir / 'slurm'}/".encode())

    def ours(argv: list[bytes]) -> bool:
        cmdline = b"\0".join(argv)
        return any(m in cmdline for m in marks) and (b"slurmctld" in cmdline or b"munged" in cmdline)

    return pids_where(ours)


def remove_run_dir(lab_name: str) -> bool:
    """Remove the munge socket folder on this machine; True when there was one."""
    path = Path(munge_dir(lab_name))
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)
        return True
    return False
