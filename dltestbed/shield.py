"""Cleanups that run to their end: a Ctrl-C or stop signal that arrives while a container is being
removed or a half-made VM deleted is held, and raised once the cleanup is done."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def shielded() -> Iterator[None]:
    """Hold stop signals until the block ends, then raise KeyboardInterrupt if one came — unless the
    block is a cleanup of something already stopping (an exception in flight), which goes on as it
    was. Only the main thread receives signals: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stopping = sys.exc_info()[1] is not None
    held: list[int] = []
    old = {s: signal.signal(s, lambda signum, frame: held.append(signum)) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    if held and not stopping:
        raise KeyboardInterrupt
