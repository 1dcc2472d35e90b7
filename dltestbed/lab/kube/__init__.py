"""A real Kubernetes cluster of the lab's hosts (`lab up --kubernetes`), built from Debian's source
(scripts/kubernetes.sh): the control plane on this machine (control.py), each host a node with its own containerd
and kubelet (node.py), a pod network as flannel's vxlan backend makes it, and certificates as kubeadm lays them out
(pki.py). What the cluster is asked through is the admin's kubeconfig, which `lab up` prints to export."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from dltestbed.lab import cgroups
from dltestbed.lab.kube import build, control, node, ociarchive, pki
from dltestbed.lab.net import LabError
from dltestbed.lab.state import LabHost, LabState

PAUSE_TAR = "pause.tar"  # the sandbox image's archive, in the cluster's folder


def check() -> None:
    """What is cheap, before the lab is made: the build, and the node's programs."""
    build.check()
    for tool in ("containerd", "ctr", "runc"):
        if not any(Path(d, tool).exists() for d in ("/usr/bin", "/usr/sbin")):
            raise LabError(f"--kubernetes needs {tool} (apt-get install containerd)")
    if not Path("/usr/lib/cni/bridge").exists():
        raise LabError("--kubernetes needs the CNI plugins (apt-get install containernetworking-plugins)")


def prepare(lab: LabState) -> None:
    """The cluster's PKI and kubeconfigs in the lab's folder (before any host is prepared)."""
    d = control.folder(lab)
    pk = d / "pki"
    ca = pki.ca(f"dltestbed-{lab.name}")
    server = pki.issue(
        ca,
        "kube-apiserver",
        addresses=(lab.bridge_ip, "10.96.0.1"),
        names=("kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"),
    )
    clients = {
        "admin": pki.issue(ca, *pki.ADMIN),
        "apiserver-kubelet-client": pki.issue(ca, "kube-apiserver-kubelet-client", "system:masters"),
        "controller-manager": pki.issue(ca, "system:kube-controller-manager"),
        "scheduler": pki.issue(ca, "system:kube-scheduler"),
    }
    for name, pair in {"ca": ca, "apiserver": server, **clients}.items():
        pki.write(pk / f"{name}.crt", pair.cert)
        pki.write(pk / f"{name}.key", pair.key, private=True)
    sa_key, sa_pub = pki.service_account_key()
    pki.write(pk / "sa.key", sa_key, private=True)
    pki.write(pk / "sa.pub", sa_pub)
    url, cluster = control.server(lab), f"dltestbed-{lab.name}"
    users = {
        "admin": pki.ADMIN[0],
        "controller-manager": "system:kube-controller-manager",
        "scheduler": "system:kube-scheduler",
    }
    for name, user in users.items():
        pki.write(d / f"{name}.kubeconfig", pki.kubeconfig(cluster, url, ca, user, clients[name]), private=True)
    pause = Path(build.binary("pause")).read_bytes()  # the sandbox image, once for every node
    (d / PAUSE_TAR).write_bytes(ociarchive.archive(node.PAUSE, {"pause": (pause, 0o755)}, ["/pause"]))
    for h in lab.hosts:
        kubelet = pki.issue(ca, f"system:node:{h.name}", "system:nodes")
        text = pki.kubeconfig(cluster, url, ca, f"system:node:{h.name}", kubelet)
        pki.write(d / "nodes" / f"{h.name}.kubeconfig", text, private=True)


def prepare_host(lab: LabState, host: LabHost, upper: Path) -> None:
    """A node's files in its host's overlay: its kubeconfig, the CA, configs, the sandbox image."""
    d = control.folder(lab)
    kubeconfig = (d / "nodes" / f"{host.name}.kubeconfig").read_text()
    node.prepare_host(lab, host, upper, kubeconfig, (d / "pki" / "ca.crt").read_bytes(), (d / PAUSE_TAR).read_bytes())


def network(lab: LabState) -> None:
    """The pod network's VXLAN overlay between the hosts' namespaces, and forwarding in each (after the
    namespaces exist)."""
    for h in lab.hosts:
        _in_netns(h.netns, ["sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"])
        for argv in node.overlay_commands(lab, h):
            _run([argv[0], "-n", h.netns, *argv[1:]])


def _in_netns(netns: str, argv: list[str]) -> None:
    _run(["ip", "netns", "exec", netns, *argv])


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise LabError(f"`{' '.join(argv)}` failed: {done.stderr.strip()}")


def start(lab: LabState) -> None:
    """The control plane: etcd and the apiserver first (the others need it), then the controller manager and the
    scheduler."""
    control.start(lab, "etcd")
    control.start(lab, "kube-apiserver")
    control.wait_api(lab)
    control.start(lab, "kube-controller-manager")
    control.start(lab, "kube-scheduler")


def node_states(lab: LabState) -> dict[str, str]:
    """Node → Ready, NotReady or Unknown, as the apiserver has them (empty while it does not answer)."""
    try:
        doc = json.loads(control.get(lab, "/api/v1/nodes", timeout=5))
    except (OSError, ValueError):
        return {}
    return parse_nodes(doc)


def parse_nodes(doc: dict) -> dict[str, str]:
    """A NodeList → node → its Ready condition (True: Ready, False: NotReady, else Unknown). Pure."""
    out = {}
    for item in doc.get("items", []):
        conditions = item.get("status", {}).get("conditions", [])
        ready = next((str(c.get("status")) for c in conditions if c.get("type") == "Ready"), "")
        out[item["metadata"]["name"]] = {"True": "Ready", "False": "NotReady"}.get(ready, "Unknown")
    return out


def wait_ready(lab: LabState, timeout: float = 120.0) -> None:
    """Wait until every host is a Ready node; a LabError quoting the kubelet's log of one that is not."""
    deadline = time.monotonic() + timeout
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        states = node_states(lab)
        if all(states.get(h.name) == "Ready" for h in lab.hosts):
            return
        time.sleep(1)
    bad = next(h for h in lab.hosts if states.get(h.name) != "Ready")
    log = bad.dir(lab.dir) / "upper" / "var" / "log" / "kubelet.log"
    lines = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
    errors = [line for line in lines if line[:1] in "EF"] or lines
    raise LabError(
        f"lab {lab.name}: node {bad.name} is {states.get(bad.name, 'not registered')} after {timeout:.0f} s"
        + (f": {errors[-1][:300]}" if errors else "")
        + f" (log: {log})"
    )


def _cgroup_trees(lab_name: str) -> list[Path]:
    """The lab's cgroup folders in every hierarchy this machine mounts (the kubelets' subtrees among them)."""
    base = Path("/sys/fs/cgroup")
    roots = [base] if (base / "cgroup.controllers").exists() else [p for p in base.iterdir() if p.is_dir()]
    return [r / cgroups.BASE / lab_name for r in roots if (r / cgroups.BASE / lab_name).is_dir()]


def pids(lab_name: str, lab_dir: Path) -> list[int]:
    """Processes to end when the lab goes: its control plane, and whatever is in its hosts' cgroups (containers
    live in network namespaces of their own, where a search by the host's namespace does not find them)."""
    found = set(control.pids(lab_name, lab_dir))
    for tree in _cgroup_trees(lab_name):
        for procs in tree.rglob("cgroup.procs"):
            try:
                found.update(int(p) for p in procs.read_text().split())
            except OSError:
                continue
    found.discard(os.getpid())
    return sorted(found)


def remove_cgroups(lab_name: str) -> list[str]:
    """The lab's cgroups in every hierarchy (the kubelets' subtrees, and the hosts' folders in the hierarchies
    cgroups.py does not use), deepest first, once their processes are gone."""
    removed = []
    for tree in _cgroup_trees(lab_name):
        below = sorted((p for p in tree.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True)
        removed += cgroups.remove_groups([*below, tree])
    return removed


def load(lab: LabState, archive: Path) -> None:
    """Import an image archive (OCI or docker-archive tar, as it is or compressed with zstd or gzip, as
    provision/imagearchive.py writes them) into every node's containerd, as a site without a registry preloads its
    nodes; returns once every node lists it in its status."""
    with archive.open("rb") as f:
        magic = f.read(4)
    unpack = {b"\x28\xb5\x2f\xfd": ["zstd", "-dc"], b"\x1f\x8b": ["gzip", "-dc"]}
    decompress = next((argv for m, argv in unpack.items() if magic.startswith(m)), None)
    names: set[str] = set()
    for h in lab.hosts:
        argv = ["nsenter", "-t", str(h.pid), "-m", "-u", "-n", "--"]
        argv += ["ctr", "--address", node.SOCKET, "-n", "k8s.io", "images", "import", "-"]
        with archive.open("rb") as f:
            if decompress is None:
                done = subprocess.run(argv, stdin=f, capture_output=True, text=True, timeout=1800)
            else:
                src = subprocess.Popen([*decompress], stdin=f, stdout=subprocess.PIPE)
                done = subprocess.run(argv, stdin=src.stdout, capture_output=True, text=True, timeout=1800)
                assert src.stdout is not None
                src.stdout.close()
                src.wait()
        if done.returncode != 0:
            raise LabError(f"lab {lab.name}: {h.name} did not import {archive}: {done.stderr.strip()[-300:]}")
        names.update(imported(done.stdout))
    _wait_listed(lab, names)


def imported(said: str) -> set[str]:
    """The image names `ctr images import` said it unpacked ("unpacking NAME (sha256:…)...done"). Pure."""
    return {line.split()[1] for line in said.splitlines() if line.startswith("unpacking ") and len(line.split()) > 1}


def listed_images(doc: dict) -> dict[str, set[str]]:
    """A NodeList → node → the image names its kubelet lists in its status. Pure."""
    return {
        item["metadata"]["name"]: {n for i in item.get("status", {}).get("images") or [] for n in i.get("names", [])}
        for item in doc.get("items", [])
    }


def _wait_listed(lab: LabState, names: set[str], timeout: float = 120.0) -> None:
    """Until every node's status lists the images just loaded: a kubelet refreshes its list every half minute or
    so, and a bench reads the list to name the image on each node."""
    deadline = time.monotonic() + timeout
    lacking: dict[str, set[str]] = {}
    while time.monotonic() < deadline:
        try:
            listed = listed_images(json.loads(control.get(lab, "/api/v1/nodes", timeout=5)))
        except (OSError, ValueError):
            listed = {}
        lacking = {n: names - have for n, have in listed.items() if names - have}
        if listed and not lacking:
            return
        time.sleep(1)
    raise LabError(f"lab {lab.name}: after {timeout:.0f} s, nodes still do not list {lacking or names}")
