"""The Kubernetes launcher's pure parts: its options checked, a run's Job as the cluster receives it, the pod's
command that marks stderr. The launcher on a real cluster: tests/lab/test_kubernetes.py."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from dltestbed.errors import ConfigError
from dltestbed.orchestrate.launchers import Kubernetes, launcher_for
from dltestbed.orchestrate.launchers.kubecluster import LISTED, Node, held_as, held_images
from dltestbed.orchestrate.launchers.kubernetes import check_options, parse_labels
from dltestbed.requests.bench import BenchRequest, Container, Options, Where, Workloads
from dltestbed.requests.launch import KubernetesOptions, Launch
from dltestbed.transport import pod
from dltestbed.transport.pod import _Job, _Readiness
from dltestbed.transport.podspec import STDERR, PodSpec, job_body, log_lines, not_ready, wrapped

K8S = BenchRequest(launch=Launch("kubernetes"))


def test_the_pods_command_marks_stderr_and_keeps_the_exit_status() -> None:
    argv = wrapped(["sh", "-c", "echo out1; echo 'err 1' >&2; echo out2; exit 3"], host_root=False)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert done.returncode == 3 and done.stderr == ""
    assert sorted(done.stdout.splitlines()) == sorted(["out1", "out2", f"{STDERR}err 1"])
    assert wrapped(["true"], host_root=True)[:3] == ["/usr/sbin/chroot", "/host", "/bin/bash"]


def test_bare_metals_job_runs_in_the_nodes_root_on_its_network() -> None:
    spec = PodSpec("ns", "n1", "img:1", host_network=True, host_root=True, labels={"team": "ops"})
    job = job_body("dltestbed-x-bm-n1-1", spec, ["/v/bin/python", "-m", "dltestbed.workload"], {"A": "b"})
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert job["spec"]["backoffLimit"] == 0 and job["spec"]["activeDeadlineSeconds"] > 0
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
    assert pod["hostNetwork"] is True
    assert pod["restartPolicy"] == "Never" and pod["automountServiceAccountToken"] is False
    assert {"name": "host", "hostPath": {"path": "/", "type": "Directory"}} in pod["volumes"]
    assert container["command"][:2] == ["/usr/sbin/chroot", "/host"] and container["stdin"] is True
    assert container["securityContext"] == {"runAsUser": 0, "runAsGroup": 0}  # chroot needs root
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["A"] == "b" and env["HOME"] == "/root" and "/usr/sbin" in env["PATH"]
    labels = job["metadata"]["labels"]
    assert labels["team"] == "ops" and labels["app.kubernetes.io/managed-by"] == "dltestbed"
    spoof = PodSpec("ns", "n1", "img:1", labels={"app.kubernetes.io/managed-by": "me"})
    assert job_body("j", spoof, ["x"], {})["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "dltestbed"
    assert container["resources"] == {"requests": {}, "limits": {}}


def test_a_containers_job_is_on_the_pod_network_with_its_folders_and_gpu() -> None:
    spec = PodSpec("ns", "n2", "img:1", mounts=("/data", "/cache"), requests={"nvidia.com/gpu": "1", "cpu": "2"})
    pod = job_body("j", spec, ["python"], {})["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is False and pod["containers"][0]["command"][0] == "bash"
    assert "securityContext" not in pod["containers"][0]  # the image's own user
    paths = [m["mountPath"] for m in pod["containers"][0]["volumeMounts"]]
    assert paths == ["/data", "/cache"]
    # an extended resource's limit must be its request; dltestbed's CPU and memory requests are their limits too
    assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1", "cpu": "2"}


@pytest.mark.parametrize(
    ("kw", "line"),
    [
        ({"launch": Launch("kubernetes", nodes=0)}, "--nodes: at least 1"),
        ({"launch": Launch("kubernetes", venv="v")}, "--venv v: an absolute path"),
        ({"where": Where(targets=("bm", "vm"))}, "not vm"),
        ({"where": Where(limit="h1")}, "--limit picks inventory hosts"),
        ({"container": Container(runtime="docker")}, "cbm is a pod"),
        ({"workloads": Workloads(data="real")}, "--data real: not yet"),
        ({"workloads": Workloads(gpus="node")}, "--gpus node: not yet"),
        ({"scenario": Options("shared"), "launch": Launch("kubernetes", nodes=2)}, "runs on one node"),
        ({"kubernetes": KubernetesOptions(labels=("nokey",))}, "--k8s-label: KEY=VALUE"),
    ],
)
def test_bad_combinations_are_one_line(kw: dict, line: str) -> None:
    with pytest.raises(ConfigError, match=line):
        check_options(replace(K8S, **kw))


def test_its_options_go_with_it_and_the_node_count() -> None:
    with pytest.raises(ConfigError, match=r"^--namespace goes with --launcher kubernetes$"):
        launcher_for(BenchRequest(kubernetes=KubernetesOptions(namespace="x")))
    chosen = launcher_for(replace(K8S, scenario=Options("distributed", workers=3)))
    assert isinstance(chosen, Kubernetes) and len(chosen.hosts()) == 3
    assert not Kubernetes.on_this_machine(K8S)
    # --targets auto: bm and cbm, a distributed job's too (cbm's workers on the pod network, given their peers late)
    assert chosen.auto_kinds("single", None).kinds == ("bm", "cbm")
    assert chosen.auto_kinds("distributed", None).kinds == ("bm", "cbm")
    assert parse_labels(("a=b", "c=")) == {"a": "b", "c": ""}


def test_a_pod_asks_for_a_gpu_where_its_node_offers_one() -> None:
    from dltestbed.orchestrate.launchers.kubernetes import requests_of

    gpu_node, cpu_node = {"nvidia.com/gpu": "8", "cpu": "64"}, {"cpu": "64"}
    assert requests_of(K8S, gpu_node) == {"nvidia.com/gpu": "1"}
    assert requests_of(K8S, cpu_node) == {}
    assert requests_of(replace(K8S, where=Where(device="cpu")), gpu_node) == {}
    assert requests_of(replace(K8S, where=Where(device="gpu")), cpu_node) == {"nvidia.com/gpu": "1"}  # refused there


def _node(name: str, *images: str, listed_all: bool = True) -> Node:
    return Node(name, "10.0.0.1", {}, frozenset(images), listed_all)


def test_the_workload_image_is_found_under_the_name_each_node_holds_it_by() -> None:
    ref = "dltestbed-workload:abc"
    assert held_as(frozenset({"localhost/dltestbed-workload:abc"}), ref) == "localhost/dltestbed-workload:abc"
    assert held_as(frozenset({"docker.io/library/dltestbed-workload:abc"}), ref) == (
        "docker.io/library/dltestbed-workload:abc"
    )  # an archive of Docker's, read by containerd as Docker Hub's
    assert held_as(frozenset({"localhost/dltestbed-workload:other"}), ref) is None  # another build's
    # a name with a registry is that registry's alone
    assert held_as(frozenset({"localhost/reg.example:5000/w:1"}), "reg.example:5000/w:1") is None
    assert held_as(frozenset({"reg.example:5000/w:1"}), "reg.example:5000/w:1") == "reg.example:5000/w:1"
    nodes = [_node("n1", "localhost/" + ref), _node("n2", "docker.io/library/" + ref)]
    assert held_images(nodes, ref) == {"n1": "localhost/" + ref, "n2": "docker.io/library/" + ref}


def test_a_node_without_the_workload_image_is_named_before_any_job() -> None:
    ref = "dltestbed-workload:abc"
    nodes = [_node("n1", "localhost/" + ref), _node("n2", "localhost/dltestbed-workload:old"), _node("n3")]
    with pytest.raises(ConfigError, match=r"node\(s\) n2, n3 hold no image dltestbed-workload:abc.*--k8s-image"):
        held_images(nodes, ref)
    # a kubelet lists its LISTED largest images only: a node whose list was cut is asked for the image as named
    cut = _node("n4", *(f"big/{i}:1" for i in range(LISTED)), listed_all=False)
    assert held_images([cut], ref) == {"n4": ref}


def test_a_followed_logs_lines_come_whole_across_chunks() -> None:
    chunks = [b"step 1\nst", b"ep 2\n", "##x## caf\u00e9\n".encode(), b"\n", b"last, unended"]
    assert list(log_lines(chunks)) == ["step 1", "step 2", "##x## caf\u00e9", "", "last, unended"]
    assert list(log_lines([b"\xff\n"])) == ["\ufffd"]  # not UTF-8: replaced, not raised


NOW = datetime(2026, 11, 30, 10, 0, 0, tzinfo=UTC)


def _ready_node(status: str | None, since: datetime | None = None, message: str = "") -> Any:
    """A core/v1 Node as the client reads it, with one Ready condition (none with status None)."""
    from kubernetes import client

    conditions = [] if status is None else [
        client.V1NodeCondition(type="Ready", status=status, last_transition_time=since, message=message)
    ]  # fmt: skip
    return client.V1Node(metadata=client.V1ObjectMeta(name="n1"), status=client.V1NodeStatus(conditions=conditions))


def test_how_long_a_node_has_not_been_ready_and_why() -> None:
    assert not_ready(_ready_node("True", NOW - timedelta(hours=1)), NOW) is None
    assert not_ready(_ready_node("Unknown", NOW - timedelta(seconds=90)), NOW) == (
        90.0, "node n1 is not Ready (its kubelet stopped answering)"
    )  # fmt: skip
    down = _ready_node("False", NOW - timedelta(seconds=5), "container runtime is down")
    assert not_ready(down, NOW) == (5.0, "node n1 is not Ready (its kubelet says: container runtime is down)")
    ahead = _ready_node("Unknown", NOW + timedelta(seconds=30))  # the cluster's clock ahead of ours: no time yet
    assert not_ready(ahead, NOW) == (
        0.0, "node n1 is not Ready (its kubelet stopped answering)"
    )  # fmt: skip
    assert not_ready(_ready_node("Unknown"), NOW) == (0.0, "node n1 is not Ready (its kubelet stopped answering)")
    assert not_ready(_ready_node(None), NOW) == (0.0, "node n1 is not Ready (it has not said it is)")
    naive = _ready_node("False", (NOW - timedelta(seconds=7)).replace(tzinfo=None))  # the API's times are UTC
    assert not_ready(naive, NOW) == (7.0, "node n1 is not Ready (its kubelet says: no reason given)")


def test_a_node_lost_before_a_job_ends_it_at_once_and_one_just_gone_after_the_grace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A node not Ready for longer than NOT_READY_SECONDS by its condition is lost at the first look (a run after
    the node was lost does not wait for it); one that has just gone is lost once that long has passed. Both on the
    cluster's clock (its time when it took the Job, plus what has passed here), whatever this machine's says; Ready
    again starts the count over."""
    clock = [1000.0]
    monkeypatch.setattr(pod.time, "monotonic", lambda: clock[0])
    made = datetime(2020, 1, 1, 12, 0, tzinfo=UTC)  # the cluster's clock, years from this machine's
    job = _Job("j", "u", made, created_here=1000.0)
    gone_before = _ready_node("Unknown", made - timedelta(minutes=5))
    assert _Readiness(job).lost(gone_before) == "node n1 is not Ready (its kubelet stopped answering)"
    r = _Readiness(job)
    just_gone = _ready_node("Unknown", made)
    assert r.lost(just_gone) is None
    clock[0] += pod.NOT_READY_SECONDS - 1
    assert r.lost(just_gone) is None
    clock[0] += 2
    assert r.lost(just_gone) == "node n1 is not Ready (its kubelet stopped answering)"
    assert r.lost(_ready_node("True", made)) is None
    ahead = _ready_node("Unknown", made + timedelta(hours=1))  # a transition time past the cluster's own now
    assert r.lost(ahead) is None  # counted from this look
    clock[0] += pod.NOT_READY_SECONDS + 1
    assert r.lost(ahead) is not None


def test_a_log_read_blocked_on_a_silent_kubelet_returns_when_cut() -> None:
    """A log stream whose server sent a line and then went silent (a kubelet stopped, its TCP connection open): the
    reading thread is blocked until `cut` shuts the connection from another thread, as the guard does."""
    import socket
    import threading
    import time

    import urllib3

    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:
        conn, _ = server.accept()
        held.append(conn)
        conn.recv(4096)
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7\r\nstep 1\n\r\n")  # then silence

    threading.Thread(target=serve, daemon=True).start()
    pool = urllib3.PoolManager()
    resp = pool.request("GET", f"http://127.0.0.1:{server.getsockname()[1]}/log", preload_content=False, timeout=60)
    job = _Job("j", "u", log=resp)
    got: list[str] = []
    ended = threading.Event()

    def read() -> None:
        try:
            for line in log_lines(resp.stream(amt=None, decode_content=False)):
                got.append(line)
        except Exception:  # the cut read may end in an error: what matters is that it returns
            pass
        ended.set()

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + 10
    while not got and time.monotonic() < deadline:
        time.sleep(0.05)
    assert got == ["step 1"] and not ended.wait(0.5)  # blocked: the server says nothing more
    started = time.monotonic()
    job.cut()
    assert ended.wait(5) and time.monotonic() - started < 5
    for conn in held:
        conn.close()
    server.close()


KUBECONFIG_YAML = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: not-a-secret}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def test_kubeconfig_may_be_a_list_as_kubectl_reads_it(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """$KUBECONFIG naming several files (one of them missing) is read as the client merges it; none there is one
    line naming what was looked at."""
    import os

    from dltestbed.transport.kubeapi import client_for

    real = tmp_path / "real.yaml"
    real.write_text(KUBECONFIG_YAML)
    listed = os.pathsep.join([str(tmp_path / "missing.yaml"), str(real)])
    monkeypatch.setenv("KUBECONFIG", listed)
    api = client_for(None, "--launcher kubernetes")
    assert api.configuration.host == "https://127.0.0.1:1"
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing.yaml"))
    with pytest.raises(ConfigError, match=r"no kubeconfig at .*missing.yaml \(give --kubeconfig, or set KUBECONFIG\)"):
        client_for(None, "--launcher kubernetes")
    assert (
        client_for(str(real), "--launcher kubernetes").configuration.host == "https://127.0.0.1:1"
    )  # --kubeconfig over $KUBECONFIG


def test_guaranteed_pods_get_their_share_of_the_node_as_requests_and_limits() -> None:
    """--k8s-qos guaranteed: each pod the node's allocatable CPU and memory ÷ the workloads at once on it (the
    shared scenario's foreground and co-tenant: 2), each request its limit too: the class Kubernetes gives is
    Guaranteed; besteffort (the default): none, BestEffort; a GPU alone does not change the class."""
    from dltestbed.orchestrate.launchers.kubernetes import requests_of
    from dltestbed.transport.podspec import qos_class

    node = {"cpu": "2", "memory": "16Gi", "pods": "110"}
    guaranteed = replace(K8S, kubernetes=KubernetesOptions(qos="guaranteed"))
    assert requests_of(guaranteed, node) == {"cpu": "2000m", "memory": str(16 * 2**30)}
    shared = replace(guaranteed, scenario=Options("shared"))
    asked = requests_of(shared, {**node, "cpu": "1500m"})
    assert asked == {"cpu": "750m", "memory": str(8 * 2**30)}
    assert requests_of(replace(K8S, kubernetes=KubernetesOptions(qos="besteffort")), node) == {}
    body = job_body("j", PodSpec("ns", "n1", "img", requests=asked), ["true"], {})
    resources = body["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert resources == {"requests": asked, "limits": asked}
    assert (qos_class(asked), qos_class({}), qos_class({"nvidia.com/gpu": "1"})) == (
        "Guaranteed",
        "BestEffort",
        "BestEffort",
    )
    assert qos_class({"cpu": "1"}) == "Burstable"
    with pytest.raises(ConfigError, match=r"^--k8s-qos burstable: give guaranteed or besteffort$"):
        check_options(replace(K8S, kubernetes=KubernetesOptions(qos="burstable")))


def test_the_shared_table_names_each_pods_qos() -> None:
    from dltestbed.report import render
    from dltestbed.report.analysis import Analysis
    from dltestbed.report.jobs import shared
    from tests.conftest import make_run

    runs = []
    for job in ("j1", "j2"):
        for contention, role, ips, qos in (
            ("none", "foreground", 100.0, "Guaranteed"),
            ("alexnet b64", "foreground", 80.0, "Guaranteed"),
            ("alexnet b64", "cotenant", 50.0, "BestEffort"),
        ):
            runs.append(
                make_run(
                    target_kind="cbm", status="ok", images_per_sec=ips, scenario="shared", job_id=job,
                    contention=contention, role=role, fingerprint={"k8s_qos": qos},
                    batch_size=64 if role == "cotenant" else 8,
                )
            )  # fmt: skip
    (s,) = shared(runs)
    assert s.qos == "foreground Guaranteed, co-tenant BestEffort"
    md = render.markdown(Analysis(shared=(s,)))
    assert "| 20.0 | 20.0 | 20.0 | 50.0 | foreground Guaranteed, co-tenant BestEffort |" in md
