"""Commands as Kubernetes Jobs: each command a batch/v1 Job of one pod pinned to its node, its log followed live,
the Job deleted when the command is over (whatever happened), through the official client. Only APIs every current
cluster serves unchanged: batch/v1 Job, core/v1 Pod and Node, pod logs.

The pod's stdout is the command's; its stderr comes back in the same log, each line marked (podspec.STDERR) by a
shell around the command, and goes to the run's log. The pod holds a stdin open that is never written (as a local
command's), so a workload that watches its stdin runs on; what stops it when dltestbed is gone is the Job's
deadline. A pod the scheduler cannot place, an evicted pod, and a node that stops being Ready each end the command
with one line (`why`), which the target gives the run as what ended it."""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from dltestbed.errors import TargetError
from dltestbed.transport.base import LateEnv, RunOptions
from dltestbed.transport.command import Ended, Stderr, Streamed
from dltestbed.transport.kubeapi import REQUEST_SECONDS, exec_in
from dltestbed.transport.podspec import STDERR, PodSpec, job_body, late_env_argv, log_lines, not_ready, reason_of

UNSCHEDULED_SECONDS = 120.0  # a pod not placed by then ends the command
NOT_READY_SECONDS = 20.0  # a node not Ready that long ends the command on it
POLL_SECONDS = 1.0
CONNECT_SECONDS = 15.0  # to open a pod's log
QUIET_SECONDS = 300.0  # a log with no byte for this long is opened again (the read's own timeout)
CANNOT_START = (
    "ErrImageNeverPull",
    "ErrImagePull",
    "ImagePullBackOff",
    "CreateContainerConfigError",
    "CreateContainerError",
)


@dataclass
class _Job:
    """A command's Job while it runs: its name and uid (its pods carry it), what outside ended it, and the log's
    open response (what `cut` shuts, so that a read blocked on a node that stopped answering returns)."""

    name: str
    uid: str
    created: datetime | None = None  # by the cluster's clock, as it said when it took the Job
    created_here: float = field(default_factory=time.monotonic)  # then, by this machine's
    why: str | None = None
    log: Any = None  # urllib3's HTTPResponse of the followed log

    def cluster_now(self) -> datetime:
        """Now by the cluster's clock (its time at the Job's creation, plus what has passed here since): this
        machine's wall clock may be off."""
        if self.created is None:
            return datetime.now(UTC)
        return self.created + timedelta(seconds=time.monotonic() - self.created_here)

    def cut(self) -> None:
        """The log's connection shut for reading, from another thread: its blocked read returns now (urllib3 2.3
        and later; before, the read's own timeout, QUIET_SECONDS, ends it)."""
        resp = self.log
        if resp is not None:
            with contextlib.suppress(Exception):  # already closed, or an urllib3 without shutdown
                resp.shutdown()


class _Readiness:
    """Whether a Job's node has been not Ready longer than NOT_READY_SECONDS: by its Ready condition's last
    transition (on the cluster's clock) or by what this command saw, the longer (a node lost before the Job was made
    ends it at once)."""

    def __init__(self, job: _Job) -> None:
        self._job = job
        self._since: float | None = None

    def lost(self, node: Any) -> str | None:
        """Why the node counts as lost, else None."""
        seen = not_ready(node, self._job.cluster_now())
        if seen is None:
            self._since = None
            return None
        self._since = self._since or time.monotonic()
        held, why = seen
        return why if max(held, time.monotonic() - self._since) > NOT_READY_SECONDS else None


class PodJob(Streamed[_Job]):
    """Runs each command as a Job on one node, one at a time; `abort` deletes the Job in progress."""

    def __init__(self, api: Any, spec: PodSpec, kind: str) -> None:
        super().__init__()
        self.api = api  # a kubernetes.client.ApiClient
        self.spec = spec
        self.prefix = f"dltestbed-{kind}-{secrets.token_hex(4)}"  # this target's Jobs: <prefix>-<n>, a DNS label
        self.why: str | None = None  # the last command's outside end, for the target
        self.pod_ip: str | None = None  # the last pod's address (the pod network's)
        self._n = 0

    def _start(self, argv: Sequence[str], options: RunOptions) -> _Job:
        from kubernetes import client  # the `kubernetes` extra: only a bench on a cluster imports it

        self._n += 1
        name = f"{self.prefix}-{self._n}"
        self.why = self.pod_ip = None
        late = options.get("late_env") is not None
        body: Any = job_body(name, self.spec, argv, dict(options.get("env") or {}), late)  # a dict is sent as is
        try:
            made: Any = client.BatchV1Api(self.api).create_namespaced_job(
                self.spec.namespace, body, _request_timeout=REQUEST_SECONDS
            )
        except Exception as exc:  # the API's refusal, or no answer
            raise TargetError(f"Kubernetes did not take Job {name} for {self.spec.node}: {reason_of(exc)}") from None
        return _Job(name, str(made.metadata.uid), made.metadata.creation_timestamp)

    def _follow(self, held: _Job, argv: Sequence[str], options: RunOptions, err: Stderr) -> Ended:
        from kubernetes import client  # the `kubernetes` extra: only a bench on a cluster imports it

        core = client.CoreV1Api(self.api)
        stop = threading.Event()

        def end() -> None:
            stop.set()
            held.cut()
            with contextlib.suppress(TargetError):
                self._delete(held.name)

        self._abort.attach(end)
        timeout = options.get("timeout")
        deadline = time.monotonic() + timeout if timeout else None
        timed_out = threading.Event()
        try:
            pod = self._placed(core, held, stop, deadline)
            if pod is None:
                return Ended(124, timed_out=True) if deadline and time.monotonic() > deadline else Ended(1)
            guard = threading.Thread(target=self._guard, args=(core, held, pod, stop, deadline, timed_out), daemon=True)
            guard.start()
            late_env = options.get("late_env")
            if late_env is not None and not self._late(core, held, pod, late_env, stop):
                return Ended(124, timed_out=True) if timed_out.is_set() else Ended(1)
            self._stream(core, held, pod, stop, options.get("on_line"), err)
            code = self._exit_code(core, held, pod, stop)
        finally:
            stop.set()
            self.why = held.why
        if timed_out.is_set():
            return Ended(124, timed_out=True)
        return Ended(code)

    def _stream(
        self, core: Any, held: _Job, pod: str, stop: threading.Event, on_line: Any, err: Stderr, tries: int = 5
    ) -> None:
        """The pod's log, a line at a time, to on_line and the run's log; where the stream breaks off while the
        container still runs (the connection to the kubelet lost a moment), it is opened again and the lines
        already seen skipped. A log quiet for QUIET_SECONDS is opened again too, without counting as a break (a
        long step prints nothing); the guard cuts it when the node or the pod is lost."""
        seen = 0
        breaks = 0
        why: str | None = None
        while breaks < tries:
            n = 0
            try:
                held.log = core.read_namespaced_pod_log(
                    pod,
                    self.spec.namespace,
                    follow=True,
                    _preload_content=False,
                    _request_timeout=(CONNECT_SECONDS, QUIET_SECONDS),
                )
                if stop.is_set() or held.why is not None:
                    return  # cut while it was being opened (the finally shuts it)
                for line in log_lines(held.log.stream(amt=None, decode_content=False)):
                    n += 1
                    if n <= seen:
                        continue
                    seen = n
                    if line.startswith(STDERR):
                        err.line(line[len(STDERR) :])
                    elif on_line is not None:
                        on_line(line)
            except Exception as exc:  # the stream broken, cut or quiet: the node or the pod gone (the guard says why)
                if stop.is_set() or held.why is not None:
                    return
                if not _timed_out(exc):
                    breaks += 1
                    why = f"the log of pod {pod} broke off: {reason_of(exc)}"
            else:
                return  # the log ended: the container's end is _exit_code's to wait for (its status may lag)
            finally:
                held.cut()
            if stop.is_set() or held.why is not None or self._terminated(core, pod) is not None:
                return
            time.sleep(POLL_SECONDS)
        held.why = held.why or why or f"the log of pod {pod} ended while its container ran on"

    def _late(self, core: Any, held: _Job, pod: str, late_env: LateEnv, stop: threading.Event) -> bool:
        """The pod's late environment (its command waits for it), once its address is known: asked for with that
        address, then written into the pod; False when the command was stopped first (the abort says why) or the
        node or pod was lost meanwhile (the guard says why), or the peers or the write failed (why). A container
        that ended meanwhile is left to its log and exit code."""
        if not self.pod_ip:
            held.why = f"pod {pod} on {self.spec.node} has no address"
            return False
        try:
            env = late_env(self.pod_ip, lambda: stop.is_set() or held.why is not None)
            if env is None:
                return False
            exec_in(self.api, self.spec.namespace, pod, late_env_argv(env))
        except TargetError as exc:
            if self._terminated(core, pod) is not None:
                return True  # its container ended first: its log and exit code say why
            held.why = str(exc)
            return False
        return True

    def _placed(self, core: Any, held: _Job, stop: threading.Event, deadline: float | None) -> str | None:
        """The Job's pod once it runs (or has ended); None, with why, when none is placed in time, it cannot start,
        or its node is lost (not Ready for NOT_READY_SECONDS: a run after the node was lost ends at once)."""
        since, readiness = time.monotonic(), _Readiness(held)
        while not stop.is_set():
            if deadline is not None and time.monotonic() > deadline:
                held.why = f"Job {held.name} did not start on {self.spec.node} within the run's time limit"
                return None
            unsaid = f"Kubernetes did not say where Job {held.name} is"
            try:
                pods = core.list_namespaced_pod(
                    self.spec.namespace, label_selector=f"controller-uid={held.uid}", _request_timeout=REQUEST_SECONDS
                ).items
            except Exception as exc:
                raise TargetError(f"{unsaid}: {reason_of(exc)}") from None
            try:
                node = core.read_node(self.spec.node, _request_timeout=REQUEST_SECONDS)
            except Exception as exc:
                if getattr(exc, "status", None) != 404:
                    raise TargetError(f"{unsaid}: {reason_of(exc)}") from None
                held.why = f"node {self.spec.node} is not in the cluster (any more)"
                return None
            held.why = readiness.lost(node)
            if held.why is not None:  # its node lost: no pod will run there
                return None
            waited = time.monotonic() - since
            if not pods and waited > UNSCHEDULED_SECONDS:
                held.why = (
                    f"Job {held.name} made no pod in {UNSCHEDULED_SECONDS:.0f} s (the namespace's policy or quota?)"
                )
                return None
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
                if unplaced and waited > UNSCHEDULED_SECONDS:
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
        readiness = _Readiness(held)
        while not stop.wait(POLL_SECONDS):
            if deadline is not None and time.monotonic() > deadline:
                timed_out.set()
                stop.set()  # before the cut: the stream reads it as the end, not as a log broken off
                held.cut()
                self._quietly_delete(held.name)
                return
            try:
                node = core.read_node(self.spec.node, _request_timeout=REQUEST_SECONDS)
                p = core.read_namespaced_pod(pod, self.spec.namespace, _request_timeout=REQUEST_SECONDS)
            except Exception:  # the API itself unreachable for a moment: try again
                continue
            if p.status.reason == "Evicted":
                held.why = f"pod {pod} was evicted from {self.spec.node}: {p.status.message}"
                held.cut()
                self._quietly_delete(held.name)
                return
            lost = readiness.lost(node)
            if lost is not None:
                held.why = lost
                held.cut()  # the log's read waits on that kubelet
                self._quietly_delete(held.name)
                return

    def _terminated(self, core: Any, pod: str) -> int | None:
        """The container's exit code once it has ended; None while it runs (or cannot be read)."""
        try:
            p = core.read_namespaced_pod(pod, self.spec.namespace, _request_timeout=REQUEST_SECONDS)
        except Exception:
            return None
        for s in p.status.container_statuses or []:
            if s.state and s.state.terminated:
                return int(s.state.terminated.exit_code)
        return None

    def _exit_code(self, core: Any, held: _Job, pod: str, stop: threading.Event) -> int:
        """The workload's exit code once its container has ended (1 where something outside ended it)."""
        for _ in range(int(30 / POLL_SECONDS)):
            if held.why is not None or stop.is_set():
                return 1
            code = self._terminated(core, pod)
            if code is not None:
                return code
            time.sleep(POLL_SECONDS)
        held.why = held.why or f"pod {pod}'s container did not end after its log did"
        return 1

    def _let_go(self, held: _Job, reusable: bool) -> None:
        """The Job and its pod deleted, whatever happened."""
        self._delete(held.name)

    def _quietly_delete(self, name: str) -> None:
        with contextlib.suppress(TargetError):
            self._delete(name)

    def _delete(self, name: str) -> None:
        from kubernetes import client  # the `kubernetes` extra: only a bench on a cluster imports it

        try:
            client.BatchV1Api(self.api).delete_namespaced_job(
                name,
                self.spec.namespace,
                propagation_policy="Background",
                grace_period_seconds=0,
                _request_timeout=REQUEST_SECONDS,
            )
        except Exception as exc:
            if getattr(exc, "status", None) != 404:
                raise TargetError(f"could not delete Job {name}: {reason_of(exc)}") from None


def _timed_out(exc: Exception) -> bool:
    """Whether a read ended for its timeout (urllib3's ReadTimeoutError, or the socket's own)."""
    return isinstance(exc, TimeoutError) or type(exc).__name__ in ("ReadTimeoutError", "TimeoutError")
