"""A bench's Slurm allocation, held by this process and gone with it.

`salloc` is given a holder command that prints the job id and node list, then reads its stdin, a pipe
only this process writes to. So the allocation lives exactly as long as dltestbed: `release` closes
the pipe (the holder ends, salloc gives the nodes back) and scancels the job to be sure; if dltestbed
is killed, the pipe closes all the same and salloc gives the nodes back, which ends every step still
running on them. Steps are started with `srun --jobid` (see `srun_argv`)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dltestbed.errors import SlurmError
from dltestbed.slurm import parse
from dltestbed.transport.base import command_env

HOLDER = 'printf "%s %s\\n" "$SLURM_JOB_ID" "$SLURM_JOB_NODELIST"; exec cat >/dev/null'
RELEASE_WAIT = 30.0  # seconds salloc gets to give the nodes back before it is stopped


@dataclass(frozen=True)
class Request:
    """What the bench asks Slurm for: whole nodes (--exclusive), one job named after the bench."""

    nodes: int
    partition: str | None = None
    account: str | None = None
    time: str | None = None  # Slurm's time format: minutes, MM:SS, HH:MM:SS, D-HH...
    job_name: str = "dltestbed"
    comment: str | None = None


@dataclass(frozen=True)
class Node:
    """A node of the allocation: its Slurm name, the address its peers reach it at, its CPUs."""

    name: str
    address: str
    cpus: str = ""


def salloc_argv(req: Request) -> list[str]:
    """The salloc command line for a request (unset options are left to Slurm and $SALLOC_*)."""
    argv = ["salloc", f"--nodes={req.nodes}", "--exclusive", f"--job-name={req.job_name}"]
    for flag, value in (
        ("--partition", req.partition),
        ("--account", req.account),
        ("--time", req.time),
        ("--comment", req.comment),
    ):
        if value:
            argv.append(f"{flag}={value}")
    return [*argv, "--", "sh", "-c", HOLDER]


def slurm(*argv: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run one of Slurm's client commands here; a SlurmError line when it is missing or hangs."""
    try:
        return subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=command_env(os.environ),
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise SlurmError(
            f"--launcher slurm: {argv[0]} is not installed here (this machine must be a Slurm "
            "submit host: apt-get install slurm-client)"
        ) from None
    except subprocess.TimeoutExpired:
        raise SlurmError(
            f"--launcher slurm: `{' '.join(argv[:3])}` got no answer in {timeout:.0f} s "
            "(is slurmctld up? is $SLURM_CONF right?)"
        ) from None


def check_cluster() -> str:
    """The cluster's name, or a SlurmError line when slurmctld cannot be reached: before any run."""
    done = slurm("scontrol", "show", "config")
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no answer"])[-1]
        raise SlurmError(f"--launcher slurm: slurmctld cannot be reached from here: {last}")
    conf = {k.strip(): v.strip() for k, _, v in (ln.partition("=") for ln in done.stdout.splitlines()) if v}
    return conf.get("ClusterName", "")


def check_request(req: Request) -> None:
    """A SlurmError line for a request the partition can never meet (more nodes than it has): salloc
    would wait for it forever."""
    done = slurm("sinfo", "-h", "-N", "-o", "%N %P")
    nodes, default = parse.partitions(done.stdout) if done.returncode == 0 else ({}, None)
    name = req.partition or default
    if name in nodes and req.nodes > len(nodes[name]):
        raise SlurmError(
            f"--launcher slurm: {req.nodes} node(s) asked for; partition {name} has "
            f"{len(nodes[name])} ({', '.join(sorted(nodes[name]))})"
        )


class Allocation:
    """Nodes Slurm gave this bench: steps run on them with `srun_argv`; `release` gives them back."""

    def __init__(self, proc: subprocess.Popen[str], job_id: str, nodes: Sequence[Node], request: Request) -> None:
        self._proc = proc
        self.job_id = job_id
        self.nodes = list(nodes)
        self.request = request
        self.partition = request.partition or ""  # the partition Slurm chose, once granted
        self._released = False

    @classmethod
    def get(cls, req: Request, on_notice: Callable[[str], None] | None = None) -> Allocation:
        """Ask for the nodes and wait until Slurm grants them (salloc's own lines go to on_notice).
        A refusal is a SlurmError with salloc's line; Ctrl-C while it waits revokes the request."""
        try:
            proc = subprocess.Popen(
                salloc_argv(req),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=command_env(os.environ),
                start_new_session=True,
            )
        except FileNotFoundError:
            raise SlurmError("--launcher slurm: salloc is not installed here (apt-get install slurm-client)") from None
        said: deque[str] = deque(maxlen=20)

        def drain() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                said.append(line.rstrip())
                if on_notice:
                    on_notice(line.rstrip())

        threading.Thread(target=drain, daemon=True, name="dltestbed-salloc").start()
        try:
            assert proc.stdout is not None
            first = proc.stdout.readline()
            got = parse.granted(first)
            if got is None:
                proc.wait(10)
                why = next((s for s in reversed(said) if "error" in s.lower()), said[-1] if said else "no job")
                raise SlurmError(f"--launcher slurm: salloc got no allocation: {why}")
            job_id, nodelist = got
            alloc = cls(proc, job_id, [], req)
            try:
                alloc.nodes = nodes_of(nodelist)
                alloc.partition = alloc.job().get("Partition", alloc.partition)
            except BaseException:
                alloc.release()
                raise
            return alloc
        except BaseException:
            _stop_request(proc, parse.job_id_in(said))
            raise

    def srun_argv(self, node: str, argv: Sequence[str]) -> list[str]:
        """A step of one task on `node`, sharing the node with the bench's other steps (a co-tenant,
        a probe); its stdout and stdin are the workload's, streamed through srun."""
        return [
            "srun",
            f"--jobid={self.job_id}",
            f"--nodelist={node}",
            "--nodes=1",
            "--ntasks=1",
            "--overlap",
            "--kill-on-bad-exit=1",
            "--quiet",
            "--",
            *argv,
        ]

    def job(self) -> dict[str, str]:
        """The job's `scontrol show job` record ({} once Slurm has forgotten it)."""
        done = slurm("scontrol", "show", "job", "-o", self.job_id)
        recs = parse.records(done.stdout) if done.returncode == 0 else []
        return recs[0] if recs else {}

    def ended_why(self, stderr_tail: Sequence[str] = ()) -> str | None:
        """When the scheduler ended the job (time limit, node failure, scancel): one line saying how,
        from the job's state and slurmstepd's CANCELLED line; None while the job runs."""
        state = parse.ended(self.job())
        step = parse.cancelled(stderr_tail)
        if state is None and step is None:
            return None
        return f"Slurm ended job {self.job_id}: " + "; ".join(x for x in (state, step) if x)

    def release(self) -> None:
        """Give the nodes back: the holder's stdin closes, salloc ends the job; scancel makes sure.
        Idempotent; every step still running on the nodes ends with the job."""
        if self._released:
            return
        self._released = True
        with contextlib.suppress(OSError):
            if self._proc.stdin:
                self._proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(RELEASE_WAIT)
        _stop_request(self._proc, self.job_id)

    def __enter__(self) -> Allocation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _stop_request(proc: subprocess.Popen[str], job_id: str | None) -> None:
    """Stop salloc (a pending request is revoked) and cancel its job, if it has one."""
    if job_id:
        with contextlib.suppress(SlurmError):
            slurm("scancel", job_id)
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


def nodes_of(nodelist: str) -> list[Node]:
    """The nodes of a Slurm node list ("lab-h[1-2]"), each with the address scontrol gives it."""
    done = slurm("scontrol", "show", "hostnames", nodelist)
    names = done.stdout.split()
    if done.returncode != 0 or not names:
        raise SlurmError(f"--launcher slurm: scontrol cannot expand node list {nodelist!r}: {done.stderr.strip()}")
    info = {r.get("NodeName", ""): r for r in parse.records(slurm("scontrol", "show", "node", "-o", nodelist).stdout)}
    return [Node(n, info.get(n, {}).get("NodeAddr") or n, info.get(n, {}).get("CPUTot", "")) for n in names]
