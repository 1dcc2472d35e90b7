"""Charliecloud: `ch-run` starts a container as the invoking user in user namespaces, with no daemon and nothing
privileged, from an image directory converted from the workload image (provision/userstore.py: ch-convert, then
ch-fromhost --nvidia where the host has GPUs). It has no cgroups: CPUs are pinned with taskset or numactl around
it, and a memory limit is refused. Host /dev is bound in, so GPUs are chosen with CUDA_VISIBLE_DEVICES."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from dltestbed.errors import ConfigError
from dltestbed.runtimes.base import CONTAINER_CACHE, CONTAINER_DATA, ContainerOptions, Runtime, register
from dltestbed.secretenv import scrub
from dltestbed.users import invoking_user

# made in the image when it is converted: ch-run binds only onto what exists
MOUNT_POINTS = (CONTAINER_DATA, CONTAINER_CACHE)


@register
class Charliecloud(Runtime):
    """ch-run, as a user."""

    name = "charliecloud"
    command = "ch-run"
    rootless = True
    runs_as_cli_user = True
    store = "podman"
    not_answering = "ch-run does not work here ({why}); install charliecloud-runtime"

    def cli_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """`env` without secrets, with USER set (ch-run refuses to start without it)."""
        return {**scrub(env), "USER": env.get("USER") or invoking_user()}

    def gpu_flags(self, gpus: str) -> list[str]:
        """None: every device node is bound in; the GPUs are chosen by CUDA_VISIBLE_DEVICES (run_argv)."""
        return []

    def run_argv(self, image: str, name: str, argv: Sequence[str], opts: ContainerOptions) -> list[str]:
        """`ch-run` on the image directory, its variables set by `env` around it (ch-run passes its environment
        into the container), pinned by taskset or numactl; a private /tmp, removed with the process."""
        refused = [
            ("a memory limit", opts.memory),
            ("privileged mode", opts.privileged),
            ("added capabilities", opts.cap_add),
            ("the runtime's own flags", opts.extra),
        ]
        for what, value in refused:
            if value:
                raise ConfigError(f"charliecloud: {what} cannot be given (ch-run has no cgroups and runs unprivileged)")
        if opts.gpus == "auto":
            raise ConfigError("gpus 'auto' must be resolved on the host before the command is built")
        if opts.network != "host":
            raise ConfigError(f"charliecloud: the host's network only (got network {opts.network!r})")
        env = [f"{k}={v}" for k, v in opts.env]
        if opts.gpus is not None and opts.gpus != "all":
            env.append(f"CUDA_VISIBLE_DEVICES={opts.gpus}")
        cpus = opts.cpuset or (opts.numa_cpus if opts.numa_node is not None else None)
        pin: list[str] = []
        if opts.numa_node is not None:
            pin = ["numactl", f"--membind={opts.numa_node}", f"--physcpubind={cpus}"] if cpus else []
            if not cpus:
                raise ConfigError("NUMA pinning needs the node's CPUs (numa_cpus) or an explicit cpuset")
        elif cpus:
            pin = ["taskset", "--cpu-list", cpus]
        binds = [f"--bind={v.removesuffix(':ro')}" for v in opts.volumes]
        return [*(["env", *env] if env else []), *pin, self.command, "--private-tmp", *binds, image, "--", *argv]

    def remove_argv(self, name: str) -> list[str]:
        """Nothing: the container is the ch-run process and its namespaces, gone when it ends."""
        return []

    def list_argv(self, filters: Sequence[str]) -> list[str]:
        """Nothing to list: no container outlives its process."""
        return []

    def version_argv(self) -> list[str]:
        """ch-run's version (it has no server)."""
        return [self.command, "--version"]

    def build_argv(self, tag: str, containerfile: Path, context: Path) -> list[str]:
        """Never: its image is Podman's, converted (image build --runtime charliecloud)."""
        raise ConfigError("charliecloud builds no image itself: its image is converted from Podman's")

    def save_argv(self, tag: str, out: Path | None) -> list[str]:
        """Never: its image is a directory, made on each host from Podman's."""
        raise ConfigError("charliecloud saves no image archive: its image is converted from Podman's")
