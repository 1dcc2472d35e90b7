"""File locks for what two dltestbed processes may build or change at once: the wheelhouse, image
archives, the root filesystem, guest images, VM addresses, the recorded host keys. filelock's locks
are flock(2) locks: the kernel frees one when its holder dies, so a killed build never blocks the next."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dltestbed.errors import DltestbedError

WAIT_SECONDS = 3600.0  # the longest build (a guest image under TCG) takes minutes, not an hour


@contextmanager
def beside(path: Path, what: str, timeout: float = WAIT_SECONDS) -> Iterator[None]:
    """Hold the lock `PATH.lock` while building or changing `path`; another process waits for it
    (and then finds the work done). A wait past `timeout` is one error naming the lock."""
    # keeps `dltestbed --help` fast: only what builds a cache takes a lock
    from filelock import FileLock, Timeout

    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(f"{path}.lock")
    try:
        lock.acquire(timeout=timeout)
    except Timeout:
        raise DltestbedError(
            f"another dltestbed process has held {what} for {timeout:.0f} s (lock {lock.lock_file}); is it stuck?"
        ) from None
    try:
        yield
    finally:
        lock.release()
