"""A user's own disk image (a qcow2 or raw cloud image) as the VM's base instead of dltestbed's guest
image. It boots by its own boot loader; cloud-init reads the VM's keys, host key, name and address
from the seed disk every dltestbed VM gets; the workload is installed into it after boot (or found
there, baked in). It has no dltestbed container image, so it serves vm, not cvm."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from dltestbed.errors import ConfigError

FORMATS = ("qcow2", "raw")
DEFAULT_USER_DISK_GIB = 20
PREFIX = "user-"  # its volumes in a pool: user-<key>.<format> and the upload's marker user-<key>.ok


@dataclass(frozen=True)
class UserImage:
    """The image as dltestbed uses it: uploaded once per host into the pool, under its key."""

    disk: Path
    key: str  # from its path, size and modification time: a changed file is a new image
    format: str  # qcow2 | raw, as qemu-img reads it
    virtual_size: int  # bytes the guest sees
    size_bytes: int  # bytes the upload sends
    container_tag: str = ""  # no dltestbed container image in it: cvm needs dltestbed's guest image
    container_digest: str = ""
    kernel: Path | None = None  # its own boot loader boots it
    initrd: Path | None = None
    prefix: str = PREFIX
    cmdline: str | None = None  # its own boot loader has its own
    min_disk_gib: int = DEFAULT_USER_DISK_GIB  # cloud images grow their root partition at first boot

    @property
    def name(self) -> str:
        """Its file name: in the VM's record and the run's fingerprint (vm_image_name)."""
        return self.disk.name

    @property
    def recorded_name(self) -> str:
        """The name runs on it carry (vm_image_name): its file's."""
        return self.name

    @property
    def describe(self) -> str:
        """For messages."""
        return f"your image {self.name}"


def parse_info(text: str, path: str) -> tuple[str, int]:
    """(format, virtual size) from `qemu-img info --output=json`; a ConfigError for an image dltestbed
    cannot use as a VM's base."""
    try:
        info = json.loads(text)
        fmt, size = str(info["format"]), int(info["virtual-size"])
    except (ValueError, KeyError, TypeError):
        raise ConfigError(f"VM image {path}: qemu-img could not read it") from None
    if fmt not in FORMATS:
        raise ConfigError(f"VM image {path}: format {fmt}; use qcow2 or raw (qemu-img convert -O qcow2 …)")
    if info.get("backing-filename"):
        raise ConfigError(
            f"VM image {path}: it is an overlay of {info['backing-filename']}; give one self-contained "
            "image (qemu-img convert -O qcow2 flattens it)"
        )
    if info.get("encrypted"):
        raise ConfigError(f"VM image {path}: it is encrypted; dltestbed cannot give qemu its secret")
    return fmt, size


def _has_boot_sector(path: Path) -> bool:
    with path.open("rb") as f:
        head = f.read(512)
    return len(head) == 512 and head[510:512] == b"\x55\xaa"


def corruption(check_json: str, rc: int) -> str | None:
    """What `qemu-img check --output=json` found wrong with a qcow2 image (exit 2: corruptions; 1: the
    check could not finish), or None: leaked clusters alone (exit 3) waste space and harm nothing."""
    if rc in (0, 3):
        return None
    try:
        info = json.loads(check_json)
    except ValueError:
        info = {}
    n = int(info.get("corruptions") or 0) + int(info.get("check-errors") or 0)
    return f"qemu-img check finds it damaged ({n} error(s){', truncated?' if info.get('corruptions') else ''})"


def _check_qcow2(p: Path, path: str) -> None:
    proc = subprocess.run(
        ["qemu-img", "check", "--output=json", "--force-share", str(p)], capture_output=True, text=True, timeout=300
    )
    if why := corruption(proc.stdout, proc.returncode):
        raise ConfigError(f"VM image {path}: {why}")


def inspect(path: str) -> UserImage:
    """The image at `path` on this machine, checked: readable, qcow2 or raw, self-contained, and (raw)
    a disk with a boot sector — any file reads as 'raw' to qemu-img."""
    p = Path(os.path.expanduser(path)).resolve()
    if not p.is_file():
        raise ConfigError(f"VM image {path}: no such file")
    if not os.access(p, os.R_OK):
        raise ConfigError(f"VM image {path}: not readable")
    proc = subprocess.run(
        ["qemu-img", "info", "--output=json", "--force-share", str(p)], capture_output=True, text=True, timeout=60
    )
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise ConfigError(f"VM image {path}: qemu-img cannot read it: {why}")
    fmt, virtual = parse_info(proc.stdout, path)
    if fmt == "qcow2":
        _check_qcow2(p, path)
    if fmt == "raw" and not _has_boot_sector(p):
        raise ConfigError(f"VM image {path}: not a bootable disk image (no boot sector)")
    st = p.stat()
    key = hashlib.sha256(f"{p}\n{st.st_size}\n{st.st_mtime_ns}".encode()).hexdigest()[:16]
    return UserImage(disk=p, key=key, format=fmt, virtual_size=virtual, size_bytes=st.st_size)


def refuse_cvm(host_name: str | None, image_name: str) -> ConfigError:
    """The one line for cvm asked of a VM that runs a user's image (it has no dltestbed container image)."""
    on = f" on {host_name}" if host_name else ""
    return ConfigError(
        f"cvm{on}: the VM would run your image {image_name}, which has no dltestbed container image; "
        "cvm needs dltestbed's guest image (run vm alone with your image)"
    )
