"""Docker: its daemon's CLI, GPUs through the NVIDIA Container Toolkit's `--gpus`."""

from __future__ import annotations

from dltestbed.runtimes.base import OciCli, register


@register
class Docker(OciCli):
    """docker, as root through its daemon."""

    name = "docker"
    command = "docker"
    version_format = "{{.Server.Version}}"
    not_answering = "the docker daemon is not running or not reachable ({why}); start dockerd"

    def gpu_flags(self, gpus: str) -> list[str]:
        return [f"--gpus={gpus}" if gpus == "all" else f'--gpus="device={gpus}"']
