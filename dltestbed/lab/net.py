"""Network plumbing with iproute2: a bridge, one namespace and veth pair per host."""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess

from dltestbed.errors import DltestbedError


class LabError(DltestbedError):
    """A lab could not be made or removed."""


def ip(*args: str, check: bool = True, netns: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run `ip ARGS` (inside netns if given); raise LabError with ip's message on failure."""
    argv = ["ip", *(["-n", netns] if netns else []), *args]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise LabError("`ip` (iproute2) is not installed") from None
    if check and proc.returncode != 0:
        raise LabError(f"`{' '.join(argv)}` failed: {proc.stderr.strip()}")
    return proc


def links() -> set[str]:
    """Names of this machine's network interfaces."""
    return {link["ifname"] for link in json.loads(ip("-j", "link", "show").stdout or "[]")}


def namespaces() -> set[str]:
    """Names of the network namespaces."""
    out = ip("-j", "netns", "list", check=False).stdout.strip()
    return {ns["name"] for ns in json.loads(out)} if out else set()


def routes_overlapping(subnet: str, ignore_dev: str) -> list[str]:
    """Routes of this machine into subnet that are not on our bridge."""
    net = ipaddress.ip_network(subnet)
    out = []
    for r in json.loads(ip("-j", "-4", "route", "show").stdout or "[]"):
        dst = r.get("dst", "")
        if dst in ("default", "") or r.get("dev") == ignore_dev:
            continue
        try:
            if ipaddress.ip_network(dst, strict=False).overlaps(net):
                out.append(f"{dst} dev {r.get('dev')}")
        except ValueError:
            continue
    return out


def make_bridge(name: str, address: str, prefix: int) -> None:
    """A bridge with the lab's gateway address, up."""
    if name not in links():
        ip("link", "add", name, "type", "bridge")
    ip("addr", "replace", f"{address}/{prefix}", "dev", name)
    ip("link", "set", name, "up")


def make_host_net(netns: str, veth: str, bridge: str, address: str, prefix: int, gateway: str) -> None:
    """A namespace wired into the bridge: eth0 inside with the host's address, lo up."""
    if netns not in namespaces():
        ip("netns", "add", netns)
    if veth not in links():
        ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns)
    ip("link", "set", veth, "master", bridge, "up")
    ip("addr", "replace", f"{address}/{prefix}", "dev", "eth0", netns=netns)
    ip("link", "set", "eth0", "up", netns=netns)
    ip("link", "set", "lo", "up", netns=netns)
    ip("route", "replace", "default", "via", gateway, netns=netns)


def hide_from(netns: str, address: str) -> None:
    """Make the namespace unable to answer `address` (this machine's end of the bridge): replies to it
    have no route, so this machine cannot reach the host, while the other lab hosts still can."""
    ip("route", "replace", "unreachable", f"{address}/32", netns=netns)


def remove_host_net(netns: str, veth: str) -> None:
    """Delete the veth first (synchronous), then the namespace. Missing parts are fine."""
    if veth in links():
        ip("link", "del", veth, check=False)
    if netns in namespaces():
        ip("netns", "del", netns, check=False)


def remove_bridge(name: str) -> None:
    """Delete the bridge if it exists."""
    if name in links():
        ip("link", "del", name, check=False)


def pids_in(netns: str) -> list[int]:
    """Processes living in a network namespace: each /proc entry's namespace compared with the named
    one (what `ip netns pids` does, without its failing as a whole when a process exits mid-scan)."""
    try:
        want = os.stat(f"/run/netns/{netns}")
    except OSError:
        return []
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            st = os.stat(f"/proc/{entry.name}/ns/net")
        except OSError:
            continue  # gone, or not ours to read
        if (st.st_dev, st.st_ino) == (want.st_dev, want.st_ino):
            out.append(int(entry.name))
    return sorted(out)
