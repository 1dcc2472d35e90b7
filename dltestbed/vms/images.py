"""What a VM boots from, as libvirt needs it: dltestbed's guest image (built by provision) or a
user's own cloud image. The lifecycle reads only these attributes, never which kind it is."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol


class BaseImage(Protocol):
    """A VM's base image: uploaded once per host into the pool under `prefix` + `key`."""

    @property
    def key(self) -> str: ...
    @property
    def format(self) -> str: ...  # qcow2 | raw
    @property
    def prefix(self) -> str: ...  # its volumes in a pool: <prefix><key>.<suffix>
    @property
    def container_tag(self) -> str: ...  # the workload image in the guest's Podman ("" when none: no cvm)
    @property
    def container_digest(self) -> str: ...
    @property
    def size_bytes(self) -> int: ...  # bytes an upload sends

    @property
    def describe(self) -> str: ...
    @property
    def disk(self) -> Path: ...
    @property
    def kernel(self) -> Path | None: ...  # direct kernel boot; None: its own boot loader
    @property
    def initrd(self) -> Path | None: ...
    @property
    def cmdline(self) -> str | None: ...  # the kernel's, with direct kernel boot
    @property
    def virtual_size(self) -> int: ...  # bytes the guest sees
    @property
    def recorded_name(self) -> str: ...  # in the VM's record and runs' fingerprints; "" for the guest image
    @property
    def min_disk_gib(self) -> int: ...  # the overlay's least size when none is asked


GUEST_VENV = "/opt/dltestbed/venv"  # where the workload lives in a guest (built in, or installed by provision)
VENV_MANIFEST = "dltestbed-manifest.txt"  # in the venv: the manifest of the wheelhouse it was installed from
