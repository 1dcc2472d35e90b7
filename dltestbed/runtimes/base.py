"""What a container runtime is to dltestbed: the commands it is driven with (run, remove, list, build, save,
version), its GPU flags, the environment its CLI needs on this machine and its image archive format. Each
runtime is one class in a module of this package, registered by name (choices.RUNTIMES); `OciCli` holds
the command lines Docker's and Podman's CLIs share, and a runtime shaped otherwise (Charliecloud's ch-run)
implements `Runtime` itself.

Command construction is pure and tested on captured cases; nothing here runs a command."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from dltestbed.choices import RUNTIMES as RUNTIME_NAMES
from dltestbed.errors import ConfigError
from dltestbed.secretenv import scrub

CONTAINER_USER = "10001:10001"  # the image's unprivileged `dltestbed` user
CONTAINER_DATA = "/mnt/dltestbed-data"  # where the bench's dataset is mounted, read-only
CONTAINER_CACHE = "/mnt/dltestbed-compile"  # where the bench's compile caches of the kind are mounted, writable


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
    user: str | None = None  # uid:gid the workload runs as inside (None: the image's CONTAINER_USER)


class Runtime(ABC):
    """A container runtime, as dltestbed drives it: each command as an argv."""

    name: ClassVar[str]  # its key in choices.RUNTIMES
    command: ClassVar[str]  # its CLI's program
    version_format: ClassVar[str] = ""
    # its CLI and containers run as a user, never root: as the invoking user, or as --as-user's when dltestbed is root
    rootless: ClassVar[bool] = False
    # the container's processes are the CLI user's own, whatever --user says (Charliecloud)
    runs_as_cli_user: ClassVar[bool] = False
    # the runtime whose store its image is built in (then loaded into the user's store, or converted), or None: its own
    store: ClassVar[str | None] = None
    not_answering: ClassVar[str] = "{why}"  # what it means when `version` fails
    # where `save` writes uncompressed layers: the filter its stdout goes through into the archive (`load` reads it
    # back); empty: `save_argv` writes the archive itself
    archive_compressor: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def gpu_flags(self, gpus: str) -> list[str]:
        """The flags that give the container these GPUs ("all" or a comma list of indices or UUIDs)."""

    def cli_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """The environment for this runtime's CLI on this machine: `env` without secrets."""
        return scrub(env)

    @abstractmethod
    def run_argv(self, image: str, name: str, argv: Sequence[str], opts: ContainerOptions) -> list[str]:
        """The command that runs argv in a fresh container named `name`, removed on exit."""

    @abstractmethod
    def remove_argv(self, name: str) -> list[str]:
        """The command that removes a container by name, there or not ([]: nothing outlives its process)."""

    def after_argv(self) -> list[str]:
        """A command run after each container's removal, as the same user ([]: none): what the runtime keeps
        alive between containers and must not outlive the run."""
        return []

    @abstractmethod
    def list_argv(self, filters: Sequence[str]) -> list[str]:
        """The command that lists the names of the containers these filters select, stopped ones too."""

    @abstractmethod
    def version_argv(self) -> list[str]:
        """The command that asks the runtime (its server, where it has one) for its version."""

    # its builder binds the build context into a RUN (`RUN --mount=type=bind`): the workload image is then built in
    # one stage (provision/containerfile.ONE_STAGE), its venv never copied between stages
    build_mounts: ClassVar[bool] = False

    @abstractmethod
    def build_argv(self, tag: str, containerfile: Path, context: Path) -> list[str]:
        """The command that builds the workload image from its Containerfile, from local images only."""

    @abstractmethod
    def save_argv(self, tag: str, out: Path | None) -> list[str]:
        """The command that saves an image as one archive file (None: to its stdout)."""


class OciCli(Runtime):
    """The CLI Docker and Podman share (`run --rm --name …`, `rm --force`, `ps -a`, `build`, `save`), each
    differing where its class says so."""

    global_flags: ClassVar[tuple[str, ...]] = ()  # before the subcommand, on every command but build and save
    run_flags: ClassVar[tuple[str, ...]] = ()  # after the common `run` flags
    build_flags: ClassVar[tuple[str, ...]] = ()
    archive_flags: ClassVar[tuple[str, ...]] = ()  # `save`: the archive format provisioning loads on hosts
    remove_flags: ClassVar[tuple[str, ...]] = ()

    def run_argv(self, image: str, name: str, argv: Sequence[str], opts: ContainerOptions) -> list[str]:
        """The command that runs argv in a fresh container named `name`, removed on exit."""
        if opts.numa_node is not None and not (opts.numa_cpus or opts.cpuset):
            raise ConfigError("NUMA pinning needs the node's CPUs (numa_cpus) or an explicit cpuset")
        if opts.gpus == "auto":
            raise ConfigError("gpus 'auto' must be resolved on the host before the command is built")
        cpus = opts.cpuset or (opts.numa_cpus if opts.numa_node is not None else None)
        # -i: the CLI's stdin (dltestbed's pipe or SSH session) is the workload's, closed when dltestbed is gone
        out = [
            self.command,
            *self.global_flags,
            "run",
            "--rm",
            "--interactive",
            "--name",
            name,
            f"--network={opts.network}",
        ]
        out += [f"--user={opts.user or CONTAINER_USER}", "--pull=never", *[f"--label={k}={v}" for k, v in opts.labels]]
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
        return [self.command, *self.global_flags, "rm", "--force", *self.remove_flags, name]

    def list_argv(self, filters: Sequence[str]) -> list[str]:
        """The command that lists the names of the containers these filters select, stopped ones too."""
        return [self.command, *self.global_flags, "ps", "-a", *filters, "--format", "{{.Names}}"]

    def version_argv(self) -> list[str]:
        """The command that asks the runtime (its server, where it has one) for its version."""
        return [self.command, *self.global_flags, "version", "--format", self.version_format]

    def build_argv(self, tag: str, containerfile: Path, context: Path) -> list[str]:
        """The command that builds the workload image from its Containerfile, from local images only."""
        return [self.command, "build", "--tag", tag, "--file", str(containerfile), *self.build_flags, str(context)]

    def save_argv(self, tag: str, out: Path | None) -> list[str]:
        """The command that saves an image as one archive file (None: to its stdout)."""
        return [self.command, "save", *self.archive_flags, *(["-o", str(out)] if out else []), tag]


REGISTRY: dict[str, Runtime] = {}


def register(cls: type[Runtime]) -> type[Runtime]:
    """Register a runtime's class under its name, one of choices.RUNTIMES."""
    if cls.name not in RUNTIME_NAMES:
        raise ValueError(f"runtime {cls.name!r} is not in choices.RUNTIMES")
    REGISTRY[cls.name] = cls()
    return cls


def runtime(name: str) -> Runtime:
    """The runtime of this name, or a ConfigError naming those there are."""
    if name not in REGISTRY:
        raise ConfigError(f"unknown container runtime {name!r}; known: {', '.join(RUNTIME_NAMES)}")
    return REGISTRY[name]
