"""Kubernetes in the lab, on a real cluster: `lab up --kubernetes` runs etcd, the apiserver, the scheduler and the
controller manager here (1.20, built from Debian's source into this run's cache) and a kubelet with containerd in
each of two lab hosts, a VXLAN pod network between them. batch/v1 Jobs run to Completed on the node each names,
their logs come back through the apiserver, a pod on one node reaches a pod on the other over the overlay, this
machine's kernel settings stay as they were, and the lab's teardown leaves no process, cgroup or mount."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from dltestbed import lab
from dltestbed.lab import kube
from dltestbed.lab.kube import control, ociarchive
from dltestbed.lab.state import LabState
from dltestbed.transport import pod
from tests.conftest import run_cli, start_endless_bench, wait_for_steps
from tests.lab.conftest import accept_argv, drift_tensorflow, leftovers, shared_venv_inventory, ssh, this_checkout

NAME = "tk"
ROOT = Path(__file__).resolve().parents[2]
PROBE = "localhost/dltestbed-test/probe:1"
NAMESPACE = "default"
KERNEL = ("kernel/panic", "kernel/panic_on_oops", "vm/overcommit_memory", "vm/panic_on_oom")


# its first fixture waits for Kubernetes' build (scripts/test.sh starts it beside the other tiers), or builds it
pytestmark = [pytest.mark.timeout(3600), pytest.mark.kubernetes]


@pytest.fixture(scope="module")
def built() -> None:
    """Kubernetes in this run's cache: scripts/test.sh starts its build beside the tiers, and this waits for it
    (the build's lock); run alone, this builds it (about 5 minutes on 2 cores). Stopped, the build stops too."""
    proc = subprocess.Popen(["bash", str(ROOT / "scripts" / "kubernetes.sh")], start_new_session=True)
    try:
        assert proc.wait() == 0, "scripts/kubernetes.sh failed"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()


@pytest.fixture(scope="module")
def kernel_before() -> dict[str, str]:
    return {k: Path("/proc/sys", k).read_text() for k in KERNEL}


@pytest.fixture(scope="module")
def cluster(
    lab_dir: Path, built: None, kernel_before: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LabState]:
    """Two nodes, made through the CLI, with the probe's image on both."""
    lab.down(NAME)
    shares = [a for path in this_checkout() for a in ("--share", path)]  # bm's venv: a site's shared filesystem
    out = run_cli("lab", "up", "--name", NAME, "--hosts", "2", "--subnet", "10.213.88.0/24", "--kubernetes", *shares)
    assert out.returncode == 0, out.stderr
    state = LabState.load(NAME)
    assert state is not None
    assert f"export KUBECONFIG={control.admin_kubeconfig(state)}" in out.stderr
    d = tmp_path_factory.mktemp("probe")
    subprocess.run(["gcc", "-Os", "-static", "-o", str(d / "probe"), str(ROOT / "tests/data/kube/probe.c")], check=True)
    archive = d / "probe.tar"
    archive.write_bytes(ociarchive.archive(PROBE, {"probe": ((d / "probe").read_bytes(), 0o755)}, ["/probe"]))
    kube.load(state, archive)
    yield state
    lab.down(NAME)
    assert not leftovers(NAME)
    assert {k: Path("/proc/sys", k).read_text() for k in KERNEL} == kernel_before, "the kubelets changed this machine"


def api(state: LabState) -> Any:
    from kubernetes import client, config

    return client.ApiClient(config.new_client_from_config(str(control.admin_kubeconfig(state))).configuration)


def job(name: str, node: str, *args: str) -> dict:
    """A batch/v1 Job of one pod of the probe on `node`, never retried."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "dltestbed-test"}},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {"job": name}},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "nodeSelector": {"kubernetes.io/hostname": node},
                    "containers": [{"name": "probe", "image": PROBE, "imagePullPolicy": "Never", "args": list(args)}],
                },
            },
        },
    }


def pod_of(state: LabState, name: str, phase: tuple[str, ...], timeout: float = 90) -> dict:
    """The Job's pod, once it is in one of `phase`."""
    from kubernetes import client

    core = client.CoreV1Api(api(state))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pods = core.list_namespaced_pod(NAMESPACE, label_selector=f"job={name}").items
        if pods and pods[0].status.phase in phase:
            return {
                "name": pods[0].metadata.name,
                "ip": pods[0].status.pod_ip,
                "node": pods[0].spec.node_name,
                "phase": pods[0].status.phase,
            }
        time.sleep(0.5)
    raise AssertionError(f"job {name}: no pod in {phase} after {timeout:.0f} s")


def finished(state: LabState, name: str, timeout: float = 90) -> str:
    """The Job's pod's log once the Job succeeded."""
    from kubernetes import client

    batch, core = client.BatchV1Api(api(state)), client.CoreV1Api(api(state))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = batch.read_namespaced_job_status(name, NAMESPACE).status
        if status.succeeded:
            pod = pod_of(state, name, ("Succeeded",))
            return str(core.read_namespaced_pod_log(pod["name"], NAMESPACE))
        assert not status.failed, f"job {name} failed"
        time.sleep(0.5)
    raise AssertionError(f"job {name} did not finish in {timeout:.0f} s")


def test_jobs_run_on_the_nodes_they_name_and_reach_each_other_over_the_overlay(cluster: LabState) -> None:
    from kubernetes import client, utils

    h1, h2 = (h.name for h in cluster.hosts)
    nodes = client.CoreV1Api(api(cluster)).list_node().items
    assert sorted(n.metadata.name for n in nodes) == [h1, h2]
    assert {n.status.node_info.kubelet_version for n in nodes} == {"v1.20.2"}
    with api(cluster) as c:
        utils.create_from_dict(c, job("hello", h2, "hello"))
        utils.create_from_dict(c, job("server", h2, "serve", "7000"))
    assert finished(cluster, "hello").startswith("hello from hello-")
    server = pod_of(cluster, "server", ("Running",))
    assert server["node"] == h2 and server["ip"].startswith("10.244.2.")  # h2's pod subnet
    with api(cluster) as c:
        utils.create_from_dict(c, job("client", h1, "call", server["ip"], "7000"))
    said = finished(cluster, "client")
    assert pod_of(cluster, "client", ("Succeeded",))["ip"].startswith("10.244.1.")  # from h1's, over the VXLAN
    assert said.startswith("client-") and f"called {server['ip']}: pong from server-" in said
    assert finished(cluster, "server").strip() == "listening on 7000"
    batch = client.BatchV1Api(api(cluster))
    for name in ("hello", "server", "client"):
        batch.delete_namespaced_job(name, NAMESPACE, propagation_policy="Foreground")


def ours(state: LabState) -> list[str]:
    """dltestbed's Jobs and pods left in the cluster, in any namespace."""
    from kubernetes import client

    selector = "app.kubernetes.io/managed-by=dltestbed"
    jobs = client.BatchV1Api(api(state)).list_job_for_all_namespaces(label_selector=selector).items
    pods = client.CoreV1Api(api(state)).list_pod_for_all_namespaces(label_selector=selector).items
    return [f"job {j.metadata.name}" for j in jobs] + [f"pod {p.metadata.name}" for p in pods]


@pytest.fixture(scope="module")
def workload_image(cluster: LabState) -> str:
    """The workload image (Podman's, built here if this run has not yet), loaded into both nodes' containerd from
    its archive, as a site without a registry preloads its nodes."""
    from dltestbed.provision import image, imagearchive, localfacts, wheelhouse

    built = run_cli("image", "build", "--runtime", "podman", "--vm", "no", timeout=3000)
    assert built.returncode == 0, built.stderr
    house = wheelhouse.cached(localfacts.flavor(), ("tensorflow",))
    assert house is not None
    img = image.find("podman", house)
    assert img is not None
    kube.load(cluster, imagearchive.archive(img))
    return img.tag


def test_bm_and_cbm_through_the_kubernetes_launcher(cluster: LabState, workload_image: str, tmp_path: Path) -> None:
    """Both kinds on both nodes, 3 repetitions, a Job per run: stored under the nodes' names, bm on the node's
    network and cbm on the pod network, and no Job or pod of the bench left."""
    results = tmp_path / "r.sqlite"
    out = run_cli(
        "bench", "--launcher", "kubernetes", "--kubeconfig", str(control.admin_kubeconfig(cluster)),
        "--venv", sys.prefix, "--nodes", "2", "--targets", "bm,cbm", "--k8s-label", "team=ops",
        "-m", "alexnet", "--image-size", "32", "--batch-size", "4", "--warmup", "1", "--steps", "3",
        "--repeat", "3", "--results", str(results), "--format", "json", timeout=1500,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    runs = json.loads(out.stdout)
    assert len(runs) == 12 and all(r["status"] == "ok" for r in runs), [r.get("reason") for r in runs]
    nodes = {h.name for h in cluster.hosts}
    for r in runs:
        fp = r["fingerprint"]
        assert fp["transport"] == "kubernetes" and fp["target_host"] in nodes
        assert fp["k8s_network"] == ("host" if r["target_kind"] == "bm" else "pod")
    assert {(r["target_kind"], r["fingerprint"]["target_host"]) for r in runs} == {
        (k, n) for k in ("bm", "cbm") for n in nodes
    }
    assert not ours(cluster)


def _kube_bench(cluster: LabState, results: Path, *args: str) -> subprocess.Popen[str]:
    kubeconfig = str(control.admin_kubeconfig(cluster))
    common = ("--launcher", "kubernetes", "--kubeconfig", kubeconfig, "--venv", sys.prefix, "--nodes", "2")
    return start_endless_bench(results, *common, *args)


def test_ctrl_c_mid_bench_leaves_no_job_or_pod(cluster: LabState, workload_image: str, tmp_path: Path) -> None:
    """Ctrl-C while both nodes run a Job: the runs stored interrupted, and nothing of the bench left in the
    cluster when it has ended (no Job, no pod, Terminating ones included)."""
    results = tmp_path / "r.sqlite"
    proc = _kube_bench(cluster, results, "--targets", "cbm")
    assert wait_for_steps(results, 2, runs=1, timeout=300), proc.stderr.read() if proc.poll() is not None else ""
    assert ours(cluster)  # its Job and pod, running
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err
    assert not ours(cluster), err[-2000:]
    with sqlite3.connect(results) as db:
        stored = db.execute("SELECT status, reason FROM runs").fetchall()
    assert ("failed", "interrupted (Ctrl-C or a stop signal)") in stored, stored


def _kubelet(host: str) -> psutil.Process:
    """A lab node's kubelet (its command line names the node)."""
    for p in psutil.process_iter(["name", "cmdline"]):
        if p.info["name"] == "kubelet" and f"--hostname-override={host}" in (p.info["cmdline"] or []):
            return p
    raise AssertionError(f"no kubelet of {host}")


def test_a_node_made_not_ready_ends_its_run_in_one_line_and_the_others_are_kept(
    cluster: LabState, workload_image: str, tmp_path: Path
) -> None:
    """h2's kubelet stopped mid-bench (SIGSTOP: the node stops answering, as a hung one does): h2's run ends with
    the node named, and its next run at once (no wait for a pod the lost node will never run), h1's runs go on and
    are kept; nothing of the bench is left (h2's pod is removed from the API, since no kubelet will confirm it). The
    kubelet then goes on, and h2 is Ready again for the next test."""
    h1, h2 = (h.name for h in cluster.hosts)
    results = tmp_path / "r.sqlite"
    kubeconfig = str(control.admin_kubeconfig(cluster))
    argv = [
        sys.executable, "-m", "dltestbed", "bench", "--launcher", "kubernetes", "--kubeconfig", kubeconfig,
        "--venv", sys.prefix, "--nodes", "2", "--targets", "bm", "-m", "alexnet", "--image-size", "32",
        "--batch-size", "4", "--warmup", "1", "--steps", "100", "--repeat", "2", "--results", str(results),
        "--format", "json",
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    kubelet = _kubelet(h2)
    try:
        assert wait_for_steps(results, 2, runs=2, timeout=300)
        kubelet.suspend()
        out, err = proc.communicate(timeout=900)
    finally:
        kubelet.resume()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err[-3000:]
    assert "Traceback" not in err
    runs = json.loads(out)
    by_host = {h: [r for r in runs if r["fingerprint"]["target_host"] == h] for h in (h1, h2)}
    assert [r["status"] for r in by_host[h1]] == ["ok", "ok"], [r.get("reason") for r in by_host[h1]]
    lost = [r for r in by_host[h2] if r["status"] == "failed"]
    assert len(lost) == 2 and all(f"node {h2} is not Ready" in r["reason"] for r in lost), [
        r.get("reason") for r in by_host[h2]
    ]
    first, second = (r["wall_seconds"] for r in lost)
    assert second < pod.NOT_READY_SECONDS, (first, second)  # the lost node's next run waited for nothing
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"node {h2} is not Ready" in errors[0], err[-2000:]
    assert not ours(cluster)
    kube.wait_ready(cluster, timeout=120)  # h2 back for whatever follows


def _node(state: LabState, name: str) -> Any:
    from kubernetes import client

    return client.CoreV1Api(api(state)).read_node(name)


def test_accept_taints_the_failed_node_with_its_reason_and_untaint_takes_it_off(
    cluster: LabState, tmp_path: Path
) -> None:
    """`accept --on-fail taint --on-pass untaint --apply` over the lab's two nodes (over SSH, the cluster's
    kubeconfig from the inventory), h2's TensorFlow drifted from the golden spec: h2 fails and is tainted
    dltestbed.io/acceptance=failed:NoSchedule with the reason in its annotation; a site's own taint on h2 is kept;
    the launcher no longer counts h2 among the nodes that take pods. Then untaint, as --on-pass does for a node
    that passes, takes ours off and leaves the site's."""
    import importlib.metadata as md

    from kubernetes import client

    from dltestbed import remedy
    from dltestbed.orchestrate.launchers.kubecluster import ready_nodes
    from dltestbed.remedy.kubernetes import KEY, REASON_KEY

    h1, h2 = (h.name for h in cluster.hosts)
    kubeconfig = str(control.admin_kubeconfig(cluster))
    core = client.CoreV1Api(api(cluster))
    site = {"key": "site.example/rack", "value": "r7", "effect": "PreferNoSchedule"}  # the site's own: kept
    core.patch_node(h2, {"spec": {"taints": [site]}})
    inv = shared_venv_inventory(cluster, tmp_path / "k8s.yml", dltestbed_kubeconfig=kubeconfig)
    golden = tmp_path / "golden.yml"
    golden.write_text(f"tensorflow: {md.version('tensorflow-cpu')}\n")
    meta = drift_tensorflow(cluster, h2, "2.19.1")
    try:
        argv = accept_argv(
            inv, tmp_path / "pack", tmp_path / "r.sqlite", "--golden", str(golden), "--skip", "pairs",
            "--on-fail", "taint", "--on-pass", "untaint", "--apply",
        )  # fmt: skip
        out = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    finally:
        assert ssh(cluster, h2, f"umount {meta}").returncode == 0
    assert out.returncode == 1, out.stderr[-3000:]  # a node failed
    assert "Traceback" not in out.stderr
    verdicts = {n["node"]: n for n in json.loads(out.stdout)["nodes"]}
    assert verdicts[h2]["verdict"] == "fail" and verdicts[h1]["verdict"] != "fail", verdicts
    failed = [r["check"] for r in verdicts[h2]["reasons"] if r["verdict"] == "fail"]
    assert failed == ["drift tensorflow"], verdicts[h2]
    said = f"ran Kubernetes node {h2}: taint {KEY}=failed:NoSchedule, annotate {REASON_KEY}="
    assert said in out.stderr, out.stderr[-3000:]

    node = _node(cluster, h2)
    taints = [(t.key, t.value, t.effect) for t in node.spec.taints or []]
    assert taints == [(site["key"], site["value"], site["effect"]), (KEY, "failed", "NoSchedule")], taints
    why = node.metadata.annotations[REASON_KEY]
    assert why.startswith("dltestbed: TensorFlow 2.19.1, where the golden spec says"), why
    assert not [t for t in _node(cluster, h1).spec.taints or [] if t.key == KEY]  # h1: not failed, not tainted
    assert [n.name for n in ready_nodes(api(cluster))] == [h1]  # a bench now leaves h2 out

    assert remedy.action("untaint", h2, False, "", remedy.Where(kubeconfig)).run() == (0, "")
    node = _node(cluster, h2)
    assert [(t.key, t.value) for t in node.spec.taints or []] == [(site["key"], site["value"])]
    assert REASON_KEY not in (node.metadata.annotations or {})
    core.patch_node(h2, {"spec": {"taints": None}})


def test_a_distributed_bench_reports_the_overlays_cost(cluster: LabState, workload_image: str, tmp_path: Path) -> None:
    """The study's distributed finding, on the lab's cluster: a job of a worker per node, bm on the nodes' network
    and cbm on the pod network (the VXLAN overlay), 3 repetitions; then net and all-reduce between the nodes on
    both. cbm's pods get their addresses when they run: the workers wait in their pods until each has its peers'
    (the job's rendezvous), and the job succeeds only if they reach each other there. The report's distributed
    table names each kind's network and gives cbm's job totals against bm's with a paired interval, in words too;
    the probes compare per kind; nothing of the bench is left."""
    results = tmp_path / "r.sqlite"
    common = (
        "--launcher", "kubernetes", "--kubeconfig", str(control.admin_kubeconfig(cluster)), "--venv", sys.prefix,
        "--nodes", "2", "--targets", "bm,cbm", "--scenario", "distributed", "--results", str(results),
        "--format", "json",
    )  # fmt: skip
    model = ("-m", "alexnet", "--image-size", "32", "--batch-size", "4", "--warmup", "1", "--steps", "5")
    out = run_cli("bench", *common, *model, "--repeat", "3", timeout=2400)
    assert out.returncode == 0, out.stderr[-3000:]
    runs = json.loads(out.stdout)
    assert runs and all(r["status"] == "ok" for r in runs), [r.get("reason") for r in runs]
    workers = [r for r in runs if r["worker_index"] is not None]
    assert len(workers) == 2 * 2 * 3  # 2 kinds × 3 repetitions, a worker per node
    nodes = {h.name for h in cluster.hosts}
    for kind, network in (("bm", "host"), ("cbm", "pod")):
        mine = [r for r in workers if r["target_kind"] == kind]
        assert {r["fingerprint"]["k8s_network"] for r in mine} == {network}
        assert {r["fingerprint"]["target_host"] for r in mine} == nodes
    probes = run_cli("bench", *common, "--suite", "micro", "--repeat", "2", timeout=1800)
    assert probes.returncode == 0, probes.stderr[-3000:]
    assert not ours(cluster)

    md = run_cli("report", "--all", "--results", str(results), "--format", "md")
    assert md.returncode == 0, md.stderr[-2000:]
    shown = md.stdout.split("## Distributed", 1)[-1].split("\n## ", 1)[0]
    print("## Distributed" + shown, *(x for x in md.stdout.splitlines() if x.startswith(("| net |", "| allreduce |"))))
    rows = [line for line in md.stdout.splitlines() if line.startswith("| cbm | pod | alexnet |")]
    assert len(rows) == 1 and rows[0].rstrip(" |").split("| ")[-1].count("[") == 1, rows  # its interval
    assert "| bm | host | alexnet |" in md.stdout
    said = "- cbm on the pod network, bm on the host one: alexnet, 2 workers, job totals against bm's: "
    assert said in md.stdout and "(paired t on log ratios, n = 3)" in md.stdout, md.stdout[-4000:]
    for probe in ("net", "allreduce"):
        cbm = [line for line in md.stdout.splitlines() if line.startswith(f"| {probe} |") and "| cbm |" in line]
        assert cbm and all(" [" in line for line in cbm), (probe, cbm)  # against bm, with an interval


def test_a_shared_bench_with_guaranteed_pods_names_their_qos(
    cluster: LabState, workload_image: str, tmp_path: Path
) -> None:
    """The shared scenario on one node with --k8s-qos guaranteed: the foreground and the co-tenant each a pod of
    half the node's CPU and memory as requests and limits, which the cluster classes Guaranteed (read from the
    pods while they run); the report's shared table says so; nothing of the bench is left."""
    import threading

    from kubernetes import client

    seen: dict[str, str] = {}
    done = threading.Event()

    def watch() -> None:
        core = client.CoreV1Api(api(cluster))
        while not done.wait(0.5):
            for p in core.list_namespaced_pod(NAMESPACE, label_selector="app.kubernetes.io/managed-by=dltestbed").items:
                seen[p.metadata.name] = f"{p.status.qos_class} {p.spec.containers[0].resources.limits}"

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    results = tmp_path / "r.sqlite"
    try:
        out = run_cli(
            "bench", "--launcher", "kubernetes", "--kubeconfig", str(control.admin_kubeconfig(cluster)),
            "--venv", sys.prefix, "--nodes", "1", "--targets", "cbm", "--scenario", "shared", "--k8s-qos",
            "guaranteed", "-m", "alexnet", "--image-size", "32", "--batch-size", "4", "--warmup", "1", "--steps", "5",
            "--repeat", "2", "--results", str(results), "--format", "json", timeout=1800,
        )  # fmt: skip
    finally:
        done.set()
        watcher.join(10)
    assert out.returncode == 0, out.stderr[-3000:]
    runs = json.loads(out.stdout)
    assert len(runs) == 2 * 3 and all(r["status"] == "ok" for r in runs), [r.get("reason") for r in runs]
    assert {r["fingerprint"]["k8s_qos"] for r in runs} == {"Guaranteed"}
    workloads = {name: said for name, said in seen.items() if name.startswith("dltestbed-cbm-")}
    assert len(workloads) >= 6 and all(said.startswith("Guaranteed {") for said in workloads.values()), seen
    assert not ours(cluster)
    md = run_cli("report", "--results", str(results), "--format", "md").stdout
    rows = [line for line in md.splitlines() if line.startswith("| cbm | alexnet |") and "co-tenant" in line]
    assert rows and rows[0].endswith("| foreground Guaranteed, co-tenant Guaranteed |"), md[-3000:]
    print(*rows, sep="\n")
