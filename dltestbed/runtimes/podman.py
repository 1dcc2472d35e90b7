"""Podman: daemonless, GPUs as CDI devices, run here with runc and cgroupfs (dltestbed's containers.conf)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from dltestbed import paths
from dltestbed.runtimes.base import OciCli, register
from dltestbed.secretenv import scrub


@register
class Podman(OciCli):
    """podman, without a daemon."""

    name = "podman"
    command = "podman"
    run_flags: ClassVar[tuple[str, ...]] = ("--log-driver=none",)  # stdout streams to us: no copy in a journal
    build_flags = ("--pull=never", "--layers")
    build_mounts = True  # buildah 1.28 (Debian 12's) has RUN --mount=type=bind
    # an OCI archive of uncompressed layers, through zstd on the way: Podman's own save gzips each layer at its
    # default level on one core (a minute for TensorFlow's 2 GB), and `podman load` unpacks either
    archive_flags = ("--format", "oci-archive", "--uncompressed")
    archive_compressor = ("zstd", "-q", "-T0", "-3", "-c")
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
