"""The dry-run guard: `bench --dry-run` and the cheap checks of `provision`, `image build` and `accept` write
nothing and call nothing. Each runs as a new user would, under an empty HOME, XDG folders and TMPDIR, with pip,
the container runtimes, virsh, qemu-img and ssh replaced by stubs that record every call and fail."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from dltestbed.choices import DEFAULT_FRAMEWORK, RUNTIMES
from dltestbed.workload.frameworks import REGISTRY
from tests.guard import Guard


@pytest.fixture
def guard(tmp_path: Path) -> Guard:
    return Guard(tmp_path)


def _bench_cases() -> list[tuple[str, ...]]:
    """bench --dry-run: every target kind, each framework, each runtime for the kinds that run a container."""
    cases: list[tuple[str, ...]] = []
    for framework in REGISTRY:
        fw = ("--framework", framework)
        cases.append(("--targets", "bm", *fw))
        cases.append(("--targets", "auto", *fw))
        for kind in ("vm", "cvm"):
            cases.append(("--targets", kind, *fw))
        for runtime in RUNTIMES:
            user = ("--as-user", "nobody") if runtime in ("podman-rootless", "charliecloud") else ()
            cases.append(("--targets", "cbm", "--runtime", runtime, *user, *fw))
            if not user:  # a rootless one falls back to bm run as the user: whether it reaches this Python is the
                cases.append(("--targets", "auto", "--runtime", runtime, *fw))  # machine's (lab/test_unprivileged)
    return cases


def _build_hint(case: tuple[str, ...]) -> str:
    """The command a case's missing image is made with: its runtime and its framework beside the default."""
    named = dict(zip(case[::2], case[1::2], strict=True))
    runtime = f" --runtime {named['--runtime']}" if "--runtime" in named else ""
    framework = f" --framework {named['--framework']}" if named["--framework"] != DEFAULT_FRAMEWORK else ""
    return f"`dltestbed image build{runtime}{framework}`"


def test_bench_dry_run_writes_and_calls_nothing(guard: Guard) -> None:
    cases = _bench_cases()
    with ThreadPoolExecutor(2) as pool:  # two at a time, as the cores allow
        procs = list(pool.map(lambda case: guard.run("bench", "--dry-run", *case), cases))
    for case, proc in zip(cases, procs, strict=True):
        said = f"{' '.join(case)}: rc {proc.returncode}\n{proc.stdout}{proc.stderr}"
        assert "Traceback" not in proc.stderr, said
        if case[1] in ("bm", "auto"):  # runs on this machine's bare metal: the list of runs
            assert proc.returncode == 0 and "none was run (--dry-run)" in proc.stdout, said
        if case[1] == "auto":  # bare metal twice, saying why, and the whole command that makes the image
            assert f"no image of this dltestbed build; {_build_hint(case)} makes it" in proc.stderr, said
        elif case[1] != "bm":  # no image of this build in an empty home: one line that names the command that makes it
            errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
            assert proc.returncode == 2 and len(errors) == 1 and f"run {_build_hint(case)}" in errors[0], said
    assert guard.written() == []
    assert guard.called() == []


def test_cheap_checks_write_and_call_nothing(guard: Guard) -> None:
    inventory = guard.inputs / "rack.yml"
    inventory.write_text("bare_metal:\n  hosts:\n    node1:\n      ansible_host: 192.0.2.1\n      ansible_user: root\n")
    not_a_key = guard.inputs / "not-a-key"
    not_a_key.write_text("hello\n")
    out = guard.home / "pack"
    refused = [
        ("provision", "--inventory", str(inventory), "--framework", "jax"),
        ("image", "build", "--runtime", "nosuch"),
        ("image", "build", "--framework", "jax"),
        ("image", "build", "--flavor", "tpu"),
        ("accept", "--inventory", str(inventory), "--out", str(out), "--sign-key", str(not_a_key)),
        ("accept", "--inventory", str(inventory), "--out", str(out), "--framework", "jax"),
        ("accept", "--inventory", str(inventory), "--out", str(out), "--skip", "nosuch"),
    ]
    for args in refused:
        proc = guard.run(*args)
        said = f"{' '.join(args)}: rc {proc.returncode}\n{proc.stdout}{proc.stderr}"
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, said
        assert len([line for line in proc.stderr.splitlines() if line.startswith("error:")]) == 1, said
        assert (guard.written(), guard.called()) == ([], []), said
