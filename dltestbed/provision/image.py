"""The benchmark image, built on the host with no registry: a minimal Debian root filesystem made
with debootstrap, imported as a base image, plus the same wheelhouse bare metal installs — so a
container runs the identical TensorFlow build. Or on top of a base image the user names.

Images are tagged by the hash of their inputs (rootfs recipe, wheelhouse manifest, base), so an
unchanged input is never rebuilt and a changed one always is.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dltestbed import locks, paths, runtimes
from dltestbed.errors import ConfigError, DltestbedError
from dltestbed.provision import wheelhouse
from dltestbed.provision.cache import KEEP
from dltestbed.provision.containerfile import CONTAINERFILE, ONE_STAGE
from dltestbed.provision.wheelhouse import Wheelhouse
from dltestbed.secretenv import scrub

SUITE = "bookworm"
MIRROR = os.environ.get("DLTESTBED_DEBIAN_MIRROR", "http://deb.debian.org/debian")
# a C compiler and Python's headers: torch.compile builds its kernels there (Inductor's C++ on a CPU, Triton's
# launcher on a GPU), as bare metal's does
PACKAGES = ("python3", "python3-venv", "numactl", "ca-certificates", "g++", "libc6-dev", "python3-dev")
REPO = "dltestbed-workload"
STORE_VARS = ("DOCKER_HOST", "CONTAINERS_STORAGE_CONF")  # what points a runtime's CLI at another image store
STAGE_LABEL = "org.dltestbed.stage"  # on the builder's install stage: left untagged, pruned after each build


class ImageError(DltestbedError):
    """The image could not be built or found."""


def runtime_env(runtime: str) -> dict[str, str]:
    """Environment for a runtime's CLI on this machine (podman: dltestbed's containers.conf)."""
    return runtimes.runtime(runtime).cli_env(os.environ)


def run_step(argv: list[str], what: str, env: Mapping[str, str] | None = None, timeout: float = 1800) -> str:
    """Run a build step: its stdout, or an ImageError naming `what` and its last line of error. `env`:
    a runtime's (runtime_env), else this process's without secrets; a tool that is no container
    runtime (debootstrap, tar) needs no more."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, env=dict(env or scrub(os.environ)), timeout=timeout)
    except FileNotFoundError:
        raise ImageError(f"{argv[0]} is not installed on this machine") from None
    if proc.returncode != 0:
        raise ImageError(f"{what} failed: {last_line(proc.stderr or proc.stdout, proc.returncode)}")
    return proc.stdout.strip()


def last_line(said: str, rc: int) -> str:
    """A failed command's last line of error, or its exit code when it said nothing."""
    lines = [line for line in said.splitlines() if line.strip()]
    return lines[-1] if lines else f"exit code {rc}"


def not_installed(runtime: str | None = None) -> str | None:
    """Why no container can run here, seen without running anything: the runtime asked (None: every one
    `detect_runtime` tries) is not installed; None when one is."""
    names = [runtime] if runtime else [name for name, rt in runtimes.RUNTIMES.items() if rt.store is None]
    rts = [runtimes.RUNTIMES.get(name) for name in names]
    missing = [
        f"{name} is not installed" for name, rt in zip(names, rts, strict=True) if rt and not shutil.which(rt.command)
    ]
    if len(missing) < len(names):
        return None
    return missing[0] if runtime else "no container runtime works here: " + "; ".join(missing)


def detect_runtime() -> str:
    """docker when its daemon answers, else podman when installed; an ImageError otherwise."""
    problems = []
    for runtime in (name for name, rt in runtimes.RUNTIMES.items() if rt.store is None):  # docker first
        if not shutil.which(runtime):
            problems.append(f"{runtime} is not installed")
            continue
        try:
            check_runtime(runtime)
            return runtime
        except ImageError as exc:
            problems.append(str(exc))
    raise ImageError("no container runtime works here: " + "; ".join(problems))


def usable_runtime(runtime: str | None = None) -> str:
    """The runtime asked for, checked, or the detected one (checked while detecting): probed once
    either way; an ImageError saying why none works."""
    if runtime is None:
        return detect_runtime()
    check_runtime(runtime)
    return runtime


def check_runtime(runtime: str) -> str:
    """The runtime's server version, or an ImageError saying it is missing or not running."""
    if runtime not in runtimes.RUNTIMES:
        raise ConfigError(f"building images for {runtime!r} is not supported; use {' or '.join(runtimes.RUNTIMES)}")
    rt = runtimes.RUNTIMES[runtime]
    try:
        return run_step(rt.version_argv(), runtime, runtime_env(runtime), timeout=30)
    except ImageError as exc:
        if "not installed" in str(exc):
            raise
        raise ImageError(rt.not_answering.format(why=exc)) from None


def store_of(runtime: str) -> str:
    """The runtime whose store holds a runtime's image as built: its own, or the one it loads or converts from."""
    return runtimes.runtime(runtime).store or runtime


def _recipe(packages: tuple[str, ...] = PACKAGES) -> str:
    """Hash of what makes the root filesystem: it names both the cached tar and the base image."""
    return hashlib.sha256(f"{SUITE} {MIRROR} {' '.join(packages)} minbase v1".encode()).hexdigest()[:12]


def rootfs(refresh: bool = False, packages: tuple[str, ...] = PACKAGES) -> Path:
    """A minimal Debian root filesystem as a tar (debootstrap, cached by its recipe)."""
    tar = paths.cache_dir() / "rootfs" / f"debian-{SUITE}-{_recipe(packages)}.tar"
    if tar.exists() and not refresh:
        return tar
    if not shutil.which("debootstrap"):
        raise ImageError("debootstrap is not installed (apt-get install debootstrap)")
    with locks.beside(tar, "the root filesystem"):
        if tar.exists() and not refresh:
            return tar  # built by another process meanwhile
        return _debootstrap(tar, packages)


def _debootstrap(tar: Path, packages: tuple[str, ...]) -> Path:
    with tempfile.TemporaryDirectory(prefix="dltestbed-rootfs-") as tmp:
        root = Path(tmp) / "root"
        include = [f"--include={','.join(packages)}"] if packages else []
        argv = ["debootstrap", "--variant=minbase", *include, SUITE, str(root), MIRROR]
        run_step(argv, "debootstrap", timeout=1800)
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man"):
            shutil.rmtree(root / junk, ignore_errors=True)
        partial = tar.with_name(tar.name + ".partial")
        subprocess.run(["tar", "-C", str(root), "--numeric-owner", "-cf", str(partial), "."], check=True)
        partial.rename(tar)
    return tar


@dataclass(frozen=True)
class Image:
    """A built image: its tag and the digest recorded with every run."""

    runtime: str
    tag: str
    digest: str


def _inputs(base: str, house: Wheelhouse) -> str:
    return hashlib.sha256(f"{base}\n{house.manifest}\n{CONTAINERFILE}\n{ONE_STAGE}".encode()).hexdigest()[:16]


def image_id(runtime: str, ref: str, store: Sequence[str] = ()) -> str | None:
    """An image's id (sha256:…) in the runtime's store, or in the one `store`'s flags name (Podman's --root and
    --runroot); None when it is not there."""
    argv = [runtime, *store, "image", "inspect", "--format", "{{.Id}}", ref]
    try:
        digest = run_step(argv, "inspect", runtime_env(runtime), timeout=60)
    except ImageError:
        return None
    return digest if digest.startswith("sha256:") else f"sha256:{digest}"


def find(runtime: str, house: Wheelhouse, base: str | None = None) -> Image | None:
    """The image for these inputs if it was built already."""
    runtime = store_of(runtime)
    tag = tag_of(house, base)
    digest = image_id(runtime, tag)
    return Image(runtime, tag, digest) if digest else None


def tag_of(house: Wheelhouse, base: str | None = None) -> str:
    """The workload image's tag for these inputs (whether it was built or not)."""
    return f"{REPO}:{_inputs(base or _base_tag(), house)}"


def _base_tag() -> str:
    return f"dltestbed-base:{SUITE}-{_recipe()}"


def build(runtime: str, house: Wheelhouse, base: str | None = None) -> Image:
    """Build (or find) the workload image for a runtime from a wheelhouse, on `base` or our rootfs."""
    check_runtime(runtime)
    if store_of(runtime) != runtime:  # built in that runtime's store
        runtime = store_of(runtime)
        check_runtime(runtime)
    found = find(runtime, house, base)
    if found:
        return found
    lock = paths.cache_dir() / "images" / f"build-{runtime}-{_store(runtime)}"
    with locks.beside(lock, f"the {runtime} image build"):
        return find(runtime, house, base) or _build(runtime, house, base)


def _store(runtime: str) -> str:
    """Which of a runtime's stores its CLI reaches here (a short hash of what locates it): builds into one store
    wait for each other, builds into two do not."""
    env = runtime_env(runtime)
    return hashlib.sha256(repr([env.get(var, "") for var in STORE_VARS]).encode()).hexdigest()[:8]


def _build(runtime: str, house: Wheelhouse, base: str | None) -> Image:
    base_ref = base
    if base_ref is None:
        base_ref = _base_tag()
        if not image_id(runtime, base_ref):
            argv = [runtime, "import", str(rootfs()), base_ref]
            run_step(argv, f"{runtime} import of the root filesystem", runtime_env(runtime))
    elif not image_id(runtime, base_ref):
        raise ImageError(
            f"base image {base_ref!r} is not in {runtime}'s local store (no registry is used: "
            f"load it first, e.g. `{runtime} load -i FILE`)"
        )
    tag = f"{REPO}:{_inputs(base_ref, house)}"
    with tempfile.TemporaryDirectory(prefix="dltestbed-image-") as tmp:
        ctx = Path(tmp)
        _dependencies(ctx, house)
        (ctx / "dltestbed").mkdir()
        shutil.copy(house.path / house.wheel, ctx / "dltestbed" / house.wheel)
        builder = runtimes.runtime(runtime)
        (ctx / "Containerfile").write_text(
            (ONE_STAGE if builder.build_mounts else CONTAINERFILE).format(
                base=base_ref,
                wheel=house.wheel,
                imports=house.imports,
                inputs=tag.split(":", 1)[1],
                stage_label=STAGE_LABEL,
            )
        )
        argv = builder.build_argv(tag, ctx / "Containerfile", ctx)
        run_step(argv, f"{runtime} build", runtime_env(runtime), timeout=3600)
    digest = image_id(runtime, tag)
    if not digest:
        raise ImageError(f"{runtime} build said it built {tag} but the image is not there")
    prune_store(runtime, keep={tag})
    return Image(runtime, tag, digest)


def _dependencies(ctx: Path, house: Wheelhouse) -> None:
    """The build context's wheels: deps/, the default framework's wheelhouse (the same files for every image of
    this flavour, so the builder's cache serves its stage), and more/, what `house` has beyond it."""
    first = house if house.frameworks == wheelhouse.carried() else wheelhouse.build(house.flavor)
    shutil.copytree(first.path, ctx / "deps", ignore=shutil.ignore_patterns("dltestbed-*.whl", "manifest.txt"))
    (ctx / "more").mkdir()
    (ctx / "more/requirements.txt").write_text("" if first is house else house.requirements.read_text())
    held = {p.name for p in first.path.glob("*.whl")} | {house.wheel}
    for whl in (w for w in house.path.glob("*.whl") if w.name not in held):
        shutil.copy(whl, ctx / "more" / whl.name)


def _listed(runtime: str, *args: str) -> list[str]:
    """`runtime images ARGS` one per line, newest first as both runtimes list them; [] if it fails."""
    try:
        out = run_step([runtime, "images", *args], "images", runtime_env(runtime), timeout=60)
        return list(dict.fromkeys(out.split()))
    except ImageError:
        return []


def _short(ref: str) -> str:
    """An image reference without Podman's `localhost/` prefix, as Docker lists it and as we tag it."""
    return ref.removeprefix("localhost/")


def prune_store(runtime: str, keep: set[str], builds: int = KEEP) -> list[str]:
    """Bound what builds leave in the runtime's store; the references removed.

    Workload tags: all but the newest `builds` (counting `keep`, which always stays). The builder's
    untagged install stages (labelled STAGE_LABEL): all but the newest, which keeps the cached
    dependencies stage it was built on alive for the next build (removing a stage also removes its
    untagged parents that have no other child). An image a container still uses stays: the runtime
    refuses, and that is fine."""
    tags = [
        t
        for t in map(_short, _listed(runtime, REPO, "--format", "{{.Repository}}:{{.Tag}}"))
        if t.startswith(f"{REPO}:") and t not in keep
    ]
    stages = _listed(runtime, "--filter", "dangling=true", "--filter", f"label={STAGE_LABEL}", "--format", "{{.ID}}")
    removed = []
    for ref in tags[max(0, builds - len(keep)) :] + stages[1:]:
        rmi = subprocess.run([runtime, "rmi", ref], capture_output=True, timeout=300, env=runtime_env(runtime))
        if rmi.returncode == 0:
            removed.append(ref)
    return removed
