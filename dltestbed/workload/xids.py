"""XID errors (the driver's critical GPU errors) as NVML's event API reports them while a run lasts, watched from a
daemon thread: `gpu.Nvml.watch_xids` starts the watch, and the health counters after the run list what it saw."""

from __future__ import annotations

import contextlib
import ctypes
import threading
import time
from typing import Any

EVENT_XID = 0x8  # nvmlEventTypeXidCriticalError


class XidWatch:
    """XID errors (the driver's critical GPU errors: 79 fallen off the bus, 48 double-bit ECC, 31 an MMU
    fault…) as NVML's event API reports them while a run lasts, from a daemon thread that waits on NVML's
    event set. Where events cannot be registered (not supported, or not allowed in a container or VM),
    `why_not` says so and nothing is watched: an XID then cannot be ruled out, never reported as none."""

    WAIT_MS = 200  # each wait on the event set; stop() takes at most this long

    def __init__(self, nvml: Any, handles: list[tuple[int, Any]]) -> None:
        self._n = nvml
        self._index = {_key(h): i for i, h in handles}  # an event's device handle → its NVML index
        self.seen: list[dict[str, Any]] = []
        self.why_not: str | None = None
        self._stop = threading.Event()
        self._set: Any = None
        try:
            self._set = nvml.nvmlEventSetCreate()
            for _, h in handles:
                nvml.nvmlDeviceRegisterEvents(h, EVENT_XID, self._set)
        except nvml.NVMLError as exc:
            self.why_not = f"XID events: {exc or type(exc).__name__}"
            self._free()
            return
        self._thread = threading.Thread(target=self._loop, name="dltestbed-xid", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                data = self._n.nvmlEventSetWait_v2(self._set, self.WAIT_MS)
            except self._n.NVMLError as exc:
                if getattr(exc, "value", None) == self._n.NVML_ERROR_TIMEOUT:
                    continue
                self.why_not = f"XID events: the watch stopped ({exc or type(exc).__name__})"
                return
            index = self._index.get(_key(data.device))
            self.seen.append({"index": index, "xid": int(data.eventData), "t": time.time()})

    def stop(self) -> list[dict[str, Any]]:
        """Stop watching; the XIDs seen, in order."""
        self._stop.set()
        if self._set is not None:
            self._thread.join()
            self._free()
        return list(self.seen)

    def _free(self) -> None:
        if self._set is not None:
            with contextlib.suppress(self._n.NVMLError):
                self._n.nvmlEventSetFree(self._set)
            self._set = None


def _key(handle: Any) -> int | None:
    """A device handle as a dict key: the address a ctypes handle points to (an event names its device by a
    handle object of its own), or an int handle itself."""
    return handle if isinstance(handle, int) else ctypes.cast(handle, ctypes.c_void_p).value
