"""A new user's empty home for a command, and stubs that record what it calls: pip (on PATH and as `python -m
pip`), the container runtimes, virsh, qemu-img and ssh, each failing closed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

STUBBED = ("pip", "pip3", "podman", "docker", "virsh", "qemu-img", "ssh", "scp", "ch-image", "ch-convert", "ch-run")
_STUB = '#!/bin/sh\necho "$(basename "$0") $*" >> "$DLTESTBED_GUARD_RECORD"\nexit 1\n'
_PIP_MODULE = (  # `python -m pip`: what the wheelhouse runs
    "import os, sys\n"
    "with open(os.environ['DLTESTBED_GUARD_RECORD'], 'a') as f:\n"
    "    f.write('python -m pip ' + ' '.join(sys.argv[1:]) + '\\n')\n"
    "sys.exit(1)\n"
)


class Guard:
    """An empty home for the commands, the stubs beside it, and what the commands wrote or called."""

    def __init__(self, root: Path) -> None:
        self.home = root / "home"  # HOME, the XDG folders, TMPDIR and the working folder: all inside, all empty
        self.record = root / "calls.txt"
        stubs, pymod = root / "stubs", root / "pymod" / "pip"
        for folder in (self.home, stubs, pymod):
            folder.mkdir(parents=True)
        for name in STUBBED:
            (stubs / name).write_text(_STUB)
            (stubs / name).chmod(0o755)
        (pymod / "__init__.py").write_text("")
        (pymod / "__main__.py").write_text(_PIP_MODULE)
        self.inputs = root / "inputs"  # the files a command reads (an inventory, a key): outside the watched home
        self.inputs.mkdir()
        h = self.home
        self.env = {
            "PATH": f"{stubs}:{os.environ['PATH']}",
            "PYTHONPATH": str(pymod.parent),
            "HOME": str(h),
            "XDG_CACHE_HOME": str(h / ".cache"),
            "XDG_STATE_HOME": str(h / ".local/state"),
            "XDG_DATA_HOME": str(h / ".local/share"),
            "XDG_CONFIG_HOME": str(h / ".config"),
            "TMPDIR": str(h),
            "DLTESTBED_GUARD_RECORD": str(self.record),
            "COLUMNS": "200",
        }
        for var in ("DLTESTBED_INFLUX_TOKEN", "INFLUX_TOKEN", "CONTAINERS_CONF"):
            self.env.setdefault(var, "")

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`dltestbed ARGS` in the empty home."""
        env = {k: v for k, v in {**os.environ, **self.env}.items() if v != ""}
        return subprocess.run(
            [sys.executable, "-m", "dltestbed", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=self.home,
            timeout=300,
        )

    def written(self) -> list[str]:
        """Everything the commands left in the home."""
        return sorted(str(p.relative_to(self.home)) for p in self.home.rglob("*"))

    def called(self) -> list[str]:
        """Every stub call."""
        return self.record.read_text().splitlines() if self.record.exists() else []
