"""Commands as Kubernetes Jobs: each command a batch/v1 Job of one pod pinned to its node, its log followed live,
the Job deleted when the command is over (whatever happened), through the official client. Only APIs every current
cluster serves unchanged: batch/v1 Job, core/v1 Pod and Node, pod logs.

The pod's stdout is the command's; its stderr comes back in the same log, each line marked (STDERR) by a shell
around the command, and goes to the run's log. The pod holds a stdin open that is never written (as a local
command's), so a workload that watches its stdin runs on; what stops it when dltestbed is gone is the Job's
deadline. A pod the scheduler cannot place, an evicted pod, and a node that stops being Ready each end the command
with one line (`why`), which the target gives the run as what ended it."""

from __future__ import annotations

import shlex
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dltestbed.errors import TargetError
from dltestbed.transport.base import RunOptions
from dltestbed.transport.command import Ended, Stderr, Streamed

STDERR = "##dltestbed-stderr## "  # marks a stderr line in the pod's log (no step event starts so)
UNSCHEDULED_SECONDS = 120.0  # a pod not placed by then ends the command
NOT_READY_SECONDS = 20.0  # a node not Ready that long ends the command on it
POLL_SECONDS = 1.0
MANAGED_BY = {"app.kubernetes.io/managed-by": "dltestbed"}
GPU = "nvidia.com/gpu"  # the device plugin's resource
CANNOT_START = (
    "ErrImageNeverPull",
    "ErrImagePull",
    "ImagePullBackOff",
    "CreateContainerConfigError",
    "CreateContainerError",
)


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
    labels: Mapping[str, str] = field(default_factory=dict)
    deadline_s: int = 24 * 3600  # the Job's activeDeadlineSeconds: what ends it when dltestbed is gone


def wrapped(argv: Sequence[str], host_root: bool) -> list[str]:
    """The pod's command: argv with its stderr lines marked into stdout, exiting with argv's status (in the node's
    own root for bare metal). Pure."""
    mark = shlex.quote(STDERR)
    script = (
        f"{{ {shlex.join(argv)} 2>&1 1>&3 3>&- | while IFS= read -r l; do printf '%s%s\\n' {mark} \"$l\"; done; "
        "exit ${PIPESTATUS[0]}; } 3>&1"
    )
    return ["chroot", "/host", "bash", "-c", script] if host_root else ["bash", "-c", script]


def job_body(name: str, spec: PodSpec, argv: Sequence[str], env: Mapping[str, str]) -> dict[str, Any]:
    """The Job of one command. Pure."""
    volumes, mounts = [], []
    if spec.host_root:
        volumes.append({"name": "host", "hostPath": {"path": "/", "type": "Directory"}})
        mounts.append({"name": "host", "mountPath": "/host"})
    for i, path in enumerate(spec.mounts):
        volumes.append({"name": f"m{i}", "hostPath": {"path": path, "type": "DirectoryOrCreate"}})
        mounts.append({"name": f"m{i}", "mountPath": path})
    labels = {**MANAGED_BY, **spec.labels, "dltestbed.io/job": name}
    container = {
        "name": "workload",
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "command": wrapped(argv, spec.host_root),
        "env": [{"name": k, "value": v} for k, v in env.items()],
        "stdin": True,  # held open, never written: the workload's watch sees no end of file
        "volumeMounts": mounts,
        # a GPU is asked as a limit too (an extended resource's request and limit must be equal)
        "resources": {"requests": dict(spec.requests), "limits": {k: v for k, v in spec.requests.items() if k == GPU}},
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
                    "nodeSelector": {"kubernetes.io/hostname": spec.node},
                    "hostNetwork": spec.host_network,
                    "terminationGracePeriodSeconds": 10,
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }


@dataclass
class _Job:
    """A command's Job while it runs."""

    name: str
    why: str | None = None  # what outside the command ended it, in words


class PodJob(Streamed[_Job]):
    """Runs each command as a Job on one node, one at a time; `abort` deletes the Job in progress."""

    def __init__(self, api: Any, spec: PodSpec, prefix: str) -> None:
        super().__init__()
        self.api = api  # a kubernetes.client.ApiClient
        self.spec = spec
        self.prefix = prefix  # Job names: <prefix>-<n>, at most 63 characters
        self.why: str | None = None  # the last command's outside end, for the target
        self.pod_ip: str | None = None  # the last pod's address (the pod network's)
        self._n = 0

    def _start(self, argv: Sequence[str], options: RunOptions) -> _Job:
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        self._n += 1
        name = f"{self.prefix}-{self._n}"[:63].rstrip("-")
        self.why = self.pod_ip = None
        body: Any = job_body(name, self.spec, argv, dict(options.get("env") or {}))  # the client sends a dict as is
        try:
            client.BatchV1Api(self.api).create_namespaced_job(self.spec.namespace, body)
        except ApiException as exc:
            raise TargetError(f"Kubernetes refused the Job {name} on {self.spec.node}: {_reason(exc)}") from None
        return _Job(name)

    def _follow(self, held: _Job, argv: Sequence[str], options: RunOptions, err: Stderr) -> Ended:
        from kubernetes import client, watch

        core = client.CoreV1Api(self.api)
        stop = threading.Event()

        def end() -> None:
            stop.set()
            self._delete(held.name)

        self._abort.attach(end)
        pod = self._placed(core, held, stop)
        if pod is None:
            return Ended(1)
        on_line, timeout = options.get("on_line"), options.get("timeout")
        deadline = time.monotonic() + timeout if timeout else None
        timed_out = threading.Event()
        guard = threading.Thread(target=self._guard, args=(core, held, pod, stop, deadline, timed_out), daemon=True)
        guard.start()
        try:
            for line in watch.Watch().stream(
                core.read_namespaced_pod_log, pod, self.spec.namespace, follow=True, _request_timeout=(10, None)
            ):
                if line.startswith(STDERR):
                    err.line(line[len(STDERR) :])
                elif on_line is not None:
                    on_line(line)
        except Exception as exc:  # the stream broken: the node or the pod gone (the guard says why)
            if not stop.is_set() and held.why is None:
                held.why = f"the log of pod {pod} broke off: {exc}"
        code = self._exit_code(core, held, pod, stop)
        stop.set()
        guard.join()
        self.why = held.why
        if timed_out.is_set():
            return Ended(124, timed_out=True)
        return Ended(code)

    def _placed(self, core: Any, held: _Job, stop: threading.Event) -> str | None:
        """The Job's pod once it runs (or has ended); None, with why, when it is never placed or cannot start."""
        since = time.monotonic()
        while not stop.is_set():
            pods = core.list_namespaced_pod(self.spec.namespace, label_selector=f"job-name={held.name}").items
            if pods:
                p = pods[0]
                self.pod_ip = p.status.pod_ip
                if p.status.phase in ("Running", "Succeeded", "Failed"):
                    return str(p.metadata.name)
                waiting = [s.state.waiting for s in (p.status.container_statuses or []) if s.state and s.state.waiting]
                bad = [w for w in waiting if w.reason in CANNOT_START]
                if bad:
                    held.why = f"pod {p.metadata.name} on {self.spec.node}: {bad[0].reason}: {bad[0].message}"
                    return None
                unplaced = [c for c in (p.status.conditions or []) if c.type == "PodScheduled" and c.status == "False"]
                if unplaced and time.monotonic() - since > UNSCHEDULED_SECONDS:
                    held.why = (
                        f"Job {held.name} was never scheduled on {self.spec.node} in {UNSCHEDULED_SECONDS:.0f} s: "
                        f"{unplaced[0].message}"
                    )
                    return None
            time.sleep(POLL_SECONDS)
        return None

    def _guard(
        self, core: Any, held: _Job, pod: str, stop: threading.Event, deadline: float | None, timed_out: threading.Event
    ) -> None:
        """While the log is followed: the node's Ready condition, the pod's eviction, the time limit; each ends the
        command (the Job deleted, which ends the log)."""
        not_ready_since: float | None = None
        while not stop.wait(POLL_SECONDS):
            if deadline is not None and time.monotonic() > deadline:
                timed_out.set()
                self._delete(held.name)
                return
            try:
                ready = node_ready(core.read_node(self.spec.node))
                p = core.read_namespaced_pod(pod, self.spec.namespace)
            except Exception:  # the API itself unreachable for a moment: try again
                continue
            if p.status.reason == "Evicted":
                held.why = f"pod {pod} was evicted from {self.spec.node}: {p.status.message}"
                self._delete(held.name)
                return
            if ready:
                not_ready_since = None
                continue
            not_ready_since = not_ready_since or time.monotonic()
            if time.monotonic() - not_ready_since > NOT_READY_SECONDS:
                held.why = f"node {self.spec.node} is not Ready (its kubelet stopped answering)"
                self._delete(held.name)
                return

    def _exit_code(self, core: Any, held: _Job, pod: str, stop: threading.Event) -> int:
        """The workload's exit code once its container has ended (1 where something outside ended it)."""
        for _ in range(int(30 / POLL_SECONDS)):
            if held.why is not None or stop.is_set():
                return 1
            try:
                p = core.read_namespaced_pod(pod, self.spec.namespace)
            except Exception:
                return 1
            for s in p.status.container_statuses or []:
                if s.state and s.state.terminated:
                    return int(s.state.terminated.exit_code)
            time.sleep(POLL_SECONDS)
        held.why = held.why or f"pod {pod}'s container did not end after its log did"
        return 1

    def _let_go(self, held: _Job, reusable: bool) -> None:
        """The Job and its pod deleted, whatever happened."""
        self._delete(held.name)

    def _delete(self, name: str) -> None:
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        try:
            client.BatchV1Api(self.api).delete_namespaced_job(
                name, self.spec.namespace, propagation_policy="Background", grace_period_seconds=0
            )
        except ApiException as exc:
            if exc.status != 404:
                raise TargetError(f"could not delete Job {name}: {_reason(exc)}") from None


def node_ready(node: Any) -> bool:
    """Whether a core/v1 Node's Ready condition is True."""
    return any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))


def _reason(exc: Any) -> str:
    """An ApiException's message, in one line."""
    import json

    try:
        return str(json.loads(exc.body).get("message", exc.reason))
    except (TypeError, ValueError):
        return str(exc.reason)
