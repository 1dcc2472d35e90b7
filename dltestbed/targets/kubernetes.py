"""Bare metal and a container on a Kubernetes node: each command a Job pinned to the node (transport/pod.py).

bm: a pod on the node's network (hostNetwork) that runs the workload in the node's own root (its / mounted at
/host, the command run under chroot), so the node's dltestbed venv, libraries and data are the workload's, as on
bare metal; Kubernetes gives the pod its cgroup and its CPU, memory and GPU requests. cbm: the workload image's pod
on the pod network (on the lab's cluster, a VXLAN overlay), the bench's data folders mounted at the same path."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Unpack

from dltestbed.targets.base import INTERRUPT, Abort, CommandResult, RunOptions, Target, ended_outside
from dltestbed.targets.rendezvous import Rendezvous
from dltestbed.transport.pod import PodJob
from dltestbed.transport.podspec import PodSpec, bench_label, qos_class


@dataclass(frozen=True)
class Cluster:
    """How the bench reaches its cluster: the client, the namespace, the workload image as the nodes know it,
    the labels its Jobs carry, and each pod's requests."""

    api: Any  # kubernetes.client.ApiClient
    namespace: str
    image: str
    image_python: str  # the interpreter in the image that has dltestbed
    labels: Mapping[str, str] = field(default_factory=dict)
    requests: Mapping[str, str] = field(default_factory=dict)
    bench_id: str = ""
    pull: str = "IfNotPresent"  # the pods' imagePullPolicy (Never: the node's own copy of dltestbed's image)


@dataclass(frozen=True)
class KubePlace:
    """A node the bench runs on (a targets.Placement): its name and address, and the interpreter on it that has
    dltestbed (bare metal's)."""

    cluster: Cluster
    node: str
    address: str
    python: str

    @property
    def label(self) -> str:
        return f"Kubernetes node {self.node}"

    def bare(self, data_dir: str | None, compile_cache: str | None) -> Target:
        return PodTarget(self, "bm", data_dir, compile_cache)

    def container(self, data_dir: str | None, compile_cache: str | None) -> Target:
        return PodContainer(self, "cbm", data_dir, compile_cache)


class PodTarget:
    """A workload in a pod on one node, as the scheduler placed it (bm: the node's own root on its network; cbm:
    the image's, on the pod network)."""

    remote = True
    inner: Target | None = None

    def __init__(self, place: KubePlace, kind: str, data_dir: str | None, compile_cache: str | None) -> None:
        c = place.cluster
        self.place, self.kind = place, kind
        self.name = self.host = self.machine = place.node
        self.data_dir, self.compile_cache = data_dir, compile_cache
        bare = kind == "bm"
        self.python = place.python if bare else c.image_python
        self.peer_address = place.address  # cbm's own is the pod's, known once it runs (PodContainer)
        mounts = () if bare else tuple(p for p in (data_dir, compile_cache) if p)
        spec = PodSpec(
            c.namespace,
            place.node,
            c.image,
            host_network=bare,
            host_root=bare,
            mounts=mounts,
            requests=dict(c.requests),
            pull=c.pull,
            labels={**c.labels, "dltestbed.io/kind": kind, **bench_label(c.bench_id)},
        )
        self._jobs = PodJob(c.api, spec, kind)

    def run(self, argv: Sequence[str], **options: Unpack[RunOptions]) -> CommandResult:
        """Run argv as a Job on the node; a run something outside ended (eviction, a node not Ready, never
        scheduled) says so in the result and the run's log."""
        result = self._jobs.run(argv, **self._options(options))
        why = self._jobs.why
        return result if why is None else ended_outside(result, why, options)

    def _options(self, options: RunOptions) -> RunOptions:
        return options

    def abort(self, why: Abort = INTERRUPT) -> None:
        """Delete the Job in progress (its pod with it), or the one being started."""
        self._jobs.abort(why)

    def confine(self, gpu: str, cpus: str | None) -> None:
        """Nothing to tell: the pod's GPU is the scheduler's (nvidia.com/gpu), the runner pins the rest."""

    def fingerprint(self) -> Mapping[str, str]:
        """The layer facts: bare metal or a container, placed by Kubernetes."""
        c = self.place.cluster
        return {
            "target_kind": self.kind,
            "target_host": self.name,
            "target_address": self.place.address,
            "transport": "kubernetes",
            "k8s_namespace": c.namespace,
            "k8s_network": "host" if self.kind == "bm" else "pod",
            "k8s_qos": qos_class(c.requests),
            **({"container_image": c.image} if self.kind == "cbm" else {}),
        }


class PodContainer(PodTarget):
    """cbm: the image's pod on the pod network, whose address is known only once it runs: in a distributed job (a
    LatePeer), its workload waits in the pod for its peers' addresses, given at the job's rendezvous."""

    def __init__(self, place: KubePlace, kind: str, data_dir: str | None, compile_cache: str | None) -> None:
        super().__init__(place, kind, data_dir, compile_cache)
        self._seat: tuple[Rendezvous, int] | None = None

    def seat(self, rendezvous: Rendezvous, index: int) -> None:
        self._seat = (rendezvous, index)

    def _options(self, options: RunOptions) -> RunOptions:
        if self._seat is None:
            return options
        (rendezvous, index), self._seat = self._seat, None  # the job's workload alone: a seat is taken once
        return {**options, "late_env": lambda address, stopped: rendezvous.env(index, address, stopped)}
