"""Where dltestbed keeps things on the controller: every state, cache and data folder, in one place.

Per-user folders follow the XDG rules through platformdirs ($XDG_STATE_HOME, $XDG_CACHE_HOME,
$XDG_DATA_HOME); folders that qemu or a lab must reach live under /var/lib/dltestbed. Each has an
environment variable that moves it (tests and CI use them)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP = "dltestbed"
SYSTEM_ROOT = Path("/var/lib/dltestbed")  # shared with qemu and the lab: not under a home folder
RESULTS_ENV = "DLTESTBED_RESULTS"


def _env(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value).expanduser() if value else None


def state_dir() -> Path:
    """$XDG_STATE_HOME/dltestbed (~/.local/state/dltestbed): provisioning runs, host keys, ssh helpers."""
    return Path(platformdirs.user_state_dir(APP, appauthor=False))


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/dltestbed (~/.cache/dltestbed): wheelhouses, image archives, rootfs tars."""
    return Path(platformdirs.user_cache_dir(APP, appauthor=False))


def data_dir() -> Path:
    """$XDG_DATA_HOME/dltestbed (~/.local/share/dltestbed)."""
    return Path(platformdirs.user_data_dir(APP, appauthor=False))


def results_file() -> Path:
    """The results store: $DLTESTBED_RESULTS, else data_dir()/results.sqlite."""
    return _env(RESULTS_ENV) or data_dir() / "results.sqlite"


def debug_log() -> Path:
    """Tracebacks of internal errors: $DLTESTBED_DEBUG_LOG, else state_dir()/debug.log."""
    return _env("DLTESTBED_DEBUG_LOG") or state_dir() / "debug.log"


def known_hosts_file() -> Path:
    """Host keys recorded at provisioning; bench checks hosts against them."""
    return state_dir() / "known_hosts"


def wheelhouse_root() -> Path:
    """Wheelhouses, one folder per build: cache_dir()/wheelhouse."""
    return cache_dir() / "wheelhouse"


def vm_root() -> Path:
    """$DLTESTBED_VM_DIR, else /var/lib/dltestbed/vms: one folder per VM (record, keys), and this machine's pool."""
    return _env("DLTESTBED_VM_DIR") or SYSTEM_ROOT / "vms"


def vm_images_root() -> Path:
    """Built guest images: $DLTESTBED_VM_IMAGES, else /var/lib/dltestbed/vm-images (qemu must reach them)."""
    return _env("DLTESTBED_VM_IMAGES") or SYSTEM_ROOT / "vm-images"


def charliecloud_root() -> Path:
    """$DLTESTBED_CH_DIR, else /var/lib/dltestbed/charliecloud: Charliecloud's image folders, which the users
    who run them must reach (not under root's home)."""
    return _env("DLTESTBED_CH_DIR") or SYSTEM_ROOT / "charliecloud"


def labs_root() -> Path:
    """Labs: $DLTESTBED_LAB_DIR, else /var/lib/dltestbed/labs."""
    return _env("DLTESTBED_LAB_DIR") or SYSTEM_ROOT / "labs"
