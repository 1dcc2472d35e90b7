"""Container runtimes, one registered class each (base.Runtime): `runtime(name)` gives one, RUNTIMES holds
them all by name. Importing this package registers them: a new runtime is one module here, imported below,
and its name in choices.RUNTIMES."""

from dltestbed.runtimes import docker, podman
from dltestbed.runtimes.base import CONTAINER_USER, REGISTRY, ContainerOptions, OciCli, Runtime, register, runtime

RUNTIMES = REGISTRY
Docker, Podman = docker.Docker, podman.Podman
HOST_RUNTIME = Podman.name  # an inventory host's runtime when it names none (dltestbed_container_runtime)

__all__ = [
    "CONTAINER_USER",
    "HOST_RUNTIME",
    "RUNTIMES",
    "ContainerOptions",
    "Docker",
    "OciCli",
    "Podman",
    "Runtime",
    "register",
    "runtime",
]
