"""A target whose commands run as an unprivileged user (--as-user): it wraps the target that reaches the machine
(this machine, a host over SSH, a Slurm node) and drops each command to the user there (users.drop_argv). A
container runtime's CLI on it runs as that user too: that is how rootless Podman and Charliecloud are driven."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Unpack

from dltestbed.errors import TargetError
from dltestbed.targets.base import INTERRUPT, Abort, CommandResult, RunOptions, Target
from dltestbed.users import drop_argv, primary_gid


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
        self.compile_cache = inner.compile_cache
        self._gid: int | None = None

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
        return self.wrapped.run(drop_argv(self.user, self.gid(), argv, env), **options)

    def gid(self) -> int:
        """The user's primary group where the commands run: this machine's passwd, else `id -g` there (once)."""
        if self._gid is None:
            if not self.remote:
                self._gid = primary_gid(self.user)
            else:
                lines: list[str] = []
                res = self.wrapped.run(["id", "-g", self.user], timeout=60, on_line=lines.append)
                if res.returncode != 0 or not lines or not lines[0].strip().isdigit():
                    raise TargetError(f"{self.host}: user {self.user} does not exist there")
                self._gid = int(lines[0].strip())
        return self._gid

    def abort(self, why: Abort = INTERRUPT) -> None:
        """Stop the run in progress (the wrapped target's)."""
        self.wrapped.abort(why)

    def confine(self, gpu: str, cpus: str | None) -> None:
        """As the wrapped target confines."""
        self.wrapped.confine(gpu, cpus)
