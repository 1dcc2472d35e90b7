"""A hypervisor's storage pool, all through libvirt's storage API: the VMs' disks, seeds and console
logs, and the base images uploaded into it once per image (a marker volume says an upload finished),
so nothing depends on sharing a filesystem with the host."""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import escape

from dltestbed.vms.hypervisor import Hypervisor, VMError, libvirt_module

if TYPE_CHECKING:
    from dltestbed.vms.images import BaseImage

IMAGE_PREFIXES = ("guest-", "user-")  # base images in a pool: <prefix><key>.<suffix>, and <prefix><key>.ok


def pool(conn: Any, hv: Hypervisor) -> Any:
    """The hypervisor's storage pool (a folder; defined, made and started when missing), refreshed."""
    libvirt = libvirt_module()
    try:
        p = conn.storagePoolLookupByName(hv.pool_name)
        if not p.isActive():
            p.create()
    except libvirt.libvirtError:
        xml = (
            f"<pool type='dir'><name>{hv.pool_name}</name><target><path>{_xml_text(hv.pool_dir)}</path>"
            "<permissions><mode>0711</mode></permissions></target></pool>"
        )
        try:
            p = conn.storagePoolDefineXML(xml, 0)
            p.build(0)  # makes the folder (with its mode) when missing
            p.create(0)
        except libvirt.libvirtError as exc:
            why = exc.get_error_message()
            raise VMError(f"libvirt on {hv.label}: no storage pool at {hv.pool_dir}: {why}") from None
    p.refresh(0)
    return p


def _xml_text(text: str) -> str:

    return escape(text)


def volumes(p: Any) -> dict[str, Any]:
    """The pool's volumes by name."""
    return {v.name(): v for v in p.listAllVolumes()}


def upload(conn: Any, p: Any, name: str, path: Path) -> str:
    """Upload a local file as volume `name` (replacing one of that name); its path on the host."""
    libvirt = libvirt_module()
    old = volumes(p).get(name)
    if old is not None:
        old.delete(0)
    size = path.stat().st_size
    vol = p.createXML(
        f"<volume><name>{_xml_text(name)}</name><capacity unit='bytes'>{size}</capacity>"
        "<allocation>0</allocation><target><format type='raw'/></target></volume>",
        0,
    )
    stream = conn.newStream(0)
    try:
        vol.upload(stream, 0, size, 0)
        with path.open("rb") as f:
            stream.sendAll(lambda _s, n, fh: fh.read(n), f)
        stream.finish()
    except BaseException as exc:
        with contextlib.suppress(Exception):
            stream.abort()
        with contextlib.suppress(Exception):
            vol.delete(0)
        if isinstance(exc, libvirt.libvirtError):
            raise VMError(f"uploading {path.name} failed: {exc.get_error_message()}") from None
        raise
    return str(vol.path())


def overlay(p: Any, name: str, base: str, capacity: int, base_format: str = "qcow2") -> str:
    """A qcow2 copy-on-write overlay of `base` (qcow2 or raw) as volume `name`; its path."""
    libvirt = libvirt_module()
    xml = (
        f"<volume><name>{_xml_text(name)}</name><capacity unit='bytes'>{capacity}</capacity>"
        "<target><format type='qcow2'/></target>"
        f"<backingStore><path>{_xml_text(base)}</path><format type='{_xml_text(base_format)}'/></backingStore>"
        "</volume>"
    )
    try:
        return str(p.createXML(xml, 0).path())
    except libvirt.libvirtError as exc:
        raise VMError(f"the VM's overlay could not be made: {exc.get_error_message()}") from None


@dataclass(frozen=True)
class StagedImage:
    """The base image as the host sees it."""

    disk: str
    format: str  # qcow2 | raw
    capacity: int  # the disk's virtual size
    kernel: str | None = None  # direct kernel boot (dltestbed's guest image); None: its own boot loader
    initrd: str | None = None


def stage_image(
    conn: Any,
    p: Any,
    hv: Hypervisor,
    image: BaseImage,
    in_use: set[str],
    on_notice: Callable[[str], None] | None = None,
) -> StagedImage:
    """The base image on the host. This machine uses dltestbed's guest image from its cache in place;
    anything else (a remote host, a user's image, which may sit where qemu cannot read it) is uploaded
    into the pool once (a marker volume says the upload finished). Other images' volumes there are
    removed unless a VM in `in_use` (image keys) still runs on them."""
    if hv.local and image.kernel is not None:
        return StagedImage(str(image.disk), image.format, image.virtual_size, str(image.kernel), str(image.initrd))
    capacity = image.virtual_size
    prefix = f"{image.prefix}{image.key}"
    vols = volumes(p)
    for name, vol in vols.items():
        family = next((f for f in IMAGE_PREFIXES if name.startswith(f)), None)
        key = name[len(family) :].split(".", 1)[0] if family else None
        if family and key != image.key and key not in in_use:
            vol.delete(0)
    files = {f".{image.format}": image.disk}
    if image.kernel is not None and image.initrd is not None:
        files |= {".vmlinuz": image.kernel, ".initrd": image.initrd}
    if f"{prefix}.ok" not in vols:
        if on_notice:
            on_notice(f"uploading {image.describe} ({image.size_bytes / 1e9:.2f} GB) to {hv.label}")
        started = time.monotonic()
        for suffix, path in files.items():
            upload(conn, p, prefix + suffix, path)
        took = time.monotonic() - started
        if on_notice:
            on_notice(f"uploaded in {took:.0f} s ({image.size_bytes / 1e6 / max(took, 1e-3):.0f} MB/s)")
        with tempfile.TemporaryDirectory() as tmp:
            marker = Path(tmp) / "key"
            marker.write_text(image.key + "\n")
            upload(conn, p, f"{prefix}.ok", marker)
    vols = volumes(p)
    where = {suffix: str(vols[prefix + suffix].path()) for suffix in files}
    return StagedImage(where[f".{image.format}"], image.format, capacity, where.get(".vmlinuz"), where.get(".initrd"))


def remove_volumes(p: Any, prefix: str) -> int:
    """Delete the pool's volumes whose names start with prefix; how many."""
    libvirt = libvirt_module()
    n = 0
    for name, vol in volumes(p).items():
        if name.startswith(prefix):
            with contextlib.suppress(libvirt.libvirtError):
                vol.delete(0)
                n += 1
    return n


def remove_local_pool(conn: Any, hv: Hypervisor) -> None:
    """This machine's pool, with the users' images uploaded into it (their own files stay)."""
    libvirt = libvirt_module()
    with contextlib.suppress(libvirt.libvirtError):
        p = conn.storagePoolLookupByName(hv.pool_name)
        p.refresh(0)
        for prefix in IMAGE_PREFIXES:
            remove_volumes(p, prefix)
        p.refresh(0)
        if p.numOfVolumes() == 0:
            p.destroy()
            with contextlib.suppress(libvirt.libvirtError):
                p.undefine()
    with contextlib.suppress(OSError):
        Path(hv.pool_dir).rmdir()
