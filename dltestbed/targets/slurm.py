"""Bare metal on a node of a Slurm allocation: each command is an srun step started here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Unpack

from dltestbed.slurm.alloc import Allocation, Node
from dltestbed.targets.base import INTERRUPT, Abort, CommandResult, RunOptions, Target, ended_outside
from dltestbed.transport.base import MACHINE_LOCAL
from dltestbed.transport.local import LocalProcess


@dataclass(frozen=True)
class SlurmPlace:
    """A node of the bench's Slurm allocation, with the interpreter that has dltestbed there (a Placement)."""

    alloc: Allocation
    node: Node
    python: str

    @property
    def label(self) -> str:
        return f"Slurm node {self.node.name}"

    def bare(self, data_dir: str | None, compile_cache: str | None) -> Target:
        return SlurmTarget(self.alloc, self.node, self.python, data_dir=data_dir, compile_cache=compile_cache)

    def container(self, data_dir: str | None, compile_cache: str | None) -> Target | None:
        return None  # an srun step runs the runtime's CLI on the node


class SlurmTarget:
    """A workload on a Slurm node, as the scheduler placed it: srun streams its stdout back and
    forwards its stdin (the workload's watch); a step the scheduler ends is told by Slurm's reason."""

    kind = "bm"
    remote = True
    inner: Target | None = None

    def __init__(
        self, alloc: Allocation, node: Node, python: str, data_dir: str | None = None, compile_cache: str | None = None
    ) -> None:
        self.alloc = alloc
        self.node = node
        self.name = self.host = self.machine = node.name
        self.peer_address = node.address
        self.python = python
        self.data_dir = data_dir
        self.compile_cache = compile_cache
        self._srun = LocalProcess(f"Slurm node {node.name}", drop=MACHINE_LOCAL)  # srun exports the rest

    def run(self, argv: Sequence[str], **options: Unpack[RunOptions]) -> CommandResult:
        """Run argv as an srun step on the node; when it fails because Slurm ended the job (time
        limit, node failure), the result says so in Slurm's words (ended_by, also in the run's log)."""
        result = self._srun.run(self.alloc.srun_argv(self.node.name, argv), **options)
        if result.ok:
            return result
        why = self.alloc.ended_why(result.stderr_tail)
        return result if why is None else ended_outside(result, why, options)

    def abort(self, why: Abort = INTERRUPT) -> None:
        """Stop the step in progress (srun forwards the SIGTERM to the task), or the one being started."""
        self._srun.abort(why)

    def confine(self, gpu: str, cpus: str | None) -> None:
        """Nothing to tell: the runner pins the workload itself."""

    def fingerprint(self) -> Mapping[str, str]:
        """The layer facts: bare metal, placed by Slurm."""
        return {
            "target_kind": self.kind,
            "target_host": self.name,
            "target_address": self.node.address,
            "transport": "slurm",
            "slurm_job_id": self.alloc.job_id,
            "slurm_partition": self.alloc.partition,
        }
