"""A target whose commands run as an unprivileged user (--as-user): it wraps the target that reaches the machine
(this machine, a host over SSH, a Slurm node) and drops each command to the user there (users.drop_argv). A
container runtime's CLI on it runs as that user too: that is how rootless Podman and Charliecloud are driven."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Unpack

from dltestbed.targets.base import INTERRUPT, Abort, CommandResult, RunOptions, Target
from dltestbed.users import drop_argv


class AsUserTarget:
    """`inner`'s machine and kind, each command run as `user`."""

    def __init__(self, inner: Target, user: str) -> None:
        self.wrapped = inner
        self.user = user
        self.name = inner.name
        self.kind = inner.kind
        self.host = inner.host
        self.machine = inner.machine
        self.python = inner.python
        self.remote = inner.remote
        self.peer_address = inner.peer_address
        self.data_dir = inner.data_dir

    @property
    def inner(self) -> Target | None:
        """What the wrapped target wraps: the same layer, so None for bare metal."""
        return self.wrapped.inner

    def fingerprint(self) -> Mapping[str, str]:
        """The wrapped target's facts and the user its commands ran as, seen from outside."""
        return {**self.wrapped.fingerprint(), "run_as_user": self.user}

    def run(self, argv: Sequence[str], **options: Unpack[RunOptions]) -> CommandResult:
        """argv as the user: its variables are handed over after the drop (the drop clears the environment)."""
        env = options.pop("env", None)
        return self.wrapped.run(drop_argv(self.user, argv, env), **options)

    def abort(self, why: Abort = INTERRUPT) -> None:
        """Stop the run in progress (the wrapped target's)."""
        self.wrapped.abort(why)

    def confine(self, gpu: str, cpus: str | None) -> None:
        """As the wrapped target confines."""
        self.wrapped.confine(gpu, cpus)
