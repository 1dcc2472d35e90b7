"""A distributed job's cluster as a worker sees it: the workers' addresses and its own index (each framework reads
it from its own environment: frameworks/*/), and how long a collective may wait for a peer."""

from __future__ import annotations

from dataclasses import dataclass

COLLECTIVE_TIMEOUT = 600.0  # seconds a collective may wait for a peer before it fails the run


@dataclass(frozen=True)
class Cluster:
    """The workers' addresses (host:port) and this worker's index among them."""

    workers: tuple[str, ...]
    index: int

    @property
    def size(self) -> int:
        """Number of workers."""
        return len(self.workers)
