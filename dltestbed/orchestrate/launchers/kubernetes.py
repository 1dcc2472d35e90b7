"""The Kubernetes launcher (`bench --launcher kubernetes`): each run a batch/v1 Job pinned to its node, through the
official client and the kubeconfig's credentials. bm runs in the node's own root on its network, cbm in the
workload image on the pod network (targets/kubernetes.py). The nodes are the cluster's Ready ones that take pods
(`--nodes` of them, by name); every Job of the bench is deleted when it ends, Ctrl-C included."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from dltestbed.choices import ONE
from dltestbed.errors import ConfigError
from dltestbed.inventory import Host, Inventory
from dltestbed.orchestrate import gpus, prepare, scenarios
from dltestbed.orchestrate.launchers.base import Say, site_options
from dltestbed.orchestrate.launchers.kubecluster import (
    Node,
    delete_jobs,
    free_on,
    held_images,
    ready_nodes,
)
from dltestbed.orchestrate.launchers.slurm import interpreters, load
from dltestbed.requests.bench import BenchRequest
from dltestbed.requests.launch import KubernetesOptions
from dltestbed.shield import shielded
from dltestbed.targets import Site
from dltestbed.targets.container import VENV_PYTHON
from dltestbed.targets.kubernetes import Cluster, KubePlace
from dltestbed.transport.kubeapi import KUBECONFIG_VAR, client_for
from dltestbed.transport.podspec import GPU, QOS, bench_label, selector

INVENTORY_VARS = {
    "kubeconfig": KUBECONFIG_VAR,
    "namespace": "dltestbed_k8s_namespace",
    "image": "dltestbed_k8s_image",
}
KINDS = ("bm", "cbm")


@dataclass
class Kubernetes:
    """A Kubernetes cluster's nodes, through its API: a Job per run, pinned to its node."""

    name: ClassVar[str] = "kubernetes"
    request: BenchRequest
    count: int
    _opts: KubernetesOptions = field(default_factory=KubernetesOptions)
    _inventory: Inventory | None = None
    _api: Any = None
    _nodes: list[Node] = field(default_factory=list)
    _images: dict[str, str] = field(default_factory=dict)  # node → the workload image's name there (the default's)

    @classmethod
    def chosen(cls, request: BenchRequest) -> Kubernetes:
        """The launcher for a request that chose it, its options checked first (the node count among them)."""
        return cls(request, check_options(request))

    @staticmethod
    def given(request: BenchRequest) -> list[str]:
        """The Kubernetes options the request gave (each goes with --launcher kubernetes only)."""
        return request.kubernetes.given()

    @staticmethod
    def on_this_machine(request: BenchRequest) -> bool:
        """The nodes are the cluster's: never this machine."""
        return False

    def hosts(self) -> list[Host | None]:
        return [None] * self.count

    def auto_kinds(self, scenario: str, runtime: str | None, frameworks: Sequence[str] = ()) -> prepare.AutoKinds:
        return prepare.AutoKinds(KINDS, False, "--launcher kubernetes: bm and cbm on the cluster's nodes")

    def check(self, setup: prepare.Setup) -> None:
        """The options over the inventory's, the kubeconfig read, and the cluster asked for its nodes (one line
        when it does not answer, or has fewer Ready nodes than the bench needs)."""
        inv = load(self.request.where.inventory, self.request.where.groups)
        self._inventory = inv
        self._opts = from_inventory(self.request.kubernetes, inv) if inv is not None else self.request.kubernetes
        self._api = client_for(self._opts.kubeconfig, "--launcher kubernetes")
        self._nodes = ready_nodes(self._api)
        if len(self._nodes) < self.count:
            have = ", ".join(n.name for n in self._nodes) or "none"
            raise ConfigError(
                f"--launcher kubernetes: the bench needs {self.count} Ready node(s) that take pods; the cluster has "
                f"{len(self._nodes)} ({have})"
            )
        self._nodes = self._nodes[: self.count]
        if not self._opts.image:
            self._images = held_images(self._nodes, default_image(self.request))

    def seen_gpus(self, kinds: Sequence[str], local: gpus.Local) -> list[gpus.Seen]:
        out = []
        for node in self._nodes:
            n = int(node.allocatable.get(GPU, "0") or 0)
            for k in dict.fromkeys(kinds):
                out.append(gpus.Seen(f"{k}:{node.name}", n > 0, f"node {node.name} offers {n} {GPU}"))
        return out

    @contextmanager
    def sites(self, bench_id: str, say: Say) -> Iterator[list[Site]]:
        python = interpreters(self.request.launch.venv, self._inventory)
        given = self._opts.image or ""
        cluster = Cluster(
            self._api,
            self._opts.namespace or "default",
            given,
            VENV_PYTHON,
            labels=parse_labels(self._opts.labels),
            bench_id=bench_id,
            # dltestbed's own image is no registry's: each node runs the copy it holds
            pull="IfNotPresent" if given else "Never",
        )
        shown = given or " / ".join(sorted(set(self._images.values())))
        say(
            f"Kubernetes: namespace {cluster.namespace}, nodes {', '.join(n.name for n in self._nodes)}; "
            f"the pods' image {shown} (each run a Job, deleted when it ends)"
        )
        free = free_on(self._api, self._nodes) if guaranteed(self.request) else {}
        places = [
            KubePlace(
                replace(
                    cluster,
                    image=given or self._images[n.name],
                    requests=requests_of(self.request, free.get(n.name, n.allocatable)),
                ),
                n.name,
                n.address,
                python(n.name),
            )
            for n in self._nodes
        ]
        user = self.request.container.as_user
        try:
            yield [Site(placed=p, as_user=user) for p in places]
        finally:
            with shielded():  # a second Ctrl-C does not keep a Job
                left = delete_jobs(self._api, cluster.namespace, bench_id)
            if left:
                shown = selector(bench_label(bench_id))
                say(f"warning: Kubernetes: {left} (kubectl -n {cluster.namespace} get jobs,pods -l {shown})")

    @property
    def waiting_for(self) -> str:
        return "asking the Kubernetes cluster for its nodes: nothing was started"


def check_options(request: BenchRequest) -> int:
    """With --launcher kubernetes: the node count the bench asks for; one line for a bad combination."""
    where, nodes = request.where, request.launch.nodes
    if nodes is not None and nodes < 1:
        raise ConfigError(f"--nodes: at least 1 (got {nodes})")
    if request.launch.venv is not None and not request.launch.venv.startswith("/"):
        raise ConfigError(f"--venv {request.launch.venv}: an absolute path on the nodes")
    if where.limit:
        raise ConfigError("--limit picks inventory hosts; under --launcher kubernetes the nodes are the cluster's")
    other = [k for k in where.targets if k != "auto" and k not in KINDS]
    if other:
        raise ConfigError(f"--launcher kubernetes runs bm and cbm on the nodes (in pods), not {other[0]}")
    if request.container.runtime is not None:
        raise ConfigError(f"--runtime {request.container.runtime}: under --launcher kubernetes cbm is a pod")
    if request.container.as_user is not None:
        raise ConfigError("--as-user: not under --launcher kubernetes (a pod's user is its image's)")
    if request.workloads.data == "real":
        raise ConfigError("--launcher kubernetes --data real: not yet (synthetic data runs)")
    if request.workloads.gpus != ONE:
        raise ConfigError(f"--launcher kubernetes --gpus {request.workloads.gpus}: not yet (one GPU a pod)")
    parse_labels(request.kubernetes.labels)
    if request.kubernetes.qos is not None and request.kubernetes.qos not in QOS:
        raise ConfigError(f"--k8s-qos {request.kubernetes.qos}: give {' or '.join(QOS)}")
    sc = scenarios.scenario(request.scenario.scenario)
    if sc.one_host and (nodes or 1) > 1:
        raise ConfigError(f"scenario {request.scenario.scenario} runs on one node; --nodes {nodes} given")
    return nodes if nodes is not None else sc.machines(request.scenario.workers)


def parse_labels(items: Sequence[str]) -> dict[str, str]:
    """--k8s-label KEY=VALUE items; one line for one without both."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--k8s-label: KEY=VALUE, e.g. team=ops (got {item!r})")
        out[key] = value
    return out


def from_inventory(opts: KubernetesOptions, inv: Inventory) -> KubernetesOptions:
    """The options the command line left out, from the inventory's dltestbed_kubeconfig and dltestbed_k8s_*
    (a site's setting, for group `all`; hosts that disagree are one line)."""
    return site_options(opts, inv, INVENTORY_VARS)


def guaranteed(request: BenchRequest) -> bool:
    """Whether the bench's pods are to be Guaranteed (--k8s-qos guaranteed): each its share as requests and limits."""
    return QOS.get(request.kubernetes.qos or "") == "Guaranteed"


def requests_of(request: BenchRequest, allocatable: dict[str, str]) -> dict[str, str]:
    """A pod's requests on a node (its limits too: podspec.LIMITED): a GPU (the device plugin's resource) where
    the node offers one and the bench does not run on CPUs alone (--device gpu on a node without one is the
    scheduler's to refuse, in one line); with --k8s-qos guaranteed, its share of `allocatable`'s CPU and memory
    (what the pods already on the node left: free_on), split evenly between the workloads the scenario runs on it
    at once (shared: 2)."""
    has = int(allocatable.get(GPU, "0") or 0) > 0
    wants = request.where.device == "gpu" or (request.where.device == "auto" and has)
    out = {GPU: "1"} if wants else {}
    if guaranteed(request):
        from kubernetes.utils.quantity import parse_quantity  # the `kubernetes` extra (client_for checked it)

        share = scenarios.scenario(request.scenario.scenario).at_once(request.scenario)
        cpu = int(parse_quantity(allocatable.get("cpu", "0")) * 1000) // share
        memory = int(parse_quantity(allocatable.get("memory", "0"))) // share
        out |= {"cpu": f"{cpu}m", "memory": str(memory)}
    return out


def default_image(request: BenchRequest) -> str:
    """The workload image's name as `image build` tags it for the bench's frameworks (the nodes hold it by that
    name: a registry's copy, or an archive loaded on each); one line when no wheelhouse here names it."""
    # the image's name comes from provision's wheelhouse: read when no --k8s-image names it
    from dltestbed.config import DEFAULT_FRAMEWORK
    from dltestbed.provision import image, localfacts, wheelhouse

    frameworks = tuple(request.workloads.frameworks or (DEFAULT_FRAMEWORK,))
    house = wheelhouse.cached(localfacts.flavor(), frameworks)
    if house is None:
        raise ConfigError(
            "--launcher kubernetes: no workload image of this dltestbed build is known here; give --k8s-image "
            "(the image the nodes hold)"
        )
    return image.tag_of(house)
