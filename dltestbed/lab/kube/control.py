"""The lab cluster's control plane on this machine: etcd, kube-apiserver, kube-controller-manager and
kube-scheduler, each a detached process with its log in the lab's folder, found again by the lab's paths in its
command line (`lab.down` kills them, a crashed `up` included). They listen on the lab's bridge address, so labs on
other subnets do not clash, and the hosts reach the apiserver there."""

from __future__ import annotations

import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from dltestbed.lab.kube import build
from dltestbed.lab.net import LabError
from dltestbed.lab.procs import log_tail, pids_where
from dltestbed.lab.state import LabState

API_PORT = 6443
ETCD_PORTS = (2379, 2380)
SERVICE_RANGE = "10.96.0.0/16"
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")


def folder(lab: LabState) -> Path:
    """The cluster's files on this machine: PKI, kubeconfigs, etcd's data, the logs."""
    return lab.dir / "kubernetes"


def server(lab: LabState) -> str:
    """The apiserver's URL."""
    return f"https://{lab.bridge_ip}:{API_PORT}"


def admin_kubeconfig(lab: LabState) -> Path:
    """The admin's kubeconfig (what `lab up` prints to export as KUBECONFIG)."""
    return folder(lab) / "admin.kubeconfig"


def argvs(lab: LabState) -> dict[str, list[str]]:
    """Each component's command line. Pure."""
    return {**_storage_and_api(lab), **_controllers(lab)}


def _storage_and_api(lab: LabState) -> dict[str, list[str]]:
    """etcd's and the apiserver's command lines. Pure."""
    d, ip = folder(lab), lab.bridge_ip
    pki = d / "pki"
    etcd_url = f"http://{ip}:{ETCD_PORTS[0]}"
    return {
        "etcd": [
            build.binary("etcd"),
            f"--name={lab.name}-etcd",
            f"--data-dir={d / 'etcd'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls=http://{ip}:{ETCD_PORTS[1]}",
            f"--initial-advertise-peer-urls=http://{ip}:{ETCD_PORTS[1]}",
            f"--initial-cluster={lab.name}-etcd=http://{ip}:{ETCD_PORTS[1]}",
            "--listen-metrics-urls=",
        ],
        "kube-apiserver": [
            build.binary("kube-apiserver"),
            f"--etcd-servers={etcd_url}",
            f"--bind-address={ip}",
            f"--advertise-address={ip}",
            f"--secure-port={API_PORT}",
            "--insecure-port=0",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
            f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
            "--kubelet-preferred-address-types=InternalIP,Hostname",  # the nodes' names resolve nowhere
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-cluster-ip-range={SERVICE_RANGE}",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            "--allow-privileged=true",
            "--anonymous-auth=false",
            "--profiling=false",
        ],
    }


def _controllers(lab: LabState) -> dict[str, list[str]]:
    """The controller manager's and the scheduler's command lines. Pure."""
    d = folder(lab)
    pki = d / "pki"
    return {
        "kube-controller-manager": [
            build.binary("kube-controller-manager"),
            f"--kubeconfig={d / 'controller-manager.kubeconfig'}",
            f"--authentication-kubeconfig={d / 'controller-manager.kubeconfig'}",
            f"--authorization-kubeconfig={d / 'controller-manager.kubeconfig'}",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            f"--root-ca-file={pki / 'ca.crt'}",
            "--use-service-account-credentials=true",  # each controller as its own account, as kubeadm runs it
            "--leader-elect=false",
            "--port=0",
            "--secure-port=0",
            "--profiling=false",
            "--node-monitor-grace-period=20s",
            "--pod-eviction-timeout=30s",
        ],
        "kube-scheduler": [
            build.binary("kube-scheduler"),
            f"--kubeconfig={d / 'scheduler.kubeconfig'}",
            f"--authentication-kubeconfig={d / 'scheduler.kubeconfig'}",
            f"--authorization-kubeconfig={d / 'scheduler.kubeconfig'}",
            "--leader-elect=false",
            "--port=0",
            "--secure-port=0",
            "--profiling=false",
        ],
    }


def start(lab: LabState, name: str) -> None:
    """Start one component, detached, its output in <folder>/<name>.log."""
    log = (folder(lab) / f"{name}.log").open("ab")
    subprocess.Popen(argvs(lab)[name], stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    log.close()


def _context(lab: LabState) -> ssl.SSLContext:
    pki = folder(lab) / "pki"
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    return ctx


def get(lab: LabState, path: str, timeout: float = 10.0) -> bytes:
    """GET a path of the apiserver as the admin (urllib: the lab needs no client library to start)."""
    with urllib.request.urlopen(server(lab) + path, context=_context(lab), timeout=timeout) as r:
        return bytes(r.read())


def wait_api(lab: LabState, timeout: float = 120.0) -> None:
    """Wait until the apiserver says it is ready; one LabError quoting the log of what did not start."""
    deadline = time.monotonic() + timeout
    why = "no answer"
    while time.monotonic() < deadline:
        try:
            if get(lab, "/readyz", timeout=5) == b"ok":
                return
        except urllib.error.HTTPError as exc:
            why = f"HTTP {exc.code}"
        except OSError as exc:
            why = str(getattr(exc, "reason", exc))
        time.sleep(0.5)
    dead = [n for n in COMPONENTS[:2] if not pids(lab.name, lab.dir, n)]
    culprit = dead[0] if dead else "kube-apiserver"
    log = folder(lab) / f"{culprit}.log"
    raise LabError(
        f"lab {lab.name}: the apiserver is not ready after {timeout:.0f} s ({why}); {culprit}"
        f"{' exited' if dead else ''}{log_tail(log, 300)} (log: {log})"
    )


def pids(lab_name: str, lab_dir: Path, only: str | None = None) -> list[int]:
    """This machine's processes of the lab's control plane (those of `only`), by the lab's Kubernetes folder in
    their command lines; the kubelets in the hosts are not looked at here."""
    mark = f"{lab_dir / 'kubernetes'}/".encode()
    names = [n.encode() for n in ((only,) if only else COMPONENTS)]
    return pids_where(lambda argv: any(mark in a for a in argv) and any(argv[0].endswith(b"/" + n) for n in names))
