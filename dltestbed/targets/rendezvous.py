"""Where the workers of one distributed job meet when their addresses are known only once each has started (a pod
on a pod network gets its address when it runs): each says its address and waits for the others'; each is then
given its environment, the framework's, made from every worker's address (its `worker_env`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from dltestbed.errors import TargetError

PORT = 23456  # each worker's: any port is free, as each has a network namespace of its own
WAIT_SECONDS = 0.5  # how often a waiting worker looks whether its run was stopped
# how long a worker with an address waits for the others' (a peer's pod stuck before it runs: a mount, the network)
PEERS_SECONDS = 300.0

EnvOf = Callable[[Sequence[str], int], Mapping[str, str]]  # every worker's host:port, this one's index → its env


class Rendezvous:
    """`count` workers, each on `port` of its own address (each has a network namespace of its own)."""

    def __init__(self, count: int, port: int, env_of: EnvOf) -> None:
        self.port = port
        self._env_of = env_of
        self._addresses: list[str | None] = [None] * count
        self._changed = threading.Condition()

    def env(
        self, index: int, address: str, stopped: Callable[[], bool], wait_s: float = PEERS_SECONDS
    ) -> Mapping[str, str] | None:
        """Worker `index`, now at `address` (IPv6 in brackets): its environment once every worker has said its
        address; None when its run is `stopped` first (the job is ending: a worker failed, or Ctrl-C); a
        TargetError naming the workers still without one after `wait_s`."""
        host = f"[{address}]" if ":" in address else address
        deadline = time.monotonic() + wait_s
        with self._changed:
            self._addresses[index] = f"{host}:{self.port}"
            self._changed.notify_all()
            while not all(self._addresses):
                if stopped():
                    return None
                if time.monotonic() > deadline:
                    lacking = ", ".join(str(i) for i, a in enumerate(self._addresses) if a is None)
                    raise TargetError(f"worker(s) {lacking} of the job did not start within {wait_s:.0f} s")
                self._changed.wait(WAIT_SECONDS)
            return self._env_of([a for a in self._addresses if a], index)


@runtime_checkable
class LatePeer(Protocol):
    """A target whose address is known only once its workload runs (peer_address is not it): a distributed job
    seats it at the job's rendezvous, and it asks there for its environment once it has an address."""

    def seat(self, rendezvous: Rendezvous, index: int) -> None:
        """Its place in the job: worker `index` of `rendezvous`."""
        ...
