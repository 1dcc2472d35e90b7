"""A machine that did not answer when the bench began: each of its runs fails at once with why, and
nothing is tried there (one notice for the bench, not a connection timeout per run)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Unpack

from dltestbed.errors import TargetError
from dltestbed.targets.base import INTERRUPT, Abort, CommandResult, RunOptions, Target

DID_NOT_ANSWER = "did not answer when the bench began"  # in the reason of each of its runs


class UnreachableTarget:
    """A target of any kind on a machine marked down (`label`, for messages): `run` raises TargetError
    with the reason."""

    remote = True
    inner: Target | None = None
    python = "python3"
    data_dir: str | None = None
    compile_cache: str | None = None

    def __init__(self, kind: str, label: str, address: str, why: str) -> None:
        self.kind = kind
        self.name = self.host = self.machine = label
        self.peer_address = address
        self.why = why

    def run(self, argv: Sequence[str], **options: Unpack[RunOptions]) -> CommandResult:
        """Nothing runs: the machine did not answer when the bench began."""
        raise TargetError(f"{self.host} {DID_NOT_ANSWER}: {self.why}")

    def abort(self, why: Abort = INTERRUPT) -> None:
        """Nothing is running here to stop."""

    def confine(self, gpu: str, cpus: str | None) -> None:
        """Nothing to tell: the runner pins the workload itself."""

    def fingerprint(self) -> Mapping[str, str]:
        """The layer facts known without the machine: its kind and name."""
        return {"target_kind": self.kind, "target_host": self.name}
