"""A thin wrapper over ansible-runner's Python API: run a playbook, stream events, keep artifacts."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dltestbed import __version__, secretenv
from dltestbed.provision.events import HostOutcome, apply
from dltestbed.provision.wheelhouse import Wheelhouse


@dataclass
class PlaybookResult:
    """How a playbook run ended: runner status, per-host outcomes, where its artifacts are."""

    status: str  # successful, failed, timeout, canceled
    rc: int
    hosts: dict[str, HostOutcome]
    artifacts: Path


def ansible_env() -> dict[str, str]:
    """Environment for ansible-playbook: our venv's bin first; fast, strict and quiet settings."""
    bin_dir = str(Path(sys.executable).parent)
    return {
        "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "ANSIBLE_PIPELINING": "True",  # one SSH round trip per task instead of three
        "ANSIBLE_HOST_KEY_CHECKING": "True",  # never accept an unknown host key silently
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_NOCOLOR": "True",
        "ANSIBLE_TIMEOUT": "15",
        # a connection reset mid-task (sshd of a guest under TCG drops one now and then) is retried
        # by the ssh plugin (exit 255 only); a command that ran and failed is never re-run
        "ANSIBLE_SSH_RETRIES": "2",
        "ANSIBLE_DEPRECATION_WARNINGS": "False",
        "ANSIBLE_PYTHON_INTERPRETER": "auto_silent",
        "ANSIBLE_SSH_ARGS": "-o ControlMaster=auto -o ControlPersist=120s -o BatchMode=yes",
    }


@dataclass(frozen=True)
class Play:
    """A playbook of `project` on an inventory, with its variables: `extravars` for every host, `host_vars` for
    some (given as a second inventory source), in check mode or not."""

    project: Path
    playbook: str
    inventory: Path
    extravars: Mapping[str, Any] = field(default_factory=dict)
    host_vars: Mapping[str, Mapping[str, Any]] | None = None
    check: bool = False


def run_playbook(
    play: Play,
    private_dir: Path,
    ident: str,
    on_event: Callable[[str, HostOutcome | None, dict[str, Any]], None] | None = None,
    forks: int = 10,
) -> PlaybookResult:
    """Run one playbook with ansible-runner, its files in `private_dir` under `ident`; on_event(kind, outcome,
    event) sees every event."""
    inventory, host_vars = play.inventory, play.host_vars
    # ansible-runner loads only for the commands that provision
    import ansible_runner

    hosts: dict[str, HostOutcome] = {}
    sources = [str(inventory)]
    private_dir.mkdir(parents=True, exist_ok=True)
    if host_vars:
        extra = private_dir / f"{ident}-host-vars.yml"
        extra.write_text(json.dumps({"all": {"hosts": host_vars}}))  # JSON is YAML
        sources.append(str(extra))

    def handler(event: dict[str, Any]) -> bool:
        name = apply(hosts, event)
        if on_event:
            on_event(event.get("event", ""), hosts.get(name) if name else None, event)
        return True

    secretenv.take()  # ansible-runner copies os.environ into its artifacts (artifacts/<ident>/command)
    # ansible-runner turns SIGINT and SIGTERM into a cancel of the playbook (status "canceled") and
    # leaves its handlers installed: put ours back, so a later Ctrl-C still stops a bench.
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        runner = ansible_runner.run(
            private_data_dir=str(private_dir),
            project_dir=str(play.project),
            playbook=play.playbook,
            inventory=sources,
            ident=ident,
            extravars=dict(play.extravars),
            envvars=ansible_env(),
            forks=forks,
            quiet=True,
            event_handler=handler,
            cmdline="--check --diff" if play.check else None,
        )
    finally:
        if threading.current_thread() is threading.main_thread():
            for sig, old in saved.items():
                signal.signal(sig, old)
    return PlaybookResult(runner.status, runner.rc, hosts, private_dir / "artifacts" / ident)


def site_vars(hosts: list[str], flavors: dict[str, str], houses: dict[str, Wheelhouse]) -> dict[str, Any]:
    """site.yml's extravars for installing the workload on `hosts` (each host's flavor, the
    wheelhouses); no container or libvirt hosts unless the caller adds them."""
    return {
        "dltestbed_hosts": ",".join(hosts),
        "dltestbed_version": __version__,  # what a shared venv (dltestbed_venv_shared) must hold
        "dltestbed_flavors": flavors,
        "dltestbed_wheelhouses": {f: str(w.archive) for f, w in houses.items()},
        "dltestbed_manifests": {f: w.manifest for f, w in houses.items()},
        "dltestbed_wheels": {f: w.wheel for f, w in houses.items()},
        "dltestbed_wheel_dirs": {f: str(w.path) for f, w in houses.items()},
        "dltestbed_pins": {f: w.requirements.read_text().split() for f, w in houses.items()},
        "dltestbed_imports": {f: w.imports for f, w in houses.items()},
        "dltestbed_container_targets": "",
        "dltestbed_libvirt_targets": "",
    }
