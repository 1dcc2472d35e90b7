"""Container runtimes as objects: each owns its command lines (run, remove, list, build, save, version),
its GPU flags, the environment its CLI needs on this machine and its image archive format. A new runtime
is a new class registered in RUNTIMES, not new branches where containers are run or built.

Command construction is pure and tested on captured cases; nothing here runs a command."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from dltestbed import paths
from dltestbed.errors import ConfigError
from dltestbed.secretenv import scrub

CONTAINER_USER = "10001:10001"  # the image's unprivileged `dltestbed` user


@dataclass(frozen=True)
class ContainerOptions:
    """How a container is run, from the layout and inventory. Nothing privileged unless asked."""

    gpus: str | None = None  # None: no GPU; "all", a comma list of indices, or "auto" (all the host has)
    cpuset: str | None = None  # e.g. "0-7"
    memory: str | None = None  # e.g. "16g"
    network: str = "host"  # host networking: no overlay between workers, as distributed runs need
    numa_node: int | None = None  # pin CPUs and memory to this node (the GPU's socket)
    numa_cpus: str | None = None  # the node's CPUs, when numa_node is set (from the host's facts)
    privileged: bool = False
    cap_add: tuple[str, ...] = ()
    volumes: tuple[str, ...] = ()  # "host:container[:ro]"
    env: tuple[tuple[str, str], ...] = ()
    labels: tuple[tuple[str, str], ...] = ()  # who made it, for which bench and run (teardown's filter)
    extra: tuple[str, ...] = field(default=())  # the user's own flags, appended as given


class Runtime:
    """An OCI container runtime's CLI: docker's and podman's share their `run` and differ where a
    subclass says so."""

    name: ClassVar[str]
    run_flags: ClassVar[tuple[str, ...]] = ()  # after the common `run` flags
    build_flags: ClassVar[tuple[str, ...]] = ()
    archive_flags: ClassVar[tuple[str, ...]] = ()  # `save`: the archive format provisioning loads on hosts
    remove_flags: ClassVar[tuple[str, ...]] = ()
    version_format: ClassVar[str]
    not_answering: ClassVar[str] = "{why}"  # what it means when `version` fails

    def gpu_flags(self, gpus: str) -> list[str]:
        """The flags that give the container these GPUs ("all" or a comma list of indices or UUIDs)."""
        raise NotImplementedError

    def cli_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """The environment for this runtime's CLI on this machine: `env` without secrets."""
        return scrub(env)

    def run_argv(self, image: str, name: str, argv: Sequence[str], opts: ContainerOptions) -> list[str]:
        """The command that runs argv in a fresh container named `name`, removed on exit."""
        if opts.numa_node is not None and not (opts.numa_cpus or opts.cpuset):
            raise ConfigError("NUMA pinning needs the node's CPUs (numa_cpus) or an explicit cpuset")
        if opts.gpus == "auto":
            raise ConfigError("gpus 'auto' must be resolved on the host before the command is built")
        cpus = opts.cpuset or (opts.numa_cpus if opts.numa_node is not None else None)
        # -i: the CLI's stdin (dltestbed's pipe or SSH session) is the workload's, closed when dltestbed is gone
        out = [self.name, "run", "--rm", "--interactive", "--name", name, f"--network={opts.network}"]
        out += [f"--user={CONTAINER_USER}", "--pull=never", *[f"--label={k}={v}" for k, v in opts.labels]]
        out += self.run_flags
        out += ["--privileged"] if opts.privileged else []
        out += [f"--cap-add={c}" for c in opts.cap_add]
        out += self.gpu_flags(opts.gpus) if opts.gpus is not None else []
        out += [f"--cpuset-cpus={cpus}"] if cpus else []
        out += [f"--cpuset-mems={opts.numa_node}"] if opts.numa_node is not None else []
        out += [f"--memory={opts.memory}"] if opts.memory else []
        out += [f"--volume={v}" for v in opts.volumes]
        out += [f"--env={k}={v}" for k, v in opts.env]
        return [*out, *opts.extra, image, *argv]

    def remove_argv(self, name: str) -> list[str]:
        """The command that removes a container by name, there or not."""
        return [self.name, "rm", "--force", *self.remove_flags, name]

    def list_argv(self, filters: Sequence[str]) -> list[str]:
        """The command that lists the names of the containers these filters select, stopped ones too."""
        return [self.name, "ps", "-a", *filters, "--format", "{{.Names}}"]

    def version_argv(self) -> list[str]:
        """The command that asks the runtime (its server, where it has one) for its version."""
        return [self.name, "version", "--format", self.version_format]

    def build_argv(self, tag: str, containerfile: Path, context: Path) -> list[str]:
        """The command that builds the workload image from its Containerfile, from local images only."""
        return [self.name, "build", "--tag", tag, "--file", str(containerfile), *self.build_flags, str(context)]

    def save_argv(self, tag: str, out: Path) -> list[str]:
        """The command that saves an image as one archive file."""
        return [self.name, "save", *self.archive_flags, "-o", str(out), tag]


class Docker(Runtime):
    name = "docker"
    version_format = "{{.Server.Version}}"
    not_answering = "the docker daemon is not running or not reachable ({why}); start dockerd"

    def gpu_flags(self, gpus: str) -> list[str]:
        return [f"--gpus={gpus}" if gpus == "all" else f'--gpus="device={gpus}"']


class Podman(Runtime):
    name = "podman"
    run_flags = ("--log-driver=none",)  # stdout is streamed to us; no second copy in a journal
    build_flags = ("--pull=never", "--layers")
    archive_flags = ("--format", "oci-archive")
    remove_flags = ("--ignore",)
    version_format = "{{.Version}}"

    def gpu_flags(self, gpus: str) -> list[str]:
        """CDI devices (nvidia-ctk cdi generate)."""
        return [f"--device=nvidia.com/gpu={i}" for i in (["all"] if gpus == "all" else gpus.split(","))]

    def cli_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """dltestbed's containers.conf (runc, cgroupfs, no default ulimits) unless the user set
        CONTAINERS_CONF."""
        out = scrub(env)
        if "CONTAINERS_CONF" not in out:
            conf = paths.cache_dir() / "containers.conf"
            conf.parent.mkdir(parents=True, exist_ok=True)
            conf.write_text(
                '[containers]\ndefault_ulimits = []\n[engine]\nruntime = "runc"\n'
                'cgroup_manager = "cgroupfs"\nevents_logger = "file"\n'
            )
            out["CONTAINERS_CONF"] = str(conf)
        return out


RUNTIMES: dict[str, Runtime] = {r.name: r for r in (Docker(), Podman())}
HOST_RUNTIME = Podman.name  # an inventory host's runtime when it names none (dltestbed_container_runtime)


def runtime(name: str) -> Runtime:
    """The runtime of this name, or a ConfigError naming those there are."""
    if name not in RUNTIMES:
        raise ConfigError(f"unknown container runtime {name!r}; known: {', '.join(RUNTIMES)}")
    return RUNTIMES[name]
