"""The Target protocol: one abstraction for bare metal, VMs and containers, declaring everything
callers use — nothing is looked up with getattr; what depends on the kind asks its capabilities
(`dltestbed.kinds`), and only the registry maps a kind's name to how its target is made."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Protocol, Unpack, runtime_checkable

from dltestbed.transport.base import (
    INTERRUPT,
    INTERRUPTED,
    NOT_NEEDED,
    STDERR_TAIL_LINES,
    Abort,
    Aborted,
    CommandResult,
    RunOptions,
    Transport,
    command_env,
)

__all__ = [
    "INTERRUPT",
    "INTERRUPTED",
    "NOT_NEEDED",
    "STDERR_TAIL_LINES",
    "Abort",
    "Aborted",
    "CommandResult",
    "OnTransport",
    "Placement",
    "RunOptions",
    "Target",
    "command_env",
    "machine_under",
]


@runtime_checkable
class Target(Protocol):
    """Where a workload runs.

    kind: bm, vm, cbm or cvm. name: this target, for people. host: the system the workload's
    process lives on (a machine, or a VM by its name). machine: the physical machine under every
    layer (an inventory host's name, or this machine's hostname): `report --by-host` puts a VM and
    its containers beside their host. remote: reached over SSH. Every target gives the workload a
    stdin that closes when dltestbed is gone (the SSH session, a pipe held here, a runtime's -i), and the
    workload stops then (--watch-stdin). inner: the target this
    one wraps (a container's host or VM), None for bm and vm. peer_address: where the other
    workers of a distributed job reach it. data_dir: where the workload here reads the bench's real
    data (its copy, or the mount of one); None where the bench placed none for it (the spec's path is used).
    compile_cache: where the workload here keeps the bench's compile caches of this kind (a folder of its machine,
    or the mount of one: orchestrate/compilecache.py); None where the bench made none."""

    name: str
    kind: str
    host: str
    machine: str
    python: str  # interpreter on the target that has dltestbed installed
    remote: bool

    @property
    def inner(self) -> Target | None: ...

    peer_address: str
    data_dir: str | None
    compile_cache: str | None

    def run(self, argv: Sequence[str], **options: Unpack[RunOptions]) -> CommandResult:
        """Run argv, call on_line for each stdout line as it arrives, write stderr to stderr_log.
        Raises Aborted, with the abort's reason, when the run was aborted."""
        ...

    def abort(self, why: Abort = INTERRUPT) -> None:
        """Stop the run in progress from any thread, at any moment of it: while its process starts or
        its connection opens too (the run then stops as soon as it has begun). `why` travels with the
        abort: `run` raises Aborted(why), and the runner stores the run as it says."""
        ...

    def fingerprint(self) -> Mapping[str, str]:
        """Facts about the target that the workload cannot see from inside (layer, image, host)."""
        ...

    def confine(self, gpu: str, cpus: str | None) -> None:
        """--gpus per-gpu: the runs of this target see this GPU (UUID) alone, on these CPUs, where the target
        must be told (a container is made so); a target whose workload the runner pins does nothing."""
        ...


class OnTransport:
    """For a target whose commands all go through one transport (a local process, SSH): run and abort
    are the transport's."""

    _transport: Transport

    def run(self, argv: Sequence[str], **options: Unpack[RunOptions]) -> CommandResult:
        """Run argv through the transport, streaming stdout lines; Aborted when aborted."""
        return self._transport.run(argv, **options)

    def abort(self, why: Abort = INTERRUPT) -> None:
        """Stop the command in progress, or the one being started (from any thread)."""
        self._transport.abort(why)

    def confine(self, gpu: str, cpus: str | None) -> None:
        """Nothing to tell: the runner pins the workload itself (its environment and CPU affinity)."""


def ended_outside(result: CommandResult, why: str, options: RunOptions) -> CommandResult:
    """A run that something outside ended (a scheduler's limit, a node lost): why, appended to the run's log and
    given to the result as what ended it."""
    log = options.get("stderr_log")
    if log is not None:
        with log.open("a", encoding="utf-8") as f:
            f.write(f"[dltestbed] {why}\n")
    return dataclasses.replace(result, ended_by=why)


def machine_under(target: Target) -> Target:
    """The target under a container (its host or VM: same network and CPUs); the target itself otherwise."""
    return target.inner if target.inner is not None else target


class Placement(Protocol):
    """A machine a scheduler gave the bench (a launcher's: a node of Slurm's allocation, a Kubernetes node), and
    how a workload reaches it: bare metal, and a container where the scheduler runs it itself (a pod)."""

    @property
    def label(self) -> str:
        """The machine, for messages."""
        ...

    def bare(self, data_dir: str | None, compile_cache: str | None) -> Target:
        """Its bare-metal target: the bench's data copy read at `data_dir`, its compile caches in `compile_cache`."""
        ...

    def container(self, data_dir: str | None, compile_cache: str | None) -> Target | None:
        """Its cbm target where the scheduler starts the container itself; None: the runtime's CLI on `bare`."""
        ...
