"""A cloud image like the ones users bring (Debian's genericcloud, Ubuntu's cloud images): a partitioned
disk with its own boot loader, cloud-init reading a NoCloud seed for keys, host keys and network, and
no dltestbed in it. There is no image registry here, so it is built from a debootstrap root filesystem: the
guest image's (dltestbed's guest packages; the VM tier has built it already, so no second debootstrap runs) with
cloud-init and ifupdown (the renderer Debian 12's cloud images use) and cloud-guest-utils (growpart) installed on
it by apt; extlinux in the MBR and on an ext4 partition (no direct kernel boot).

With `venv`, the image also carries a workload venv of the same dependencies but no manifest, as an
image a site baked long ago: dltestbed finds no manifest and runs the workload role through SSH,
whose pip finds every dependency already installed. That runs the whole install path into a VM in
minutes instead of the ~N minutes a TensorFlow install takes under TCG. Cached by its recipe (and the
wheelhouse's requirements) under the test cache.

    python -m tests.cloudimage [--venv]     # build one by hand; prints its path
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from dltestbed import paths
from dltestbed.provision import image as ctr_image
from dltestbed.provision import wheelhouse
from dltestbed.provision.guestimage import GUEST_PACKAGES, in_chroot, install_workload
from dltestbed.provision.wheelhouse import Wheelhouse

# on the guest's root filesystem (a kernel, systemd, sshd, python3 and its venv, iproute2 are there already)
PACKAGES = ("cloud-init", "cloud-guest-utils", "ifupdown", "sudo", "ca-certificates")
APT = (
    "export DEBIAN_FRONTEND=noninteractive && apt-get -qq update && apt-get -qq install -y --no-install-recommends "
    + " ".join(PACKAGES)
    + " >/dev/null && apt-get -qq clean && rm -rf /var/lib/apt/lists/*"
)  # no recommends, as debootstrap's --include installs none
OFFSET = 1024 * 1024  # the partition starts at 1 MiB
EXTLINUX = """DEFAULT linux
TIMEOUT 0
PROMPT 0
LABEL linux
  KERNEL /boot/{kernel}
  INITRD /boot/{initrd}
  APPEND root=LABEL=cloudimg-rootfs ro console=ttyS0
"""
RECIPE = "cloudimage v2\n" + " ".join(GUEST_PACKAGES) + "\n" + APT + EXTLINUX


def _run(*argv: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {proc.stderr.strip()[-500:]}")


def build(house: Wheelhouse | None = None) -> Path:
    """The cloud image as a qcow2, built once per recipe (older builds are removed); with a venv of
    the wheelhouse's dependencies baked in when `house` is given."""
    inputs = RECIPE + (house.requirements.read_text() if house else "")
    name = f"cloud-{'venv-' if house else ''}{hashlib.sha256(inputs.encode()).hexdigest()[:12]}.qcow2"
    cached = paths.cache_dir() / "test-images" / name
    if not cached.exists():
        cached.parent.mkdir(parents=True, exist_ok=True)
        for old in cached.parent.glob(name.rsplit("-", 1)[0] + "-*.qcow2"):
            old.unlink()
        _build(cached, house)
    return cached


def _build(dest: Path, house: Wheelhouse | None) -> None:
    tar = ctr_image.rootfs(packages=GUEST_PACKAGES)
    with tempfile.TemporaryDirectory(prefix="cloudimg-", dir=dest.parent) as tmp:
        work = Path(tmp)
        root = work / "root"
        root.mkdir()
        _run("tar", "-C", str(root), "--numeric-owner", "-xf", str(tar))
        _install_cloud_packages(root)
        kernel = sorted((root / "boot").glob("vmlinuz-*"))[-1].name
        initrd = sorted((root / "boot").glob("initrd.img-*"))[-1].name
        (root / "boot/extlinux").mkdir(parents=True)
        (root / "boot/extlinux/extlinux.conf").write_text(EXTLINUX.format(kernel=kernel, initrd=initrd))
        (root / "etc/fstab").write_text("LABEL=cloudimg-rootfs / ext4 defaults 0 1\n")
        (root / "etc/hostname").write_text("localhost\n")
        (root / "etc/machine-id").write_text("")  # a new one per instance, as in real cloud images
        (root / "etc/network/interfaces").write_text(
            "auto lo\niface lo inet loopback\n\nsource /etc/network/interfaces.d/*\n"
        )
        for key in (root / "etc/ssh").glob("ssh_host_*"):
            key.unlink()  # cloud-init writes the instance's own
        if house is not None:
            install_workload(root, house)
            (root / "opt/dltestbed/venv/dltestbed-manifest.txt").unlink()  # "baked long ago": not this build
        used = int(
            subprocess.run(["du", "-sk", str(root)], capture_output=True, text=True, check=True).stdout.split()[0]
        )
        size_k = int(used * 1.3) + 512 * 1024
        raw = work / "disk.raw"
        with raw.open("wb") as f:
            f.truncate(OFFSET + size_k * 1024)
        subprocess.run(
            ["sfdisk", "-q", str(raw)],
            input=f"start={OFFSET // 512}, type=83, bootable\n",
            text=True,
            check=True,
            capture_output=True,
        )
        # syslinux cannot read ext4's 64bit feature
        _run(
            "mkfs.ext4",
            "-q",
            "-F",
            "-O",
            "^64bit",
            "-L",
            "cloudimg-rootfs",
            "-E",
            f"offset={OFFSET}",
            "-d",
            str(root),
            str(raw),
            f"{size_k}k",
        )
        shutil.rmtree(root)
        mnt = work / "mnt"
        mnt.mkdir()
        _run("mount", "-o", f"loop,offset={OFFSET}", str(raw), str(mnt))
        try:
            _run("extlinux", "--install", str(mnt / "boot/extlinux"))
        finally:
            _run("umount", str(mnt))
        mbr = Path("/usr/lib/syslinux/mbr/mbr.bin").read_bytes()
        with raw.open("r+b") as f:
            f.write(mbr[:440])  # boot code only: the partition table after it stays
        partial = work / "disk.qcow2"
        _run("qemu-img", "convert", "-O", "qcow2", str(raw), str(partial))
        partial.rename(dest)


def _install_cloud_packages(root: Path) -> None:
    """PACKAGES from Debian's mirror (the tree's sources.list, debootstrap's), with this machine's resolver for the
    while and no service started in the tree; then the tree's own resolv.conf again."""
    resolv, kept = root / "etc/resolv.conf", root / "etc/resolv.conf.dltestbed"
    if resolv.is_symlink() or resolv.exists():
        resolv.rename(kept)
    shutil.copyfile("/etc/resolv.conf", resolv)
    no_services = root / "usr/sbin/policy-rc.d"
    no_services.write_text("#!/bin/sh\nexit 101\n")
    no_services.chmod(0o755)
    try:
        in_chroot(root, APT, "installing the cloud image's packages")
    finally:
        no_services.unlink()
        resolv.unlink()
        if kept.is_symlink() or kept.exists():
            kept.rename(resolv)


if __name__ == "__main__":
    print(build(wheelhouse.build("cpu") if "--venv" in sys.argv else None))
