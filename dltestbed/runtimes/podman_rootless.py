"""Rootless Podman: Podman's CLI run as an unprivileged user (subordinate uids and gids from /etc/subuid and
/etc/subgid, user namespaces), with that user's own image store. The image is built in root's Podman store and
loaded into the user's (provision/userstore.py); the settings dltestbed's containers.conf gives rootful Podman
are flags here, since the user cannot read root's cache."""

from __future__ import annotations

from collections.abc import Mapping

from dltestbed.runtimes.base import register
from dltestbed.runtimes.podman import Podman

# what the user's Podman keeps alive between containers: the pause process that holds its user namespace
PAUSE_PID = '"${XDG_RUNTIME_DIR:-/tmp/podman-run-$(id -u)}/libpod/tmp/pause.pid"'


@register
class PodmanRootless(Podman):
    """podman, as a user."""

    name = "podman-rootless"
    rootless = True
    store = "podman"
    global_flags = ("--cgroup-manager=cgroupfs", "--runtime=runc", "--events-backend=file")
    run_flags = (*Podman.run_flags, "--userns=keep-id")  # the user's own uid inside, as Charliecloud gives it

    def cli_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """Nothing: the CLI runs with the user's own login environment (users.drop_argv)."""
        return {}

    def after_argv(self) -> list[str]:
        """End the user's pause process, and with it the user namespace Podman kept for the next container."""
        return ["sh", "-c", f'p={PAUSE_PID}; if [ -f "$p" ]; then kill "$(cat "$p")" 2>/dev/null; fi; true']
