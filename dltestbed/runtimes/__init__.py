"""Container runtimes, one registered class each (base.Runtime): `runtime(name)` gives one, RUNTIMES holds
them all by name. Importing this package registers them: a new runtime is one module here, imported below,
and its name in choices.RUNTIMES."""

from dltestbed.choices import RUNTIMES as RUNTIME_NAMES
from dltestbed.runtimes import charliecloud, docker, podman, podman_rootless
from dltestbed.runtimes.base import (
    CONTAINER_CACHE,
    CONTAINER_DATA,
    CONTAINER_USER,
    REGISTRY,
    ContainerOptions,
    OciCli,
    Runtime,
    register,
    runtime,
)

RUNTIMES = {name: REGISTRY[name] for name in RUNTIME_NAMES}  # in choices.RUNTIMES' order: docker first
Docker, Podman = docker.Docker, podman.Podman
PodmanRootless, Charliecloud = podman_rootless.PodmanRootless, charliecloud.Charliecloud
HOST_RUNTIME = Podman.name  # an inventory host's runtime when it names none (dltestbed_container_runtime)

__all__ = [
    "CONTAINER_CACHE",
    "CONTAINER_DATA",
    "CONTAINER_USER",
    "HOST_RUNTIME",
    "RUNTIMES",
    "Charliecloud",
    "ContainerOptions",
    "Docker",
    "OciCli",
    "Podman",
    "PodmanRootless",
    "Runtime",
    "register",
    "runtime",
]
