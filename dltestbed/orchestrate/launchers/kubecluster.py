"""The Kubernetes launcher's side of the cluster, through the official client: the kubeconfig read, the Ready
nodes that take pods with the images they hold, the workload image's name on each, and every Job and pod of a
bench deleted at its end."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from dltestbed.errors import ConfigError
from dltestbed.transport.kubeapi import REQUEST_SECONDS
from dltestbed.transport.podspec import MANAGED_BY, bench_label, node_ready, reason_of, selector

LISTED = 50  # the images a kubelet lists in its node's status at most (nodeStatusMaxImages' default), largest first
# how a runtime names an image it was given without a registry: an archive of Podman's says localhost/, one of
# Docker's the name alone, which containerd reads as Docker Hub's library
UNQUALIFIED = ("", "localhost/", "docker.io/library/")
# how long the bench waits, at its end, for its pods to be gone: about 20 s on the lab's nodes, past 60 s once with
# both cores busy beside them (a kubelet that kills and cleans up a pod on a loaded node is slow)
GONE_SECONDS = 120.0


class Node(NamedTuple):
    """A Ready node that takes pods: its name, internal address, allocatable resources and the images it holds."""

    name: str
    address: str
    allocatable: dict[str, str]
    images: frozenset[str]
    listed_all: bool  # False when the kubelet's list of them was cut at LISTED


def ready_nodes(api: Any) -> list[Node]:
    """The cluster's nodes that are Ready and take pods (no NoSchedule or NoExecute taint), by name; one line when
    the cluster does not answer."""
    from kubernetes import client  # the `kubernetes` extra (client_for checked it is here)

    try:
        items: list[Any] = client.CoreV1Api(api).list_node(_request_timeout=15).items
    except Exception as exc:
        raise ConfigError(f"--launcher kubernetes: the cluster does not answer: {exc}") from None
    out = []
    for n in sorted(items, key=lambda n: n.metadata.name):
        taints = [t for t in (n.spec.taints or []) if t.effect in ("NoSchedule", "NoExecute")]
        if not node_ready(n) or taints or n.spec.unschedulable:
            continue
        addr = next((a.address for a in n.status.addresses or [] if a.type == "InternalIP"), n.metadata.name)
        images = [name for i in n.status.images or [] for name in i.names or []]
        listed = len(n.status.images or [])
        out.append(Node(n.metadata.name, addr, dict(n.status.allocatable or {}), frozenset(images), listed < LISTED))
    return out


def held_as(images: frozenset[str], ref: str) -> str | None:
    """The name under which a node holds `ref` (an image named without a registry is held under the name the
    runtime that made its archive gave it: UNQUALIFIED), or None. Pure."""
    first = ref.split("/", 1)[0]
    qualified = "/" in ref and ("." in first or ":" in first or first == "localhost")
    for prefix in ("",) if qualified else UNQUALIFIED:
        if prefix + ref in images:
            return prefix + ref
    return None


def held_images(nodes: Sequence[Node], ref: str) -> dict[str, str]:
    """Each node's name for the workload image `ref`; one line naming the nodes that do not hold it (no registry is
    asked for dltestbed's own image). A node whose kubelet listed only its LISTED largest images may hold it
    unlisted: it is asked for `ref` as it is. Pure."""
    out = {n.name: held_as(n.images, ref) or ("" if n.listed_all else ref) for n in nodes}
    lacking = [name for name, held in out.items() if not held]
    if lacking:
        raise ConfigError(
            f"--launcher kubernetes: node(s) {', '.join(lacking)} hold no image {ref}, the workload image of this "
            "build (no registry has it): load it into each node's runtime (an archive of `dltestbed image build "
            "--runtime podman`'s image, e.g. `ctr -n k8s.io images import`; a kubelet lists an image it was just "
            "given within about a minute), or give --k8s-image"
        )
    return out


def delete_jobs(api: Any, namespace: str, bench_id: str, wait_s: float = GONE_SECONDS) -> str | None:
    """Every Job of the bench and its pods, whatever state they are in, waited for until none is left (at most
    wait_s): a pod on a node that is not Ready is never confirmed gone by its kubelet, so it is removed from the
    API at once (its containers end when that node's kubelet comes back and finds it gone). What is left, in
    words (None: nothing)."""
    from kubernetes import client  # the `kubernetes` extra (client_for checked it is here)

    ours = selector({**MANAGED_BY, **bench_label(bench_id)})
    batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
    with contextlib.suppress(Exception):  # the runs' own deletes came first; this is the net under them
        batch.delete_collection_namespaced_job(
            namespace, label_selector=ours, propagation_policy="Background", _request_timeout=REQUEST_SECONDS
        )
    deadline = time.monotonic() + wait_s
    while True:
        try:
            pods: list[Any] = core.list_namespaced_pod(
                namespace, label_selector=ours, _request_timeout=REQUEST_SECONDS
            ).items
            nodes: list[Any] = core.list_node(_request_timeout=REQUEST_SECONDS).items
        except Exception as exc:  # the cluster gone: nothing more can be done from here
            return f"the cluster did not answer ({reason_of(exc)}): the bench's Jobs and pods may be left"
        if not pods:
            return None
        if time.monotonic() > deadline:
            names = ", ".join(str(p.metadata.name) for p in pods)
            return f"pod(s) {names} of this bench still there after {wait_s:.0f} s"
        ready = {n.metadata.name for n in nodes if node_ready(n)}
        for p in pods:
            force = p.spec.node_name not in ready
            if p.metadata.deletion_timestamp is None or force:
                with contextlib.suppress(Exception):  # gone meanwhile
                    core.delete_namespaced_pod(
                        p.metadata.name,
                        namespace,
                        grace_period_seconds=0 if force else None,
                        _request_timeout=REQUEST_SECONDS,
                    )
        time.sleep(0.5)


def free_on(api: Any, nodes: Sequence[Node]) -> dict[str, dict[str, str]]:
    """Each node's allocatable CPU and memory less what its pods that have not ended request (DaemonSets, system
    pods: what a Guaranteed pod's share must leave them), as quantities; one line when the cluster does not
    answer, or a node has none left."""
    from kubernetes import client  # the `kubernetes` extra (client_for checked it is here)
    from kubernetes.utils.quantity import parse_quantity

    try:
        pods: list[Any] = (
            client.CoreV1Api(api)
            .list_pod_for_all_namespaces(
                field_selector="status.phase!=Succeeded,status.phase!=Failed", _request_timeout=REQUEST_SECONDS
            )
            .items
        )
    except Exception as exc:
        said = reason_of(exc)
        raise ConfigError(f"--k8s-qos guaranteed: the cluster does not say what its pods request: {said}") from None
    out = {}
    for n in nodes:
        mine = [p for p in pods if p.spec.node_name == n.name]
        free = {}
        for what in ("cpu", "memory"):
            used = sum(
                (parse_quantity(_requests(c).get(what, "0")) for p in mine for c in p.spec.containers),
                start=parse_quantity("0"),
            )
            left = parse_quantity(n.allocatable.get(what, "0")) - used
            if left <= 0:
                raise ConfigError(
                    f"--k8s-qos guaranteed: node {n.name} has no {what} left to give (its pods request it all)"
                )
            free[what] = str(left)
        out[n.name] = {**n.allocatable, **free}
    return out


def _requests(container: Any) -> dict[str, str]:
    """A pod's container's requests ({} where it has none)."""
    return dict((container.resources.requests if container.resources else None) or {})
