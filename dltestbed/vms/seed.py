"""The seed disk a VM boots with: keys, host key, name and static address, for dltestbed's guest image
(plain files it reads) and for cloud-init (NoCloud: meta-data, user-data, network-config)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from dltestbed.vms.hypervisor import SUBNET, VMError


def mac(name: str) -> str:
    """A stable MAC for a VM name (qemu's 52:54:00 prefix)."""
    h = hashlib.sha256(name.encode()).digest()
    return f"52:54:00:{h[0]:02x}:{h[1]:02x}:{h[2]:02x}"


def run_tool(argv: list[str], what: str) -> None:
    """Run a host tool (mkfs.vfat, mcopy, ssh-keygen); a VMError with its last stderr line when it fails."""
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise VMError(f"{what} failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")


def seed_disk(folder: Path, name: str, address: str, pubkey: str, host_key: Path) -> Path:
    """The seed disk: a small vfat volume labelled cidata. Our image reads dltestbed/*; cloud-init
    (a user's cloud image) reads meta-data, user-data and network-config."""
    gateway = f"{SUBNET}.1"  # the host's end of the bridge: a jump host reaches the VM through it
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "dltestbed").mkdir()
        (d / "dltestbed" / "authorized_keys").write_text(pubkey)
        shutil.copy(host_key, d / "dltestbed" / "ssh_host_ed25519_key")
        shutil.copy(host_key.with_suffix(".pub"), d / "dltestbed" / "ssh_host_ed25519_key.pub")
        (d / "dltestbed" / "hostname").write_text(name + "\n")
        (d / "dltestbed" / "network").write_text(f"ADDRESS={address}/24\nGATEWAY={gateway}\n")
        (d / "meta-data").write_text(f"instance-id: {name}\nlocal-hostname: {name}\n")
        private = host_key.read_text()
        indented = "\n".join("      " + line for line in private.strip().splitlines())
        (d / "user-data").write_text(
            "#cloud-config\n"
            f"ssh_authorized_keys:\n  - {pubkey.strip()}\n"
            "disable_root: false\n"  # dltestbed logs in as root, as into its own image
            "ssh_pwauth: false\n"
            "ssh_deletekeys: true\n"
            "ssh_genkeytypes: [ed25519]\n"  # none: the one below (given), which the controller knows
            f"ssh_keys:\n  ed25519_private: |\n{indented}\n"
            f"  ed25519_public: {host_key.with_suffix('.pub').read_text().strip()}\n"
        )
        # Version 1, with the gateway on the subnet: every cloud-init renders that with the distribution's
        # own tools (ifupdown's `gateway`, netplan, networkd). A v2 route is rendered for ifupdown as
        # `route add` (net-tools, absent from Debian 12's cloud images), and cloud-init 22 has no `to: default`.
        (d / "network-config").write_text(
            f"version: 1\nconfig:\n  - type: physical\n    name: eth0\n    mac_address: '{mac(name)}'\n"
            f"    subnets:\n      - type: static\n        address: {address}\n        netmask: 255.255.255.0\n"
            f"        gateway: {gateway}\n"
        )
        seed = folder / "seed.img"
        run_tool(["mkfs.vfat", "-n", "CIDATA", "-C", str(seed), "2048"], "mkfs.vfat for the seed disk")
        for entry in sorted(d.iterdir()):
            run_tool(["mcopy", "-s", "-i", str(seed), str(entry), "::"], "mcopy to the seed disk")
        seed.chmod(0o600)
    return seed
