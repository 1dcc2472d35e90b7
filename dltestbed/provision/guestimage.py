"""The guest image: Debian (debootstrap) with a kernel, systemd, sshd, python3, the workload's venv
installed from the same wheelhouse as every other target, and Podman with the same workload image
loaded (for containers in the VM). Built offline, cached by the hash of its inputs.

Layout of a built image (a folder): disk.qcow2, vmlinuz, initrd.img (direct kernel boot), image.json.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar

from dltestbed import locks, paths
from dltestbed.provision import image as ctr_image
from dltestbed.provision.cache import prune
from dltestbed.provision.guestfiles import GRAPHROOT, SEED_SCRIPT, SEED_UNIT, SSHD_CONF, STORAGE_CONF
from dltestbed.provision.image import ImageError
from dltestbed.provision.wheelhouse import Wheelhouse
from dltestbed.vms.images import GUEST_VENV, VENV_MANIFEST

GUEST_PACKAGES = (
    "linux-image-amd64",
    "systemd-sysv",
    "udev",
    "dbus",
    "openssh-server",
    "python3",
    "python3-venv",
    "iproute2",
    "kmod",
    "podman",
    "numactl",
    # debootstrap does not resolve virtual packages or alternatives: podman's needs, named
    "netavark",
    "crun",
    "conmon",
    "golang-github-containers-image",
)
RECIPE_VERSION = "guest v2"  # v2: the venv linked from the workload image's layer
HEADROOM_BYTES = 2 * 1024**3  # free space left in the guest's root filesystem
CMDLINE = "root=/dev/vda rw console=ttyS0 net.ifnames=0"  # not quiet: the console log shows a failed boot


@dataclass(frozen=True)
class GuestImage:
    """A built guest image and what went into it."""

    path: Path  # the folder
    key: str
    container_digest: str  # the workload image loaded into the guest's Podman (cvm)
    container_tag: str
    size_bytes: int  # disk.qcow2 on disk
    build_seconds: float
    frameworks: tuple[str, ...] = ()  # those its venv and Podman image carry (`wheelhouse.carried`)
    format: ClassVar[str] = "qcow2"
    prefix: ClassVar[str] = "guest-"  # its volumes in a remote pool: guest-<key>.qcow2|.vmlinuz|.initrd|.ok
    cmdline: ClassVar[str] = CMDLINE  # direct kernel boot
    recorded_name: ClassVar[str] = ""  # runs on it carry no vm_image_name
    min_disk_gib: ClassVar[int] = 0  # the image's own size, plus the headroom built into it

    @property
    def describe(self) -> str:
        """For messages."""
        return "the guest image"

    @property
    def virtual_size(self) -> int:
        """Bytes the guest sees (qemu-img info)."""
        proc = subprocess.run(
            ["qemu-img", "info", "--output=json", str(self.disk)], capture_output=True, text=True, timeout=60
        )
        if proc.returncode != 0:
            raise ImageError(f"qemu-img info {self.disk}: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
        return int(json.loads(proc.stdout)["virtual-size"])

    @property
    def disk(self) -> Path:
        """The base disk every VM's overlay points to."""
        return self.path / "disk.qcow2"

    @property
    def kernel(self) -> Path:
        """For direct kernel boot."""
        return self.path / "vmlinuz"

    @property
    def initrd(self) -> Path:
        """For direct kernel boot."""
        return self.path / "initrd.img"


def _key(house: Wheelhouse, container: ctr_image.Image) -> str:
    parts = [
        RECIPE_VERSION,
        ctr_image.SUITE,
        " ".join(GUEST_PACKAGES),
        SEED_SCRIPT,
        SEED_UNIT,
        SSHD_CONF,
        STORAGE_CONF,
        CMDLINE,
        house.manifest,
        container.digest,
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def find(house: Wheelhouse, container: ctr_image.Image) -> GuestImage | None:
    """The image for these inputs if it was built already."""
    folder = paths.vm_images_root() / _key(house, container)
    meta = folder / "image.json"
    if not meta.exists():
        return None
    data = {k: v for k, v in json.loads(meta.read_text()).items() if k not in ("path", "frameworks")}
    return GuestImage(path=folder, **data, frameworks=house.frameworks)


def _run(argv: list[str], what: str, timeout: float = 1800, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    if proc.returncode != 0:
        last = [line for line in proc.stderr.splitlines() if line.strip()]
        raise ImageError(f"{what} failed: {last[-1] if last else f'exit {proc.returncode}'}")


@contextlib.contextmanager
def _mounted(root: Path) -> Iterator[None]:
    """/proc, /sys and /dev inside a chroot, always unmounted again."""
    done: list[Path] = []
    try:
        for src, fstype in (("/proc", "proc"), ("/sys", "sysfs"), ("/dev", None)):
            target = root / src.lstrip("/")
            target.mkdir(exist_ok=True)
            argv = (
                ["mount", "--bind", src, str(target)]
                if fstype is None
                else ["mount", "-t", fstype, fstype, str(target)]
            )
            _run(argv, f"mount {src} in the guest tree")
            done.append(target)
        yield
    finally:
        for target in reversed(done):
            subprocess.run(["umount", "-l", str(target)], capture_output=True)


def _write(root: Path, rel: str, text: str, mode: int = 0o644) -> None:
    p = root / rel.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    p.chmod(mode)


def build(house: Wheelhouse, container: ctr_image.Image, out: Path | None = None) -> GuestImage:
    """Build (or find) the guest image for a wheelhouse and the Podman workload image; `out` gets a copy."""
    found = find(house, container)
    if found is None:
        with locks.beside(paths.vm_images_root() / _key(house, container), "the guest image build"):
            found = find(house, container) or _build(house, container)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        for f in ("disk.qcow2", "vmlinuz", "initrd.img", "image.json"):
            shutil.copy2(found.path / f, out / f)
    return found


def _build(house: Wheelhouse, container: ctr_image.Image) -> GuestImage:
    for tool in ("qemu-img", "mkfs.ext4", "chroot"):
        if not shutil.which(tool):
            raise ImageError(f"{tool} is not installed (bash scripts/install.sh --vm installs what VMs need)")
    if container.runtime != "podman":
        raise ImageError("the guest image carries the Podman workload image; build it with --runtime podman")
    started = time.monotonic()
    key = _key(house, container)
    folder = paths.vm_images_root() / key
    folder.parent.mkdir(parents=True, exist_ok=True)
    tar = ctr_image.rootfs(packages=GUEST_PACKAGES)
    with tempfile.TemporaryDirectory(prefix="dltestbed-guest-", dir=folder.parent) as tmp:
        work = Path(tmp)
        root = work / "root"
        root.mkdir()
        _run(["tar", "-C", str(root), "--numeric-owner", "-xf", str(tar)], "unpacking the guest root filesystem")
        _configure(root)
        _load_container_image(root, container)
        if not _venv_from_image(root, container, house):
            install_workload(root, house)
        for f in ("etc/ssh/ssh_host_rsa_key", "etc/ssh/ssh_host_ecdsa_key", "etc/ssh/ssh_host_ed25519_key"):
            for suffix in ("", ".pub"):
                (root / (f + suffix)).unlink(missing_ok=True)  # every VM gets its own, from its seed
        staged = work / "out"
        staged.mkdir()
        kernel = sorted((root / "boot").glob("vmlinuz-*"))
        initrd = sorted((root / "boot").glob("initrd.img-*"))
        if not kernel or not initrd:
            raise ImageError("the guest tree has no kernel or initrd in /boot (linux-image-amd64 missing?)")
        shutil.copy2(kernel[-1], staged / "vmlinuz")
        shutil.copy2(initrd[-1], staged / "initrd.img")
        used = int(
            subprocess.run(["du", "-sb", str(root)], capture_output=True, text=True, check=True).stdout.split()[0]
        )
        raw = work / "disk.raw"
        with raw.open("wb") as disk:
            disk.truncate(int(used * 1.15) + HEADROOM_BYTES)
        _run(["mkfs.ext4", "-q", "-F", "-L", "dltestbed-root", "-d", str(root), str(raw)], "mkfs.ext4 -d")
        shutil.rmtree(root)
        _run(["qemu-img", "convert", "-O", "qcow2", str(raw), str(staged / "disk.qcow2")], "qemu-img convert")
        raw.unlink()
        img = GuestImage(
            path=folder,
            key=key,
            container_digest=container.digest,
            container_tag=container.tag,
            size_bytes=(staged / "disk.qcow2").stat().st_blocks * 512,
            build_seconds=round(time.monotonic() - started, 1),
            frameworks=house.frameworks,
        )
        meta = {k: v for k, v in asdict(img).items() if k != "path"}
        (staged / "image.json").write_text(json.dumps(meta, indent=2) + "\n")
        if folder.exists():
            shutil.rmtree(folder)
        staged.rename(folder)
    prune(
        [p for p in paths.vm_images_root().iterdir() if p.is_dir() and not p.name.startswith("dltestbed-guest-")],
        current=folder,
    )
    return img


def _configure(root: Path) -> None:
    _write(root, "/usr/local/sbin/dltestbed-seed", SEED_SCRIPT, 0o755)
    _write(root, "/etc/systemd/system/dltestbed-seed.service", SEED_UNIT)
    wants = root / "etc/systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    link = wants / "dltestbed-seed.service"
    link.unlink(missing_ok=True)
    link.symlink_to("/etc/systemd/system/dltestbed-seed.service")
    _write(root, "/etc/ssh/sshd_config.d/dltestbed.conf", SSHD_CONF)
    _write(root, "/etc/containers/storage.conf", STORAGE_CONF)
    _write(root, "/etc/fstab", "/dev/vda / ext4 defaults,errors=remount-ro 0 1\n")
    _write(root, "/etc/hostname", "dltestbed-guest\n")
    # no login prompt is needed on the serial console: its log is for boot messages
    (root / "etc/systemd/system/serial-getty@ttyS0.service").unlink(missing_ok=True)
    mask = root / "etc/systemd/system/serial-getty@ttyS0.service"
    mask.symlink_to("/dev/null")


def install_workload(root: Path, house: Wheelhouse) -> None:
    """The workload venv (/opt/dltestbed/venv, with its manifest) in a Debian root tree, from the wheelhouse. The
    import check writes the bytecode of what the workload imports (its frameworks too) here, at the build
    machine's speed: pip installs with --no-compile, and a guest's first run would otherwise compile TensorFlow's
    modules itself (minutes in an emulated guest; ext4's -d keeps the sources' times, so the bytecode stays valid)."""
    dest = root / "tmp/wheelhouse"
    shutil.copytree(house.path, dest)
    pip = f"{GUEST_VENV}/bin/pip install -q --no-index --no-compile"
    script = (
        f"python3 -m venv {GUEST_VENV} && {pip} --find-links /tmp/wheelhouse -r "
        f"/tmp/wheelhouse/requirements.txt && {pip} --no-deps /tmp/wheelhouse/{house.wheel} "
        f"&& {GUEST_VENV}/bin/python -c '{house.imports}' "
        f"&& cp /tmp/wheelhouse/manifest.txt {GUEST_VENV}/{VENV_MANIFEST}"
    )
    in_chroot(root, script, "installing the workload in the guest tree")
    shutil.rmtree(dest)


def in_chroot(root: Path, script: str, what: str) -> None:
    """A shell script run inside a Debian root tree, with /proc, /sys and /dev mounted there for it; an ImageError
    naming `what` when it fails."""
    with _mounted(root):
        _run(["chroot", str(root), "/bin/sh", "-c", script], what)


def _storage(root: Path) -> Path:
    """The guest tree's Podman store (its storage.conf's graphroot)."""
    return root / GRAPHROOT.lstrip("/")


def _venv_from_image(root: Path, container: ctr_image.Image, house: Wheelhouse) -> bool:
    """The guest's venv as the workload image's own: its files hard-linked from the image's layer in the guest's
    Podman store, so vm and cvm run the same files, pip and the import check do not run a second time and the
    disk holds one copy (ext4's -d keeps the links; Python and pip replace a file, never write one in place).
    Only for an image on dltestbed's own root filesystem, whose python3 is the guest's; False where it is not
    (another base), or where no single layer holds the venv: the venv is then installed from the wheelhouse."""
    if container.tag != ctr_image.tag_of(house):
        return False
    venv = GUEST_VENV.lstrip("/")
    layers = (_storage(root) / "overlay").iterdir()
    found = [d / "diff" / venv for d in layers if (d / "diff" / venv / "pyvenv.cfg").is_file()]
    if len(found) != 1:
        return False
    dest = root / venv
    dest.parent.mkdir(parents=True, exist_ok=True)
    _run(["cp", "-al", str(found[0]), str(dest)], "linking the workload image's venv into the guest tree")
    manifest = dest / VENV_MANIFEST
    manifest.unlink(missing_ok=True)  # a link to the layer's file would change the layer
    shutil.copyfile(house.path / "manifest.txt", manifest)
    return True


def _load_container_image(root: Path, container: ctr_image.Image) -> None:
    """Copy the Podman workload image into the guest's own storage, so cvm runs the same digest: store to store
    (`podman push` to a containers-storage reference), its layers never compressed on the way as an archive's
    save and load would (a minute and more of gzip for gigabytes of layers); then its id checked there."""
    storage = _storage(root)
    storage.mkdir(parents=True, exist_ok=True)
    with _runroot(storage) as runroot:
        dest = f"containers-storage:[overlay@{storage}+{runroot}]localhost/{container.tag}"
        argv = ["podman", "push", "--quiet", container.tag, dest]
        _run(argv, "copying the workload image into the guest's Podman", env=ctr_image.runtime_env("podman"))
    with _runroot(storage) as runroot:
        store = ["--root", str(storage), "--runroot", runroot, "--storage-driver", "overlay"]
        got = ctr_image.image_id("podman", f"localhost/{container.tag}", store)
    if got != container.digest:
        said = got or "none (it is not there)"
        raise ImageError(f"the guest's copy of {container.tag} has id {said}, not {container.digest}")


@contextlib.contextmanager
def _runroot(storage: Path) -> Iterator[str]:
    """A runroot for Podman on the guest tree's storage; after it, nothing stays mounted, and what a store's user
    leaves beside the images is gone (libpod's database remembers its --root and --runroot and would override the
    guest's own paths with them): the images and layers themselves are path-free."""
    try:
        with tempfile.TemporaryDirectory(prefix="dlt-") as runroot:  # podman wants a runroot under 50 characters
            try:
                yield runroot
            finally:
                subprocess.run(["umount", "-R", str(storage / "overlay")], capture_output=True)
    finally:
        (storage / "libpod" / "bolt_state.db").unlink(missing_ok=True)
        (storage / "defaultNetworkBackend").unlink(missing_ok=True)
