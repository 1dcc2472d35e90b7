"""A command's Job as the cluster receives it (batch/v1, one pod pinned to its node by name): the pod's command,
which marks its stderr lines into its log, and the labels every Job of dltestbed carries; and how the cluster's
answers read (a followed log's lines, a node's Ready condition, an API error's message). Pure: transport/pod.py
sends the Job and follows it."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

HOST_ENV = {"HOME": "/root", "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}  # bm's, in /host
STDERR = "##dltestbed-stderr## "  # marks a stderr line in the pod's log (no step event starts so)
MANAGED_BY = {"app.kubernetes.io/managed-by": "dltestbed"}
LATE_ENV = "/tmp/dltestbed-late.env"  # in a pod: the environment it is given once it has an address
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def bench_label(bench_id: str) -> dict[str, str]:
    """The label every Job and pod of one bench carries (a label's value holds at most 63 characters). Pure."""
    return {"dltestbed.io/bench": bench_id[:63]}


def selector(labels: Mapping[str, str]) -> str:
    """A label selector matching every one of `labels`. Pure."""
    return ",".join(f"{k}={v}" for k, v in labels.items())


GPU = "nvidia.com/gpu"  # the device plugin's resource
LIMITED = ("cpu", "memory", GPU)  # a pod's requests that are its limits too (Guaranteed; a GPU's must be)
QOS = {"guaranteed": "Guaranteed", "besteffort": "BestEffort"}  # --k8s-qos → the class the cluster gives


def qos_class(requests: Mapping[str, str]) -> str:
    """The QoS class Kubernetes gives a pod of one container whose limits are its requests (LIMITED): Guaranteed
    with CPU and memory, BestEffort with neither (a GPU does not count), else Burstable. Pure."""
    has = {"cpu", "memory"} & set(requests)
    return "Guaranteed" if len(has) == 2 else "BestEffort" if not has else "Burstable"


@dataclass(frozen=True)
class PodSpec:
    """What every Job of a target has: where and as what its pod runs."""

    namespace: str
    node: str
    image: str
    host_network: bool = False
    host_root: bool = False  # the node's / mounted at /host and the command run in it (bare metal)
    mounts: tuple[str, ...] = ()  # folders of the node seen at the same path in the pod
    requests: Mapping[str, str] = field(default_factory=dict)  # cpu, memory, nvidia.com/gpu
    pull: str = "IfNotPresent"  # imagePullPolicy
    labels: Mapping[str, str] = field(default_factory=dict)
    deadline_s: int = 24 * 3600  # the Job's activeDeadlineSeconds: what ends it when dltestbed is gone


def wrapped(argv: Sequence[str], host_root: bool, late: bool = False) -> list[str]:
    """The pod's command: argv with its stderr lines marked into stdout, exiting with argv's status (in the node's
    own root for bare metal); `late`: first waiting for LATE_ENV, which is written into the pod once it has an
    address (late_env_argv), and reading it. Pure."""
    if late and host_root:
        raise ValueError("a late environment is written into the pod's own files, not the node's root")
    mark = shlex.quote(STDERR)
    wait = f"until [ -e {LATE_ENV} ]; do sleep 0.2; done; . {LATE_ENV}; " if late else ""
    script = (
        f"{wait}{{ {shlex.join(argv)} 2>&1 1>&3 3>&- | while IFS= read -r l; do printf '%s%s\\n' {mark} \"$l\"; "
        "done; exit ${PIPESTATUS[0]}; } 3>&1"
    )
    return ["/usr/sbin/chroot", "/host", "/bin/bash", "-c", script] if host_root else ["bash", "-c", script]


def late_env_argv(env: Mapping[str, str]) -> list[str]:
    """The command, run in the pod (the API's exec), that writes its late environment to LATE_ENV as exports
    whole (a temporary file renamed: the pod's wait never reads half of it). Its values travel in the exec's
    request (the API server's audit log may keep them): the peers' addresses, never a secret. Pure."""
    bad = [k for k in env if not ENV_NAME.fullmatch(k)]
    if bad:
        raise ValueError(f"not an environment variable's name: {bad[0]!r}")
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
    return ["sh", "-c", f'printf %s "$1" > {LATE_ENV}.new && mv {LATE_ENV}.new {LATE_ENV}', "sh", exports]


def job_body(
    name: str, spec: PodSpec, argv: Sequence[str], env: Mapping[str, str], late: bool = False
) -> dict[str, Any]:
    """The Job of one command (`late`: its pod waits for more of its environment, wrapped's). Pure."""
    volumes, mounts = [], []
    if spec.host_root:
        volumes.append({"name": "host", "hostPath": {"path": "/", "type": "Directory"}})
        mounts.append({"name": "host", "mountPath": "/host"})
    for i, path in enumerate(spec.mounts):
        volumes.append({"name": f"m{i}", "hostPath": {"path": path, "type": "DirectoryOrCreate"}})
        mounts.append({"name": f"m{i}", "mountPath": path})
    labels = {**spec.labels, **MANAGED_BY, "dltestbed.io/job": name}  # dltestbed's own last: none is overridden
    container = {
        "name": "workload",
        "image": spec.image,
        "imagePullPolicy": spec.pull,
        "command": wrapped(argv, spec.host_root, late),
        "env": [{"name": k, "value": v} for k, v in {**(HOST_ENV if spec.host_root else {}), **env}.items()],
        "stdin": True,  # held open, never written: the workload's watch sees no end of file
        # bare metal: root in the node's own root (chroot), as dltestbed runs there over SSH
        **({"securityContext": {"runAsUser": 0, "runAsGroup": 0}} if spec.host_root else {}),
        "volumeMounts": mounts,
        # each request a limit too: a GPU's must be (an extended resource), CPU and memory make the pod Guaranteed
        "resources": {
            "requests": dict(spec.requests),
            "limits": {k: v for k, v in spec.requests.items() if k in LIMITED},
        },
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": spec.namespace, "labels": labels},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": spec.deadline_s,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    # pinned by the node's name (its hostname label may differ)
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [spec.node]}]}
                                ]
                            }
                        }
                    },
                    "hostNetwork": spec.host_network,
                    "terminationGracePeriodSeconds": 10,
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }


def node_ready(node: Any) -> bool:
    """Whether a core/v1 Node's Ready condition is True."""
    return any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))


def not_ready(node: Any, now: datetime) -> tuple[float, str] | None:
    """How long a core/v1 Node has not been Ready, in seconds by its Ready condition's last transition (the
    cluster's clock; 0 where it gives none, or one after `now`), and why in words; None while it is Ready. Pure."""
    if node_ready(node):
        return None
    name = node.metadata.name
    cond = next((c for c in (node.status.conditions or []) if c.type == "Ready"), None)
    if cond is None:
        return 0.0, f"node {name} is not Ready (it has not said it is)"
    said = cond.message or cond.reason or "no reason given"
    why = "its kubelet stopped answering" if cond.status == "Unknown" else f"its kubelet says: {said}"
    since = cond.last_transition_time
    if since is not None and since.tzinfo is None:  # the API's times are UTC
        since = since.replace(tzinfo=UTC)
    held = max(0.0, (now - since).total_seconds()) if since is not None else 0.0
    return held, f"node {name} is not Ready ({why})"


def log_lines(chunks: Iterable[bytes | str]) -> Iterator[str]:
    """A followed log's lines from its chunks as they come (a line may span chunks; the last one, unended, is a
    line too). Pure."""
    buffer = bytearray()
    for chunk in chunks:
        buffer.extend(chunk.encode() if isinstance(chunk, str) else chunk)
        *lines, rest = bytes(buffer).split(b"\n")
        buffer = bytearray(rest)
        for line in lines:
            yield line.decode("utf-8", errors="replace")
    if buffer:
        yield bytes(buffer).decode("utf-8", errors="replace")


def reason_of(exc: Exception) -> str:
    """The API's message of an ApiException, else the error's own, in one line."""
    body = getattr(exc, "body", None)
    try:
        return str(json.loads(body).get("message")) if body else str(exc).splitlines()[0]
    except (TypeError, ValueError, AttributeError):
        return str(getattr(exc, "reason", exc))
