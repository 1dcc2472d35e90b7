"""The local target on real subprocesses: streaming, stderr, exit status, timeouts, cleanup."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import psutil
import pytest

from dltestbed.errors import ConfigError
from dltestbed.targets import KINDS, Site, factory, make
from dltestbed.targets.base import INTERRUPT, Abort, Aborted
from dltestbed.targets.local import LocalTarget


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_lines_arrive_in_order_and_stderr_is_kept(tmp_path: Path) -> None:
    seen: list[tuple[str, float]] = []
    log = tmp_path / "err.log"
    code = (
        "import sys, time\nfor i in range(3):\n    print(i, flush=True); time.sleep(0.3)\n"
        "print('oops', file=sys.stderr); sys.exit(3)"
    )
    res = LocalTarget().run(py(code), on_line=lambda s: seen.append((s, time.monotonic())), stderr_log=log)
    assert [s for s, _ in seen] == ["0", "1", "2"]
    assert seen[2][1] - seen[0][1] > 0.4  # streamed as printed, not at exit
    assert res.returncode == 3 and not res.ok and res.describe() == "exited with code 3"
    assert res.stderr_tail == ["oops"] and log.read_text() == "oops\n"


def test_env_is_passed() -> None:
    out: list[str] = []
    LocalTarget().run(py("import os; print(os.environ['X_T'])"), env={"X_T": "a b'c"}, on_line=out.append)
    assert out == ["a b'c"]


def _children_of_test_gone(marker: str) -> bool:
    return not any(marker in " ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"]))


def test_timeout_kills_the_whole_process_group() -> None:
    marker = f"sleeper-{os.getpid()}"
    code = (
        f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
        f"'import time; time.sleep(60)', '{marker}']); print('up', flush=True); time.sleep(60)"
    )
    res = LocalTarget().run(py(code), timeout=2)
    assert res.timed_out and res.describe().startswith("timed out")
    time.sleep(0.5)
    assert _children_of_test_gone(marker)


def test_a_failing_consumer_stops_the_command() -> None:
    marker = f"consumer-{os.getpid()}"

    def boom(line: str) -> None:
        raise RuntimeError("store broke")

    with pytest.raises(RuntimeError):
        LocalTarget().run(py(f"import time; print('x', flush=True); time.sleep(60)  # {marker}"), on_line=boom)
    assert _children_of_test_gone(marker)


def test_unknown_kinds_list_the_known_ones() -> None:
    assert isinstance(make("bm"), LocalTarget)
    with pytest.raises(ConfigError, match="unknown target kind 'gpu'; known: bm, vm, cbm, cvm"):
        factory("gpu")
    assert all(callable(factory(k)) for k in KINDS)  # every kind is registered by name


@pytest.mark.parametrize("kind", ["cbm", "vm", "cvm"])
def test_a_target_is_made_only_from_a_prepared_site(kind: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{kind} on this machine: the .* was not prepared for it"):
        make(kind, Site())


def test_a_vm_on_a_host_outside_libvirt_hosts_is_one_line() -> None:
    from dltestbed.inventory import Host
    from dltestbed.orchestrate import prepare

    host = Host(
        name="n1",
        address="192.0.2.1",
        port=22,
        user="root",
        key_file=None,
        known_hosts_files=(),
        groups=("bare_metal", "container_hosts"),
    )
    for kind in ("vm", "cvm"):
        with pytest.raises(ConfigError, match=r"^vm on n1: the host is not in group libvirt_hosts of the inventory$"):
            prepare.check(prepare.Setup((kind,), (host,)))


def test_an_abort_before_the_process_exists_is_not_lost() -> None:
    marker = "dltestbed-abort-early"
    t = LocalTarget()
    t.abort()  # arrives while the run is still being started
    started = time.monotonic()
    with pytest.raises(Aborted) as raised:
        t.run(py(f"import time; time.sleep(60)  # {marker}"))
    assert raised.value.why is INTERRUPT
    assert time.monotonic() - started < 15 and _children_of_test_gone(marker)
    assert t.run(py("print('next')")).ok  # the abort was for that run only: a cleanup command still runs


def test_an_abort_from_another_thread_stops_the_run_at_once() -> None:
    import threading

    t = LocalTarget()
    timer = threading.Timer(0.5, t.abort, [Abort("stopped: worker 1 (h2) failed")])
    timer.start()
    started = time.monotonic()
    with pytest.raises(Aborted, match=r"^stopped: worker 1 \(h2\) failed$") as raised:
        t.run(py("import time; time.sleep(60)"))
    assert time.monotonic() - started < 15 and not raised.value.why.interrupted  # the reason travels with it


def test_stdin_stays_open_while_the_command_runs_and_closes_with_its_controller(tmp_path: Path) -> None:
    """A command's stdin is a pipe this process holds: a reader waits (no end-of-file) until the run
    ends; when the controller itself dies, the reader sees end-of-file and a workload stops."""
    res = LocalTarget().run(py("import sys; sys.stdin.read()"), timeout=1.5)
    assert res.timed_out  # still waiting on stdin: it was not /dev/null
    flag = tmp_path / "eof"
    controller = (
        "import sys; from dltestbed.targets.local import LocalTarget; "
        f"LocalTarget().run([sys.executable, '-c', \"import sys; sys.stdin.read(); open({str(flag)!r}, 'w')\"])"
    )
    proc = psutil.Popen(py(controller))
    deadline = time.monotonic() + 30
    while not proc.children() and time.monotonic() < deadline:
        time.sleep(0.05)
    (child,) = proc.children()
    proc.kill()  # SIGKILL: no cleanup ran
    child.wait(10)  # the reader saw end-of-file and ended by itself
    assert flag.exists()
