"""`dltestbed image build`: the workload's container image and VM guest image, built on this machine
(no registry, no download at run time)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ClassVar, Literal

import typer

from dltestbed.choices import DEFAULT_FRAMEWORK, OTHER_FRAMEWORKS, RUNTIMES, FlavorName, RuntimeName, or_list
from dltestbed.cli.grouped import grouped
from dltestbed.panels import comma_tuple, opt

if TYPE_CHECKING:  # annotations only: the command imports these when it runs (CLI start-up)
    from dltestbed.provision.image import Image
    from dltestbed.provision.wheelhouse import Wheelhouse

app = typer.Typer(help="The images the workload runs in: containers (cbm, cvm) and VMs (vm).", no_args_is_help=True)


VmChoice = Literal["auto", "yes", "no"]  # also the guest image: auto = when qemu-img and podman are installed
CONTAINER, GUEST = "Container image", "VM guest image"
# Each line fits 78 columns (80, less rich's margin); tests/unit/test_cli.py holds it.
EXAMPLES = """[bold]Examples[/]

  dltestbed image build                       the container and guest images
  dltestbed image build --vm no --runtime podman          the container only
  dltestbed image build --framework pytorch        PyTorch beside TensorFlow
  dltestbed image build --flavor cpu --vm no     CPU builds on a GPU machine
  dltestbed image build --runtime charliecloud    an image folder for ch-run
  dltestbed image build --vm yes --guest-copy /srv/guest

In full: docs/reference.md, "VMs (vm) and containers in VMs (cvm)\""""


@dataclass(frozen=True)
class ContainerBuild:
    """The container image: its runtime, base, frameworks' builds, and the frameworks beside the default."""

    PANEL: ClassVar[str] = CONTAINER
    DEFAULTS_SHOWN: ClassVar[bool] = True

    runtime: Annotated[
        RuntimeName | None,
        opt(
            "--runtime",
            metavar="NAME",
            help=f"{or_list(RUNTIMES)} (default: docker if its daemon answers, else podman); podman-rootless's and "
            "charliecloud's are built in root's Podman store (docs/reference.md).",
        ),
    ] = None
    base: Annotated[
        str | None,
        opt(
            "--base",
            help="Build on this image from the runtime's local store (default: a Debian rootfs made with debootstrap).",
        ),
    ] = None
    flavor: Annotated[
        FlavorName,
        opt(
            "--flavor",
            help="The frameworks' builds: cpu, gpu (CUDA builds, with their libraries), or auto (default): gpu when "
            "this machine's NVIDIA driver answers with GPUs.",
        ),
    ] = "auto"
    frameworks: Annotated[
        tuple[str, ...],
        opt(
            "--framework",
            metavar="NAME",
            help=f"Also carry {OTHER_FRAMEWORKS} beside {DEFAULT_FRAMEWORK}: in the container image (a tag of its "
            "own) and in the guest image.",
            cli=str | None,
            parse=comma_tuple,
            given=None,
        ),
    ] = ()


@dataclass(frozen=True)
class GuestBuild:
    """The VM guest image: whether to build it, and a folder to copy it to."""

    PANEL: ClassVar[str] = GUEST
    DEFAULTS_SHOWN: ClassVar[bool] = True

    vm: Annotated[
        VmChoice,
        opt(
            "--vm",
            help="Also build the guest image (Debian, kernel, sshd, the workload's CPU builds, Podman with the "
            "container image for cvm): auto = when qemu-img and podman are installed.",
        ),
    ] = "auto"
    copy: Annotated[
        Path | None,
        opt("--guest-copy", metavar="DIR", help="Also copy the guest image (disk.qcow2, vmlinuz, initrd.img) here."),
    ] = None
    out: Annotated[Path | None, opt("--out", help="", replaced_by="--guest-copy")] = None


@app.command("build", epilog=EXAMPLES)
@grouped
def build(container: ContainerBuild, guest: GuestBuild) -> None:
    """Build (or find, when its inputs are unchanged) the workload images; prints their tags.

    The container image (cbm; charliecloud: an image folder, made with ch-convert) and the VM guest image
    (vm, and cvm through its Podman) carry the same frameworks: TensorFlow, and those --framework adds.
    Where each framework runs: docs/reference.md, "Where each framework runs".
    """
    import shutil

    from dltestbed.cli.runs import check_folder
    from dltestbed.errors import ConfigError
    from dltestbed.provision import localfacts, wheelhouse

    frameworks = wheelhouse.carried(container.frameworks)  # an unknown name: one line first
    out, vm = guest.copy or guest.out, guest.vm
    want_vm = vm == "yes" or (vm == "auto" and bool(shutil.which("qemu-img")) and bool(shutil.which("podman")))
    if out is not None and not want_vm:
        raise ConfigError("--guest-copy: the VM guest image's; add --vm yes (or install qemu-img and podman)")
    if out is not None:
        check_folder(out, "--guest-copy")  # before minutes of building: a folder it cannot write is one line now
    chosen = localfacts.flavor() if container.flavor == "auto" else container.flavor
    rt, built, house = _container(container.runtime, container.base, chosen, frameworks)
    if want_vm:
        _guest(built if rt == "podman" else None, house, container.base, out)


def _carries(frameworks: tuple[str, ...]) -> str:
    from dltestbed.workload.frameworks import REGISTRY

    return " and ".join(REGISTRY[f].label for f in frameworks)


def _container(
    runtime: str | None, base: str | None, flavor: str, frameworks: tuple[str, ...]
) -> tuple[str, Image, Wheelhouse]:
    """The container image (and charliecloud's folder), built or found: said on stderr, its tag on stdout. The
    runtime, the image and the wheelhouse it was built from."""
    import time

    from dltestbed.provision import image, wheelhouse

    t0 = time.monotonic()
    rt = image.usable_runtime(runtime)
    house = wheelhouse.build(flavor, frameworks)
    found = image.find(rt, house, base)
    built = found or image.build(rt, house, base)
    what = "up to date" if found else f"built in {time.monotonic() - t0:.0f} s"
    said = f"{built.runtime} image {built.tag} ({flavor} flavour, {_carries(frameworks)}, {what}): {built.digest}"
    typer.echo(said, err=True)
    typer.echo(built.tag)
    if rt == "charliecloud":
        from dltestbed.provision import userstore

        t2 = time.monotonic()
        done = userstore.converted(built)
        folder = done or userstore.convert(built, gpus=flavor == "gpu")
        what = "up to date" if done else f"converted in {time.monotonic() - t2:.0f} s"
        typer.echo(f"charliecloud image folder {folder} ({what})", err=True)
        typer.echo(str(folder))
    return rt, built, house


def _guest(podman: Image | None, house: Wheelhouse, base: str | None, out: Path | None) -> None:
    """The VM guest image (the CPU builds of `house`'s frameworks, with their Podman image for cvm: `podman` when
    it was just built from the same wheelhouse), built or found and copied to `out`: said on stderr, its folder on
    stdout."""
    import time

    from dltestbed.provision import guestimage as guest
    from dltestbed.provision import image, wheelhouse

    t1 = time.monotonic()
    carries = _carries(house.frameworks)
    built_from = house.path
    if house.flavor != "cpu":  # the guest's build for now (vm-images/README.md)
        typer.echo(f"the VM guest image holds the CPU build of {carries} (no GPU flavour)", err=True)
        house = wheelhouse.build("cpu", house.frameworks)
    pod = podman if podman is not None and house.path == built_from else None
    pod = pod or image.find("podman", house, base) or image.build("podman", house, base)
    existing = guest.find(house, pod)
    g = existing or guest.build(house, pod, out)
    if existing and out is not None:
        guest.build(house, pod, out)
    what = "up to date" if existing else f"built in {time.monotonic() - t1:.0f} s"
    typer.echo(
        f"VM guest image {g.key} ({carries}, {what}): {g.size_bytes / 1e9:.2f} GB at {g.path}"
        + (f", copied to {out}" if out else ""),
        err=True,
    )
    typer.echo(str(g.path))
