"""The workload in a benchmark VM. dltestbed's guest image carries it; a user's own image may have it
baked in, or not. Checked over SSH (the installed manifest against this build's wheelhouse), and when
it is missing or older, installed by the same workload role as on any host: ansible over SSH to the
VM, through its libvirt host when that host is remote."""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from dltestbed import paths
from dltestbed.inventory import Host
from dltestbed.provision.ansible import Play, run_playbook, site_vars
from dltestbed.provision.wheelhouse import Wheelhouse, source_root
from dltestbed.results.records import new_id
from dltestbed.transport.ssh import known_hosts_files
from dltestbed.vms.hypervisor import VMError
from dltestbed.vms.images import GUEST_VENV, VENV_MANIFEST
from dltestbed.vms.record import VMRecord, guest_ssh

CHECK_SCRIPT = """printf 'manifest=%s\\n' "$(cat {venv}/{manifest} 2>/dev/null)"
printf 'python=%s\\n' "$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)"
"""


def parse_check(text: str) -> tuple[str, str]:
    """(installed manifest, guest python major.minor) from CHECK_SCRIPT's output; '' for what is missing."""
    values = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    return values.get("manifest", "").strip(), values.get("python", "").strip()


def _controller_python() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def _check(rec: VMRecord, via: Host | None) -> tuple[str, str]:
    lines: list[str] = []
    script = CHECK_SCRIPT.format(venv=shlex.quote(GUEST_VENV), manifest=VENV_MANIFEST)
    res = guest_ssh(rec, via).run(["sh", "-c", script], timeout=120, on_line=lines.append)
    if not res.ok:
        why = " ".join(res.stderr_tail)[-200:]
        raise VMError(f"VM {rec.name}: checking its workload failed ({res.describe()}: {why})")
    return parse_check("\n".join(lines))


def ssh_args(rec: VMRecord, via: Host | None) -> str:
    """ansible_ssh_common_args for the VM: its own host key, strictly; through `via` when remote."""
    opts = ["-o", f"UserKnownHostsFile={rec.known_hosts}", "-o", "StrictHostKeyChecking=yes"]
    if via is not None:
        proxy = [
            "ssh",
            "-W",
            "%h:%p",
            "-p",
            str(via.port),
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "UserKnownHostsFile=" + " ".join(str(f) for f in known_hosts_files(via)),
        ]
        if via.key_file:
            proxy += ["-i", str(Path(via.key_file).expanduser())]
        proxy.append(f"{via.user}@{via.address}" if via.user else via.address)
        opts += ["-o", "ProxyCommand=" + shlex.join(proxy)]
    return shlex.join(opts)


def inventory_text(rec: VMRecord, via: Host | None) -> str:
    """A one-host ansible inventory for the VM."""
    host = {
        "ansible_host": rec.address,
        "ansible_port": 22,
        "ansible_user": "root",
        "ansible_ssh_private_key_file": str(rec.key_file),
        "ansible_ssh_common_args": ssh_args(rec, via),
        "dltestbed_venv": GUEST_VENV,
    }
    return yaml.safe_dump({"all": {"hosts": {rec.name: host}}}, sort_keys=False)


def ensure_workload(
    rec: VMRecord, house: Wheelhouse, via: Host | None = None, on_notice: Callable[[str], None] | None = None
) -> bool:
    """This build's workload in the VM: True when it had to be installed, False when it was there."""
    manifest, python = _check(rec, via)
    if manifest == house.manifest:
        return False
    what = f"VM {rec.name}" + (f" ({rec.image_name})" if rec.image_name else "")
    if not python:
        raise VMError(f"{what}: its image has no python3, which the workload and ansible need")
    if python != _controller_python():
        raise VMError(
            f"{what}: its image has Python {python} and this controller builds wheels for Python "
            f"{_controller_python()}; use an image with Python {_controller_python()}, or run dltestbed "
            f"from a Python {python} venv"
        )
    if on_notice:
        on_notice(f"{what}: installing the workload ({'an older one is there' if manifest else 'none there yet'})")
    private = paths.state_dir() / "provision" / new_id("v")
    private.mkdir(parents=True)
    inv = private / "inventory.yml"
    inv.write_text(inventory_text(rec, via))
    inv.chmod(0o600)
    started = time.monotonic()
    extravars = site_vars([rec.name], {rec.name: house.flavor}, {house.flavor: house})
    result = run_playbook(
        Play(source_root() / "playbooks", "site.yml", inv, extravars), private, "vm-workload", forks=1
    )
    if result.status == "canceled":  # Ctrl-C or SIGTERM reached ansible-runner, which stopped the playbook
        raise KeyboardInterrupt
    out = result.hosts.get(rec.name)
    if result.status != "successful" or out is None or not out.succeeded:
        why = out.message if out and out.message else f"ansible-playbook {result.status} (rc {result.rc})"
        raise VMError(f"{what}: installing the workload failed: {why} (see {result.artifacts}/stdout)")
    if _check(rec, via)[0] != house.manifest:
        raise VMError(f"{what}: the workload role finished but the VM has no manifest {house.manifest[:12]}…")
    if on_notice:
        on_notice(f"{what}: workload installed in {time.monotonic() - started:.0f} s")
    return True
