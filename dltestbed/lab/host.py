"""A lab host's filesystem and sshd: an overlay of / with a private upper layer, made the root of its own mount
namespace (pivot_root, not chroot: in a chroot the kernel refuses unprivileged user namespaces, which Charliecloud
and rootless Podman need), with its own UTS namespace, inside its network namespace."""

from __future__ import annotations

import os
import shlex
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

from dltestbed.lab import cgroups, kube, slurm
from dltestbed.lab.kube import node as kube_node
from dltestbed.lab.net import LabError
from dltestbed.lab.state import LabHost, LabState, labs_root

SSHD = "/usr/sbin/sshd"
HOST_KEY = "/etc/ssh/ssh_host_ed25519_key"  # the standard path, so facts and sshd agree
SSHD_CONFIG = "/etc/ssh/dltestbed_sshd_config"
MARK = "/run/dltestbed-lab-host"  # in the host's /run: its folder on this machine, read by still_ours
OLD_ROOT = "/.dltestbed-old-root"  # where pivot_root puts this machine's root, unmounted at once

_SSHD_CONFIG = """\
# written by dltestbed lab
Port 22
ListenAddress {ip}
HostKey {host_key}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PidFile none
UseDNS no
MaxStartups 100
MaxSessions 100
AcceptEnv LANG LC_* DLTESTBED_*
Subsystem sftp internal-sftp
"""


def keygen(path: Path, comment: str) -> str:
    """An ed25519 key pair at path (kept if it exists); returns the public key line."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                check=True,
                capture_output=True,
            )
        except FileNotFoundError:
            raise LabError("ssh-keygen is not installed (apt-get install openssh-client)") from None
    return path.with_suffix(".pub").read_text().strip()


def prepare(lab: LabState, host: LabHost, client_pub: str) -> str:
    """Write the host's own files into its upper layer; returns its public host key line."""
    d = host.dir(lab.dir)
    upper = d / "upper"
    for sub in ("upper", "work", "merged"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    etc = upper / "etc"
    (etc / "ssh").mkdir(parents=True, exist_ok=True)
    (etc / "hostname").write_text(host.name + "\n")
    peers = "".join(f"{h.ip}\t{h.name}\n" for h in lab.all_hosts)
    ctl = f"controller {slurm.controller_name(lab)}" if lab.slurm else "controller"
    (etc / "hosts").write_text(f"127.0.0.1\tlocalhost\n::1\tlocalhost\n{lab.bridge_ip}\t{ctl}\n{peers}")
    (etc / "resolv.conf").write_text("")  # no resolver: name lookups fail fast instead of stalling
    host_pub = keygen(upper / HOST_KEY.lstrip("/"), host.name)
    _whiteout_machine_host_keys(upper)
    (upper / SSHD_CONFIG.lstrip("/")).write_text(_SSHD_CONFIG.format(ip=host.ip, host_key=HOST_KEY))
    ssh_dir = upper / "root" / ".ssh"
    ssh_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(ssh_dir, 0o700)
    auth = ssh_dir / "authorized_keys"
    auth.write_text(client_pub + "\n")
    os.chmod(auth, 0o600)
    if lab.slurm:  # never with a bastion (plan refuses both)
        slurm.prepare_host(lab, upper)
    if lab.kubernetes:
        kube.prepare_host(lab, host, upper)
    return host_pub


def _whiteout_machine_host_keys(upper: Path) -> None:
    """Hide this machine's other SSH host keys from the host (overlay whiteouts), so the host has
    exactly one key, its own, and what it reports is what its sshd serves."""
    for key in Path("/etc/ssh").glob("ssh_host_*_key*"):
        if key.name.startswith("ssh_host_ed25519_key"):
            continue
        target = upper / "etc" / "ssh" / key.name
        if not target.exists():
            os.mknod(target, stat.S_IFCHR | 0o600, os.makedev(0, 0))


def _container_setup(d: Path, m: str) -> list[str]:
    """Container storage on the real filesystem (overlay storage cannot live on the overlay), and
    a dockerd of the host's own when Docker is installed (lab hosts have no init to start it)."""
    q = shlex.quote
    cmds = []
    for name, target in (("containers", "/var/lib/containers"), ("docker", "/var/lib/docker")):
        cmds += [f"mkdir -p {q(str(d / name))} {m}{target}", f"mount --bind {q(str(d / name))} {m}{target}"]
    return cmds


def _dockerd() -> list[str]:
    """A dockerd of the host's own when Docker is installed (lab hosts have no init to start it); after the pivot."""
    dockerd = (
        "dockerd --iptables=false --bridge=none --ip-forward=false --ip-masq=false "
        ">/var/log/dltestbed-dockerd.log 2>&1 &"
    )
    return [f"if [ -x /usr/sbin/dockerd ]; then /bin/sh -c {shlex.quote(dockerd)}; fi"]


def _cgroup_mounts(merged: str) -> list[str]:
    """Mount commands that give the host this machine's cgroup hierarchies (v1 or v2) at
    /sys/fs/cgroup, as container runtimes need; `ip netns exec` leaves a bare /sys without them."""
    cmds: list[str] = []
    try:
        with open("/proc/self/mounts", encoding="utf-8") as f:
            entries = [line.split()[:4] for line in f]
    except OSError:
        return cmds
    for source, target, fstype, opts in entries:
        if target != "/sys/fs/cgroup" and not target.startswith("/sys/fs/cgroup/"):
            continue
        where = merged + shlex.quote(target)
        cmds += [
            f"mkdir -p {where}",
            f"mount -t {shlex.quote(fstype)} -o {shlex.quote(opts)} {shlex.quote(source)} {where}",
        ]
    return cmds


def start_script(lab: LabState, host: LabHost) -> str:
    """The shell script that builds the host's root and execs its sshd (all paths quoted)."""
    d = host.dir(lab.dir)
    m = shlex.quote(str(d / "merged"))
    q = shlex.quote
    hide = q(str(d / "merged") + str(labs_root()))
    return "\n".join(
        [
            "set -e",
            f"hostname {q(host.name)}",
            f"mount -t overlay overlay -o lowerdir=/,upperdir={q(str(d / 'upper'))},workdir={q(str(d / 'work'))} {m}",
            f"mount -t proc proc {m}/proc",
            f"mount -t sysfs sysfs {m}/sys",
            *_cgroup_mounts(m),
            f"mount --rbind /dev {m}/dev",
            f"mount -t tmpfs -o mode=755 tmpfs {m}/run",
            f"mkdir -p {m}/run/sshd",
            f"mount -t tmpfs -o mode=1777,size=4g tmpfs {m}/tmp",
            f"if [ -d {hide} ]; then mount -t tmpfs -o mode=700,size=1m tmpfs {hide}; fi",  # the lab's keys
            # shared folders (a site's shared filesystem): this machine's, read-only, at the same path
            *(
                cmd
                for share in lab.shares
                for cmd in (
                    f"mkdir -p {m}{q(share)}",
                    f"mount --bind {q(share)} {m}{q(share)}",
                    f"mount -o remount,bind,ro {m}{q(share)}",
                )
            ),
            # container storage cannot live on the overlay: give it a folder of the real filesystem
            *(_container_setup(d, m) if lab.containers else []),
            # a libvirt host: this machine's libvirtd, reached through its socket (qemu+ssh runs virt-ssh-helper)
            *([f"mkdir -p {m}/run/libvirt", f"mount --bind /run/libvirt {m}/run/libvirt"] if lab.vms else []),
            *(slurm.host_folders(lab, m) if lab.slurm else []),
            *(kube_node.host_folders(d, m) if lab.kubernetes else []),
            f"printf %s {q(str(d))} > {m}{MARK}",
            # the overlay becomes the namespace's root; this machine's root is unmounted from it
            f"cd {m}",
            f"mkdir -p .{OLD_ROOT}",
            f"pivot_root . .{OLD_ROOT}",
            "cd /",
            f"umount -l {OLD_ROOT}",
            f"rmdir {OLD_ROOT}",
            *(_dockerd() if lab.containers else []),
            # a Slurm node: its munged and slurmd (they run in the host's namespaces, and die with them)
            *(slurm.host_commands(lab) if lab.slurm else []),
            # a Kubernetes node: its containerd and kubelet
            *(kube_node.host_commands(lab, host) if lab.kubernetes else []),
            f"exec {SSHD} -D -e -f {SSHD_CONFIG}",
        ]
    )


def start(lab: LabState, host: LabHost) -> int:
    """Start the host's sshd, detached; returns its pid."""
    if not Path(SSHD).exists():
        raise LabError(f"{SSHD} is missing (apt-get install openssh-server)")
    log = (host.dir(lab.dir) / "sshd.log").open("ab")
    argv = [
        "ip",
        "netns",
        "exec",
        host.netns,
        "unshare",
        "--mount",
        "--uts",
        "--propagation",
        "private",
        "--",
        "sh",
        "-c",
        start_script(lab, host),
    ]
    if host.cpus:  # inherited by sshd and all it starts: a host with fewer cores
        argv = ["taskset", "--cpu-list", host.cpus, *argv]
    if lab.capacity:  # its share of the cores its own: everything it starts is in its cgroup
        cores = cgroups.share(slurm.node_cpus(host), sum(slurm.node_cpus(h) for h in lab.hosts))
        argv = [*cgroups.prefix(cgroups.make(lab.name, host.name, cores)), *argv]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    log.close()
    return proc.pid


def still_ours(pid: int | None, host_dir: Path) -> bool:
    """Whether a recorded pid is still this host's sshd: its root holds the host's mark, naming the host's folder.
    A pid alone proves nothing once the process is gone (pids are reused, within minutes on a busy machine)."""
    if not pid:
        return False
    try:
        return Path(f"/proc/{pid}/root{MARK}").read_text() == str(host_dir)
    except OSError:
        return False


def alive(pid: int | None) -> bool:
    """True when the process exists and is not a zombie."""
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


_BANNER = """import socket, sys
try:
    s = socket.create_connection((sys.argv[1], 22), timeout=float(sys.argv[2])); s.settimeout(float(sys.argv[2]))
    print(s.recv(64).decode("ascii", "replace").strip())
except OSError:
    pass
"""


def ssh_banner(ip: str, timeout: float = 1.0, netns: str | None = None) -> str | None:
    """The SSH banner of ip:22 (seen from inside network namespace `netns` when given), or None when
    nothing answers."""
    if netns is not None:
        argv = ["ip", "netns", "exec", netns, sys.executable, "-c", _BANNER, ip, str(timeout)]
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 10).stdout.strip()
        except subprocess.TimeoutExpired:
            return None
        return out if out.startswith("SSH-") else None
    try:
        with socket.create_connection((ip, 22), timeout=timeout) as s:
            s.settimeout(timeout)
            data = s.recv(64).decode("ascii", "replace")
            return data.strip() if data.startswith("SSH-") else None
    except OSError:
        return None


def wait_ready(lab: LabState, host: LabHost, timeout: float = 20.0) -> None:
    """Wait until the host's sshd answers; raise LabError quoting its log if it does not."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ssh_banner(host.ip):
            return
        if not alive(host.pid):
            break
        time.sleep(0.05)
    log = host.dir(lab.dir) / "sshd.log"
    tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
    why = "its sshd exited" if not alive(host.pid) else f"no SSH answer in {timeout:.0f} s"
    raise LabError(f"lab host {host.name} ({host.ip}): {why}" + (f": {tail[0]}" if tail else "") + f" (log: {log})")
