"""The workload's event channel: the real stdout, and only events go there."""

from __future__ import annotations

import os
import sys
import threading
from typing import TextIO

from dltestbed.workload.codec import encode
from dltestbed.workload.events import Event


class Emitter:
    """Writes one event per line to a private copy of stdout; thread-safe, flushed per line."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    @classmethod
    def take_stdout(cls) -> Emitter:
        """Keep fd 1 for events and point fd 1 (and sys.stdout) at stderr.

        Anything else that prints — Python or a C++ library — then lands on stderr, so stdout
        carries events and nothing else.
        """
        sys.stdout.flush()
        private = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        return cls(os.fdopen(private, "w", buffering=1, encoding="utf-8"))

    def document(self, text: str) -> None:
        """Write a document where events go, for a command that runs nothing (the workload's --schema)."""
        self._write(text + "\n")

    def emit(self, ev: Event) -> None:
        """Write one event line."""
        self._write(encode(ev) + "\n")

    def _write(self, line: str) -> None:
        """Write and flush, one writer at a time. If the reader is gone, there is no one to work for: exit at once."""
        with self._lock:
            try:
                self._stream.write(line)
                self._stream.flush()
            except BrokenPipeError:
                os._exit(141)  # 128 + SIGPIPE, as a shell reports it
