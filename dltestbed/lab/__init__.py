"""A cluster on one machine: hosts that are network namespaces with their own sshd (root only).

`up` makes them and writes an Ansible inventory; `down` removes processes, namespaces, links,
the bridge and the files it made, and is idempotent; a crashed `up` is cleaned by the next
`up` or `down`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shlex
import shutil
import signal
import time
from dataclasses import dataclass

import yaml

from dltestbed.errors import ConfigError
from dltestbed.lab import cgroups, kube, net, slurm
from dltestbed.lab import host as lab_host
from dltestbed.lab.net import LabError
from dltestbed.lab.state import (
    LabHost,
    LabState,
    bridge_name,
    labs_root,
    netns_name,
    plan,
    veth_name,
)
from dltestbed.requests.lab import DEFAULT_SUBNET, LabSpec

__all__ = ["DEFAULT_SUBNET", "LabError", "LabSpec", "LabState", "down", "status", "up"]


def _require_root() -> None:
    if os.geteuid() != 0:
        raise ConfigError("the lab needs root (network namespaces, mounts): run as root")


def proxy_args(lab: LabState) -> str:
    """ssh arguments that reach a host through the lab's bastion (a ProxyCommand, as sites write them)."""
    assert lab.bastion is not None
    hop = [
        "ssh",
        "-i",
        str(lab.key),
        "-o",
        f"UserKnownHostsFile={lab.known_hosts}",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        "-W",
        "%h:%p",
        f"root@{lab.bastion.ip}",
    ]
    return "-o " + shlex.quote("ProxyCommand=" + shlex.join(hop))


def inventory_text(lab: LabState) -> str:
    """The lab's Ansible inventory: every host a bare-metal worker, reached with the lab's key (through
    the bastion, a host of group `bastion` and of no role, when there is one)."""
    doc: dict = {
        "all": {
            "vars": {
                "ansible_user": "root",
                "ansible_ssh_private_key_file": str(lab.key),
                "ansible_ssh_common_args": f"-o UserKnownHostsFile={lab.known_hosts} -o StrictHostKeyChecking=yes",
                "ansible_python_interpreter": "/usr/bin/python3",
            },
            "children": {
                "bare_metal": {"hosts": {h.name: {"ansible_host": h.ip} for h in lab.hosts}},
                **(
                    {
                        "container_hosts": {
                            "hosts": {h.name: None for h in lab.hosts},
                            "vars": {"dltestbed_container_runtime": "podman"},
                        }
                    }
                    if lab.containers
                    else {}
                ),
                **({"libvirt_hosts": {"hosts": {h.name: None for h in lab.hosts}}} if lab.vms else {}),
            },
        }
    }
    if lab.bastion is not None:
        children = doc["all"]["children"]
        children["bare_metal"]["vars"] = {
            "ansible_ssh_common_args": f"{doc['all']['vars']['ansible_ssh_common_args']} {proxy_args(lab)}"
        }
        children["bastion"] = {"hosts": {lab.bastion.name: {"ansible_host": lab.bastion.ip}}}
    head = (
        f"# dltestbed lab {lab.name!r}: {len(lab.hosts)} host(s) on this machine (network namespaces with\n"
        f"# their own sshd on {lab.bridge}, {lab.subnet}).\n"
        "# Written by `dltestbed lab up`; removed by `dltestbed lab teardown`.\n"
    )
    return head + yaml.safe_dump(doc, sort_keys=False)


def _seen_from(lab: LabState, h: LabHost) -> str | None:
    """The namespace a host's sshd is checked from: the bastion's for hidden hosts, else this machine's."""
    return lab.bastion.netns if lab.bastion is not None and h is not lab.bastion else None


def _same_shape(old: LabState, want: LabState) -> bool:
    """Whether a recorded lab is the one asked for: subnet, hosts and their CPUs, containers, VMs, shares,
    bastion and Slurm."""
    return (
        old.subnet == want.subnet
        and len(old.hosts) == len(want.hosts)
        and old.containers == want.containers
        and old.vms == want.vms
        and [h.cpus for h in old.hosts] == [h.cpus for h in want.hosts]
        and old.shares == want.shares
        and (old.bastion is None) == (want.bastion is None)
        and old.slurm == want.slurm
        and old.capacity == want.capacity
        and old.kubernetes == want.kubernetes
    )


def _healthy(lab: LabState) -> bool:
    ok = lab.status == "up" and all(
        lab_host.still_ours(h.pid, h.dir(lab.dir)) and lab_host.ssh_banner(h.ip, netns=_seen_from(lab, h))
        for h in lab.all_hosts
    )
    ok = ok and (not lab.slurm or bool(slurm.node_states(lab)))
    if not ok or not lab.kubernetes:
        return ok
    states = kube.node_states(lab)  # empty while the apiserver does not answer: not healthy
    return all(states.get(h.name) == "Ready" for h in lab.hosts)


def up(spec: LabSpec) -> LabState:
    """Make the lab the spec asks for (or keep a healthy one of the same shape); returns its state."""
    _require_root()
    name = spec.name
    want = plan(spec)
    if spec.capacity:
        cgroups.hierarchy()  # a machine without a CPU controller: one line, before anything is made
    if spec.slurm:
        slurm.check_installed()
    if spec.kubernetes:
        kube.check()
    old = LabState.load(name)
    same = old is not None and _same_shape(old, want)
    if old and same and _healthy(old):
        return old
    down(name)
    clash = net.routes_overlapping(want.subnet, ignore_dev=want.bridge)
    if clash:
        raise LabError(f"subnet {want.subnet} is already routed on this machine ({clash[0]}); choose --subnet")
    if spec.slurm:
        slurm.check_port_free()
    lab = want
    lab.save()  # before anything exists, so a crash from here on is cleaned by the next up/down
    try:
        _prepare_controllers(lab)
        client_pub = lab_host.keygen(lab.key, f"dltestbed-lab-{name}")
        prefix = ipaddress.ip_network(lab.subnet).prefixlen
        net.make_bridge(lab.bridge, lab.bridge_ip, prefix)
        known = []
        for h in lab.all_hosts:
            net.make_host_net(h.netns, h.veth, lab.bridge, h.ip, prefix, lab.bridge_ip)
            host_pub = lab_host.prepare(lab, h, client_pub)
            known.append(f"{h.ip},{h.name} {' '.join(host_pub.split()[:2])}")
        lab.known_hosts.write_text("\n".join(known) + "\n")
        if lab.slurm:
            slurm.start_controller(lab)
        if lab.kubernetes:
            kube.network(lab)
            kube.start(lab)  # the apiserver answers before the kubelets ask it
        for h in lab.all_hosts:
            h.pid = lab_host.start(lab, h)
            lab.save()
        for h in lab.all_hosts:
            lab_host.wait_ready(lab, h)
        if lab.bastion is not None:
            for h in lab.hosts:
                net.hide_from(h.netns, lab.bridge_ip)
        if lab.slurm:
            slurm.wait_ready(lab)
        if lab.kubernetes:
            kube.wait_ready(lab)
        lab.inventory.write_text(inventory_text(lab))
        lab.status = "up"
        lab.save()
    except BaseException:
        down(name)
        raise
    return lab


def _prepare_controllers(lab: LabState) -> None:
    """The files of the lab's Slurm and Kubernetes controllers (keys, configs, certificates), before any host's."""
    if lab.slurm:
        slurm.prepare(lab)
    if lab.kubernetes:
        kube.prepare(lab)


def _kill(pids: list[int]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        live = [p for p in pids if lab_host.alive(p)]
        for p in live:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, sig)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(lab_host.alive(p) for p in live):
            time.sleep(0.05)


def down(name: str = "lab") -> list[str]:
    """Remove everything the lab made, whether or not its state file survived. Idempotent."""
    _require_root()
    removed: list[str] = []
    lab = LabState.load(name)
    hosts: list[LabHost] = list(lab.all_hosts) if lab else []
    bridge = lab.bridge if lab else bridge_name(name)
    # namespaces and links with our names, even if the state file is gone or partial
    known_ns = {h.netns for h in hosts}
    for ns in sorted(net.namespaces()):
        if ns.startswith(netns_name(name, "")) and ns not in known_ns:
            idx = ns.removeprefix(netns_name(name, ""))
            hosts.append(
                LabHost(
                    name=f"{name}-h{idx}",
                    index=int(idx) if idx.isdigit() else 0,
                    ip="",
                    netns=ns,
                    veth=veth_name(name, idx),
                )
            )
    # Kill until the namespaces are empty: a process that was being spawned while the first round
    # was killed shows up in the next one, and must not outlive its namespace.
    first = [h.pid for h in hosts if h.pid and lab and lab_host.still_ours(h.pid, h.dir(lab.dir))]
    for _ in range(5):
        pids = sorted({*first, *(p for h in hosts for p in net.pids_in(h.netns))})
        live = [p for p in pids if lab_host.alive(p)]
        if not live:
            break
        _kill(live)
        first = []
    _kill(slurm.controller_pids(name, labs_root() / name))
    _kill(kube.pids(name, labs_root() / name))  # its control plane, and the pods in the hosts' cgroups
    removed += kube.remove_cgroups(name)
    removed += cgroups.remove(name)
    if slurm.remove_run_dir(name):
        removed.append(slurm.munge_dir(name))
    for h in hosts:
        if h.netns in net.namespaces() or h.veth in net.links():
            net.remove_host_net(h.netns, h.veth)
            removed.append(h.netns)
    for link in sorted(net.links()):
        if link.startswith(veth_name(name, "")):
            net.ip("link", "del", link, check=False)
    if bridge in net.links():
        net.remove_bridge(bridge)
        removed.append(bridge)
    d = labs_root() / name
    if d.exists():
        shutil.rmtree(d)
        removed.append(str(d))
    return removed


@dataclass(frozen=True)
class HostStatus:
    """What `lab status` shows for a host."""

    name: str
    ip: str
    netns: bool
    sshd: bool
    ssh: str | None


def status(name: str = "lab") -> tuple[LabState | None, list[HostStatus]]:
    """The lab's saved state and each host's live status."""
    lab = LabState.load(name)
    if lab is None:
        return None, []
    spaces = net.namespaces()
    return lab, [
        HostStatus(
            h.name,
            h.ip,
            h.netns in spaces,
            lab_host.still_ours(h.pid, h.dir(lab.dir)),
            lab_host.ssh_banner(h.ip, netns=_seen_from(lab, h)),
        )
        for h in lab.all_hosts
    ]
