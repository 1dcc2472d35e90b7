"""What a new operator meets first in `accept`, run as a new user in an empty home (tests/guard.py): the signing
key and the remedies checked and shown before any stage, and a first stage that cannot go on followed by the
`--resume` it suggests."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.guard import Guard


@pytest.fixture
def guard(tmp_path: Path) -> Guard:
    return Guard(tmp_path)


def _inventory(guard: Guard) -> Path:
    inv = guard.inputs / "rack.yml"
    inv.write_text("bare_metal:\n  hosts:\n    here:\n      ansible_connection: local\n")
    return inv


def _errors(proc: subprocess.CompletedProcess[str]) -> list[str]:
    assert "Traceback" not in proc.stderr, proc.stderr
    return [line for line in proc.stderr.splitlines() if line.startswith("error:")]


def test_a_first_stage_that_cannot_go_on_is_gone_on_from_with_resume(guard: Guard) -> None:
    """The wheelhouse cannot be built (pip fails: a stub): provisioning stops; the --resume it suggests resumes."""
    out = guard.inputs / "pack"
    argv = ["accept", "--inventory", str(_inventory(guard)), "--out", str(out)]
    argv += ["--results", str(guard.inputs / "results.sqlite")]
    first = guard.run(*argv)
    (line,) = _errors(first)
    assert first.returncode == 2 and line.startswith("error: stage provision: building the dltestbed wheel failed")
    inv = argv[2]
    assert f"`dltestbed accept --inventory {inv} --out {out} --resume` (with the same options) goes on from" in line
    state = json.loads((out / "accept-state.json").read_text())  # kept from the moment the first stage began
    assert state["stages"] == {}
    again = guard.run(*argv, "--resume")
    (line,) = _errors(again)
    assert f"accept {state['id']}: resumed from {out}" in again.stderr  # not "holds no acceptance to resume"
    assert "stage provision: provision the nodes" in again.stderr and line.startswith("error: stage provision:")
    assert json.loads((out / "accept-state.json").read_text())["resumes"] == 1


def test_the_signing_key_is_tried_before_any_stage(guard: Guard, tmp_path: Path) -> None:
    inv = _inventory(guard)
    locked = tmp_path / "locked"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "a passphrase", "-f", str(locked)], check=True)
    not_a_key = guard.inputs / "not-a-key"
    not_a_key.write_text("hello\n")
    for key in (locked, not_a_key):
        proc = guard.run("accept", "--inventory", str(inv), "--out", str(guard.inputs / "pack"), "--sign-key", str(key))
        (line,) = _errors(proc)
        assert proc.returncode == 2 and line.startswith(f"error: --sign-key '{key}': it cannot sign: "), line
        assert "stage " not in proc.stderr and not (guard.inputs / "pack").exists()
    assert guard.written() == [] and guard.called() == []


def test_the_remedies_are_shown_on_a_node_before_any_stage_and_a_missing_hook_refused(guard: Guard) -> None:
    inv = _inventory(guard)
    argv = ["accept", "--inventory", str(inv), "--out", str(guard.inputs / "pack")]
    argv += ["--results", str(guard.inputs / "results.sqlite")]
    hook = ["--on-fail", "notify-ops {node} {reason}", "--on-pass", "resume"]
    shown = guard.run(*argv, *hook)  # stops at provisioning (pip is a stub): the lines come before it
    said = shown.stderr.splitlines()
    missing = "is not a command on this machine: not on PATH, or not executable"
    scontrol = "" if shutil.which("scontrol") else f" ('scontrol' {missing})"
    first_stage = next(i for i, line in enumerate(said) if line.startswith("stage provision"))
    assert said[:first_stage] == [
        f"--on-fail: for a node that fails, e.g. here: notify-ops here 'dltestbed: <why it failed>' ('notify-ops' "
        f"{missing}); shown at the end, run with --apply",
        f"--on-pass: for a node that passes, e.g. here: scontrol update nodename=here state=resume{scontrol}; shown "
        "at the end, run with --apply",
    ]
    refused = guard.run(*argv, *hook, "--apply")
    (line,) = _errors(refused)
    assert refused.returncode == 2 and "stage " not in refused.stderr
    assert line == f"error: --on-fail: 'notify-ops' {missing}"
