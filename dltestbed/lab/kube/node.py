"""A lab host as a Kubernetes node: its own containerd (Debian's, the CRI plugin on), a kubelet, and a pod network
as flannel's vxlan backend makes it (a bridge `cni0` of the host's pod subnet, a VXLAN device `flannel.1` to the
other hosts' subnets). Its files are written into the host's overlay; its daemons start in its start script, in
its namespaces, and die with it.

What the sandbox asks of a node: containerd's CRI keeps its OOM score adjustments within its own
(`restrict_oom_score_adj`); the kubelet makes no iptables chains; its cgroups live below the host's own
(`dltestbed-lab/<lab>/<host>/k8s`, inside the host's CPU share with `--capacity`); and the kernel settings a kubelet
sets on start (overcommit, panic on oops) are not changed on this machine: the host sees the values it wants in
files bound over them."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import yaml

from dltestbed.lab import cgroups
from dltestbed.lab.kube import build
from dltestbed.lab.state import LabHost, LabState

VXLAN = "flannel.1"  # flannel's names, numbers and MTU: what an admin would find on a node
VNI = 1
VXLAN_PORT = 8472
VXLAN_ARGS = ("dstport", str(VXLAN_PORT), "nolearning")  # flannel's port; its entries are written, not learnt
MTU = 1450
BRIDGE = "cni0"
PAUSE = "localhost/dltestbed/pause:3.4"  # the sandbox image (build/pause/linux/pause.c, Makefile TAG 3.4)
SOCKET = "/run/containerd/containerd.sock"
ETC = "/etc/kubernetes"
CONTAINERD_CONF = "/etc/containerd/dltestbed.toml"
# kubelet's setupKernelTunables (pkg/kubelet/cm/container_manager_linux.go): what it reads, and writes when it differs
KERNEL_TUNABLES = {
    "vm/overcommit_memory": 1,
    "vm/panic_on_oom": 0,
    "kernel/panic": 10,
    "kernel/panic_on_oops": 1,
    "kernel/keys/root_maxkeys": 1000000,
    "kernel/keys/root_maxbytes": 25000000,
}
STORAGE = {"containerd": "/var/lib/containerd", "kubelet": "/var/lib/kubelet"}  # on the real filesystem


def pod_subnet(host: LabHost) -> str:
    """The host's pod subnet, in flannel's default network 10.244.0.0/16 (host-local IPAM hands out its addresses)."""
    return f"10.244.{host.index}.0/24"


def cgroup_root(lab: LabState, host: LabHost) -> str:
    """The kubelet's --cgroup-root: below the host's own cgroup (lab/cgroups.py), in every hierarchy."""
    return f"/{cgroups.BASE}/{lab.name}/{host.name}/k8s"


def containerd_config() -> str:
    """containerd's config on a node: its CRI plugin, runc, the CNI plugins of Debian's package."""
    return f"""\
# written by dltestbed lab up --kubernetes
version = 2
root = "{STORAGE["containerd"]}"
state = "/run/containerd"
[grpc]
  address = "{SOCKET}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE}"
  restrict_oom_score_adj = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
"""


def cni_config(host: LabHost) -> str:
    """The pod network's CNI config on a node: flannel's vxlan backend's bridge, without flannel's daemon."""
    conf = {
        "cniVersion": "0.4.0",
        "name": "dltestbed",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "mtu": MTU,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": pod_subnet(host)}]],
                    "routes": [{"dst": "0.0.0.0/0"}],  # as flannel: the other hosts through this one
                },
            }
        ],
    }
    return json.dumps(conf, indent=2) + "\n"


def kubelet_config(lab: LabState, host: LabHost) -> str:
    """The kubelet's KubeletConfiguration: x509 clients of the cluster's CA alone, cgroupfs below the host's
    cgroup, no iptables, no swap check, and eviction only when the machine is nearly full (a shared lab)."""
    conf = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": host.ip,
        "port": 10250,
        "readOnlyPort": 0,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": f"{ETC}/pki/ca.crt"},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": cgroup_root(lab, host),
        "failSwapOn": False,
        "makeIPTablesUtilChains": False,
        "resolvConf": "/etc/resolv.conf",
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "2%", "imagefs.available": "2%"},
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        "healthzBindAddress": "127.0.0.1",
        "nodeStatusUpdateFrequency": "4s",
    }
    return yaml.safe_dump(conf, sort_keys=False)


def prepare_host(lab: LabState, host: LabHost, upper: Path, kubeconfig: str, ca_cert: bytes, pause_tar: bytes) -> None:
    """The node's files, in the host's overlay's upper layer."""
    etc = upper / ETC.lstrip("/")
    (etc / "pki").mkdir(parents=True, exist_ok=True)
    (etc / "pki" / "ca.crt").write_bytes(ca_cert)
    kc = etc / "kubelet.kubeconfig"
    kc.write_text(kubeconfig)
    kc.chmod(0o600)
    (etc / "kubelet.yaml").write_text(kubelet_config(lab, host))
    (etc / "pause.tar").write_bytes(pause_tar)
    for name, value in KERNEL_TUNABLES.items():
        f = etc / "sysctl" / name.replace("/", ".")
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"{value}\n")
    conf = upper / CONTAINERD_CONF.lstrip("/")
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(containerd_config())
    cni = upper / "etc" / "cni" / "net.d"
    cni.mkdir(parents=True, exist_ok=True)
    (cni / "10-dltestbed.conflist").write_text(cni_config(host))
    (upper / "var" / "log").mkdir(parents=True, exist_ok=True)


def host_folders(host_dir: Path, merged: str) -> list[str]:
    """Start-script lines, before the pivot: the node's storage on the real filesystem (containerd's overlay
    snapshots cannot live on the host's overlay), and kubelet's kernel settings bound over /proc/sys."""
    q = shlex.quote
    cmds = []
    for name, target in STORAGE.items():
        cmds += [
            f"mkdir -p {q(str(host_dir / name))} {merged}{target}",
            f"mount --bind {q(str(host_dir / name))} {merged}{target}",
        ]
    for name in KERNEL_TUNABLES:
        cmds.append(f"mount --bind {merged}{ETC}/sysctl/{name.replace('/', '.')} {merged}/proc/sys/{name}")
    return cmds


def host_commands(lab: LabState, host: LabHost) -> list[str]:
    """Start-script lines, in the host's root before its sshd: the kubelet's cgroup root in every hierarchy
    (cpuset's levels given their parent's CPUs and memory nodes), containerd, the sandbox image, the kubelet."""
    q = shlex.quote
    root = cgroup_root(lab, host)
    cgroup_dirs = (
        "if [ -e /sys/fs/cgroup/cgroup.controllers ]; then set -- /sys/fs/cgroup; "
        "else set -- $(find /sys/fs/cgroup -mindepth 1 -maxdepth 1 -type d ! -name unified); fi"
    )
    parts = " ".join(q(p) for p in root.strip("/").split("/"))
    copy = 'for f in cpuset.cpus cpuset.mems; do [ ! -e "$p/$f" ] || [ -s "$p/$f" ] || cat "$up/$f" > "$p/$f"; done'
    make_root = (
        f'for h in "$@"; do p=$h; for part in {parts}; do up=$p; p="$p/$part"; mkdir -p "$p"; {copy}; done; done'
    )
    kubelet = [
        build.binary("kubelet"),
        f"--config={ETC}/kubelet.yaml",
        f"--kubeconfig={ETC}/kubelet.kubeconfig",
        "--container-runtime=remote",
        f"--container-runtime-endpoint=unix://{SOCKET}",
        f"--hostname-override={host.name}",
        f"--node-ip={host.ip}",
        f"--root-dir={STORAGE['kubelet']}",
        "--v=1",
    ]
    return [
        cgroup_dirs,
        make_root,
        f"containerd --config {CONTAINERD_CONF} >/var/log/containerd.log 2>&1 &",
        f"i=0; while [ ! -S {SOCKET} ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done",
        f"ctr --address {SOCKET} -n k8s.io images import {ETC}/pause.tar >/var/log/dltestbed-pause.log 2>&1",
        f"{shlex.join(kubelet)} >/var/log/kubelet.log 2>&1 &",
    ]


def overlay_commands(lab: LabState, host: LabHost) -> list[list[str]]:
    """iproute2 commands, each to run with `-n <the host's network namespace>` after its program, that make its
    VXLAN device and a route, neighbour and forwarding entry for each other host's pod subnet: flannel's vxlan
    backend, written down once (the hosts are known when the lab is made). A device's MAC is derived from its
    host's index, so every host knows every other's without asking. Pure."""
    out = [
        ["ip", "link", "add", VXLAN, "type", "vxlan", "id", str(VNI), "local", host.ip, "dev", "eth0", *VXLAN_ARGS],
        ["ip", "link", "set", VXLAN, "address", vtep_mac(host), "mtu", str(MTU), "up"],
        ["ip", "addr", "add", f"{_first(host)}/32", "dev", VXLAN],
    ]
    for other in lab.hosts:
        if other is host:
            continue
        out += [
            ["ip", "route", "replace", pod_subnet(other), "via", _first(other), "dev", VXLAN, "onlink"],
            ["ip", "neigh", "replace", _first(other), "lladdr", vtep_mac(other), "dev", VXLAN, "nud", "permanent"],
            ["bridge", "fdb", "append", vtep_mac(other), "dev", VXLAN, "dst", other.ip],
        ]
    return out


def _first(host: LabHost) -> str:
    """The network address of the host's pod subnet: its VXLAN device's address, as flannel gives it."""
    return pod_subnet(host).split("/")[0]


def vtep_mac(host: LabHost) -> str:
    """A host's VXLAN device's MAC: locally administered, its index in the last two bytes."""
    return f"0e:d1:7b:00:{host.index >> 8 & 0xFF:02x}:{host.index & 0xFF:02x}"
