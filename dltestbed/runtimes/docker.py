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
    # `docker save` writes every layer uncompressed (2.0 GB for TensorFlow's CPU image, 0.58 GB through gzip -1);
    # `docker load` reads gzip (Debian's Docker 28 refuses zstd: "invalid tar header")
    archive_compressor = ("gzip", "-1")

    def gpu_flags(self, gpus: str) -> list[str]:
        return [f"--gpus={gpus}" if gpus == "all" else f'--gpus="device={gpus}"']
