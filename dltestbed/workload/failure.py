"""Why a run failed, in one line: the line of TensorFlow's error that says what went wrong (not its
"Graph execution error:" header, its traceback or its hints), and, when it ran out of GPU memory, who
else held that GPU's memory."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

LIMIT = 500  # characters of a stored reason

_NODE = re.compile(r"\{\{function_node [^}]*\}\}\s*")
_HEADERS = ("Graph execution error:",)
_NOISE = re.compile(r"^\s*(\[\[\{\{node .*\}\}\]\]|\[Op:[^\]]*\]|Hint: .*|Stack trace for op definition.*)\s*$")
_OP_TAIL = re.compile(r"\s*\[Op:[^\]]*\](\s*name:\s*\S*)?\s*$")  # an eager op's " [Op:Name] name: " at the end
_TRACE = re.compile(r"^Detected at node .* \(most recent call last\):$")
# How TensorFlow, XLA, cuDNN and the CUDA runtime say a device ran out of memory.
_OOM = re.compile(
    r"OOM when allocating|RESOURCE_EXHAUSTED|Out of memory|out of memory|CUDA_ERROR_OUT_OF_MEMORY|"
    r"failed to allocate",
    re.IGNORECASE,
)


def error_line(text: str) -> str:
    """The line of an error message that says what went wrong. TensorFlow's graph errors begin with a
    header and the op's traceback ("Detected at node ... (most recent call last):" and indented frames),
    end with the node, a hint and the op: those are dropped; a line that ends in ":" takes the next
    one with it ("No algorithm worked! Error messages: Profiling failure ..."). Pure."""
    lines = _NODE.sub("", text).splitlines()
    kept: list[str] = []
    in_trace = False
    for line in lines:
        if _TRACE.match(line.strip()):
            in_trace = True
            continue
        if in_trace and (not line.strip() or line[:1].isspace()):
            continue
        in_trace = False
        if not line.strip() or line.strip() in _HEADERS or _NOISE.match(line):
            continue
        kept.append(" ".join(_OP_TAIL.sub("", line).split()))
    if not kept:
        return " ".join(text.split())[:LIMIT]
    first = kept[0]
    if first.endswith(":") and len(kept) > 1:
        first = f"{first} {kept[1]}"
    return first[:LIMIT]


def out_of_memory(text: str) -> bool:
    """Whether an error message says a device (or the host) ran out of memory. Pure."""
    return bool(_OOM.search(text))


def on_gpu(text: str) -> bool:
    """Whether an out-of-memory message names a GPU (TensorFlow's device or allocator, cuDNN, CUDA). Pure."""
    return bool(re.search(r"device:GPU|GPU_\d+_bfc|CUDA|CUDNN|cuDNN|cuBLAS", text))


def holders(devices: Sequence[dict[str, Any]], processes: Sequence[dict[str, Any]], me: int) -> str:
    """Who held each GPU's memory besides this process, in words: devices as Nvml.devices() gives them,
    processes as Nvml.processes() (index, pid, used_bytes, command where this process can see it). Pure."""
    parts = []
    for dev in devices:
        others = [p for p in processes if p["index"] == dev["index"] and p["pid"] != me]
        total = dev.get("memory_total_bytes") or 0
        if not others:
            parts.append(f"GPU {dev['index']} ({dev.get('name', '?')}): no other process holds memory there")
            continue
        held = sum(p.get("used_bytes") or 0 for p in others)
        who = ", ".join(
            f"pid {p['pid']}"
            + (f" {p['command']}" if p.get("command") else " (not visible from here)")
            + (f" {_gib(p['used_bytes'])}" if p.get("used_bytes") else "")
            for p in others
        )
        parts.append(f"GPU {dev['index']} ({dev.get('name', '?')}): {_gib(held)} of {_gib(total)} held by {who}")
    return "; ".join(parts)


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"
