"""Containers the way HPC sites run them, for real on this machine: bare metal and a container compared as an
unprivileged user, under Charliecloud (ch-run on an image folder converted from Podman's image), rootless Podman
(the user's own store), rootful Podman and Docker (the container given the user's uid), on real data. Every run
says whom it ran as inside and outside; no process of a rootless runtime or of a workload runs as root; nothing is
left behind; the report compares the runtimes against native."""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dltestbed import paths
from tests.conftest import one_error_line, run_cli
from tests.lab.conftest import RUN_USER, interpreter_reached, run_user
from tests.lab.test_containers import dockerd  # noqa: F401 (a running dockerd for the docker bench)
from tests.secretwatch import SecretWatch, new_token

USER = RUN_USER
ROOTLESS = ("charliecloud", "podman-rootless")
# the workload's processes and a rootless runtime's: none of them may run as root
UNPRIVILEGED = {"ch-run", "conmon", "runc", "catatonit", "slirp4netns", "fuse-overlayfs", "python", "python3", "env"}
BENCH = ["-m", "alexnet", "--image-size", "32", "--batch-size", "4", "--warmup", "1", "--steps", "4", "--repeat", "3"]


@pytest.fixture(scope="module")
def user() -> Iterator[pwd.struct_passwd]:
    """A new unprivileged user, gone at the end. Its Podman store on overlay through fuse-overlayfs, as a site sets
    it up where native rootless overlay is not available (here / is itself an overlay): Podman's own choice here
    would be vfs, which copies the whole image for every container (measured: about 25 s a launch, and gigabytes)."""
    with run_user(USER) as made:
        conf = Path(made.pw_dir) / ".config/containers/storage.conf"
        conf.parent.mkdir(parents=True)
        conf.write_text(
            '[storage]\ndriver = "overlay"\n[storage.options.overlay]\nmount_program = "/usr/bin/fuse-overlayfs"\n'
        )
        for p in (conf, conf.parent, conf.parent.parent):
            os.chown(p, made.pw_uid, made.pw_gid)
        yield made


def _open_to_others(folder: Path) -> None:
    for parent in [folder, *folder.parents]:
        parent.chmod(parent.stat().st_mode | 0o005)


def test_bad_input_before_anything_runs(results: Path) -> None:
    """A rootless runtime started by root names its user; an unknown user, root, a VM kind: one line each."""
    base = ["bench", *BENCH, "--results", str(results)]
    cases = [
        (["--targets", "bm,cbm", "--runtime", "charliecloud"], "name the user with --as-user NAME"),
        (["--targets", "bm", "--as-user", "no-such-user-here"], "no such user on this machine"),
        (["--targets", "bm", "--as-user", "root"], "root is what this option avoids"),
        (["--targets", "bm,vm", "--as-user", "nobody"], "bm and cbm only"),
    ]
    for extra, why in cases:
        assert why in one_error_line(run_cli(*base, *extra))
    assert not results.exists()  # nothing measured, nothing stored


@pytest.mark.timeout(1800)  # images converted and loaded, four benches of 6 runs: ~8 min beside the VM tier
def test_every_runtime_as_a_user_against_native_on_real_data(
    user: pwd.struct_passwd, results: Path, dataset_dir: Path, tmp_path: Path
) -> None:
    _open_to_others(dataset_dir)
    build = run_cli("image", "build", "--runtime", "charliecloud", "--vm", "no", timeout=1800)
    assert build.returncode == 0, build.stderr[-2000:]
    folder = Path(build.stdout.split()[-1])
    assert folder.parent == paths.charliecloud_root() and (folder / "mnt/dltestbed-data").is_dir()
    docker = run_cli("image", "build", "--runtime", "docker", "--vm", "no", timeout=1800)
    assert docker.returncode == 0, docker.stderr[-2000:]
    token = new_token()
    records = {}
    for rt in (*ROOTLESS, "podman", "docker"):
        args = [
            "bench",
            *BENCH,
            "--targets",
            "bm,cbm",
            "--runtime",
            rt,
            "--as-user",
            USER,
            "--data",
            "real",
            "--accuracy",
        ]
        args += ["--data-dir", str(dataset_dir), "--format", "json", "--results", str(results)]
        with SecretWatch(token) as watch:
            proc = run_cli(*args, env={"INFLUXDB_V2_TOKEN": token}, timeout=1200)
        assert proc.returncode == 0, proc.stderr[-3000:]
        records[rt] = json.loads(proc.stdout)
        assert not watch.leaks, watch.leaks  # not in argv, not in environ: the user's processes included
        below = [p for cli in _clis(watch) for p in watch.descendants(cli)]
        workload = [p for p in below if "dltestbed.workload" in p[3]]
        assert workload, f"{rt}: no workload process was seen"
        if rt in ROOTLESS:  # the runtime's processes too: its CLI, conmon, runc, ch-run
            unprivileged = [p for p in below if p[1] in UNPRIVILEGED or "dltestbed.workload" in p[3]]
            unprivileged += [p for p in below if p[1] == "podman" and " run " in p[3]]
        else:  # a rootful runtime's CLI is root's by design: the workload's processes alone
            unprivileged = [p for p in below if p[1].startswith("python") and "dltestbed.workload" in p[3]]
        as_root = [p for p in unprivileged if p[2] == 0]
        if rt == "charliecloud":  # no daemon, no store asked: the bench starts no root process but setpriv's drop
            as_root += [p for p in below if p[2] == 0 and p[1] != "setpriv"]
        assert not as_root, f"{rt}: root processes started for the runs: {as_root}"
        assert _left_of(user) == [], f"{rt}: the user's processes outlived the bench"
    for rt, runs in records.items():
        assert len(runs) == 6 and all(r["status"] == "ok" for r in runs), [r.get("reason") for r in runs]
        for r in runs:
            fp = r["fingerprint"]
            assert fp["uid"] == user.pw_uid, (rt, r["target_kind"], fp["uid"])  # inside: the user's uid
            assert fp["run_as_user"] == USER  # outside: started as the user (or, rootful, given its uid)
            assert fp["dataset_files"] == 24
            assert r["target_kind"] == "bm" or fp["container_runtime"] == rt
    ch = [r for r in records["charliecloud"] if r["target_kind"] == "cbm"]
    assert all(r["fingerprint"]["user"] == USER for r in ch)  # Charliecloud binds the host's passwd: the name too
    assert not [m for m in Path("/proc/mounts").read_text().splitlines() if str(folder) in m]  # no mount left
    ps = subprocess.run(
        ["setpriv", f"--reuid={USER}", f"--regid={USER}", "--init-groups", "--reset-env", "--", "podman", "ps", "-aq"],
        capture_output=True,
        text=True,
    )
    assert ps.returncode == 0 and ps.stdout.strip() == "", ps.stdout + ps.stderr  # no rootless container left
    subprocess.run(["pkill", "-u", USER, "-f", "podman"], capture_output=True)  # the pause process `ps` started
    report = run_cli("report", "--all", "--results", str(results), "--format", "md")
    assert report.returncode == 0, report.stderr[-2000:]
    section = report.stdout.split("## Container runtimes against native", 1)[1].split("\n## ", 1)[0]
    print(section)  # the comparison, for the log
    for layer in ("native (bm)", "cbm (charliecloud)", "cbm (podman-rootless)", "cbm (podman)", "cbm (docker)"):
        row = next(line for line in section.splitlines() if line.startswith(f"| {layer} |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        # three runs (native: three in each of the four benches), a 95 % interval beside the mean
        assert cells[1] == ("12" if layer.startswith("native") else "3") and "–" in cells[2], row
        assert layer.startswith("native") or "% (" in cells[3], row  # an overhead with its interval
        assert cells[5] != "–" and cells[6] != "–" and 0 <= float(cells[8]) <= 1, row  # launch, memory, top-1
        assert cells[9] == f"uid {user.pw_uid} ({USER})" or layer == "cbm (docker)" or layer == "cbm (podman)", row
    js = json.loads(run_cli("report", "--all", "--results", str(results), "--format", "json").stdout)
    assert {r["runtime"] for r in js["runtimes"]} == {"native", *ROOTLESS, "podman", "docker"}


@pytest.mark.timeout(1800)  # the images are the other test's, or built here: about 5 min each on a fresh machine
def test_nobody_runs_bare_metal_and_a_container_under_docker_and_charliecloud(results: Path) -> None:
    """nobody's primary group is nogroup, not a group of its own name: each run drops to the user's own gid."""
    nobody = pwd.getpwnam("nobody")
    assert grp.getgrgid(nobody.pw_gid).gr_name != "nobody"  # what this test is about
    runs = []
    with interpreter_reached():
        for rt in ("docker", "charliecloud"):
            build = run_cli("image", "build", "--runtime", rt, "--vm", "no", timeout=1800)
            assert build.returncode == 0, build.stderr[-2000:]
            args = ["bench", *BENCH[:-1], "1", "--targets", "bm,cbm", "--runtime", rt, "--as-user", "nobody"]
            proc = run_cli(*args, "--format", "json", "--results", str(results), timeout=1200)
            assert proc.returncode == 0, proc.stderr[-3000:]
            runs += json.loads(proc.stdout)
    assert [(r["target_kind"], r["status"]) for r in runs] == [("bm", "ok"), ("cbm", "ok")] * 2, runs
    for r in runs:
        assert r["fingerprint"]["uid"] == nobody.pw_uid and r["fingerprint"]["run_as_user"] == "nobody", r


def test_a_venv_whose_interpreter_the_user_cannot_reach_is_refused_before_any_run() -> None:
    """A venv made from a Python in a folder closed to others (pyenv's under /root, say): one line, nothing run."""
    root = Path(tempfile.mkdtemp(prefix="dltestbed-closed-venv-"))  # pytest's own folders are closed to others
    try:
        root.chmod(0o755)
        closed = root / "closed"
        closed.mkdir(mode=0o700)
        shutil.copy2(os.path.realpath(sys.executable), closed / "python3")
        venv = root / "venv"
        subprocess.run([str(closed / "python3"), "-m", "venv", "--without-pip", str(venv)], check=True)
        (site,) = venv.glob("lib/python3*/site-packages")
        (site / "dltestbed-here.pth").write_text("\n".join(sys.path[1:]) + "\n")  # dltestbed and its dependencies
        results = root / "results.sqlite"
        argv = [str(venv / "bin/python"), "-m", "dltestbed", "bench", *BENCH, "--targets", "bm"]
        argv += ["--as-user", "nobody", "--results", str(results)]
        line = one_error_line(subprocess.run(argv, capture_output=True, text=True, timeout=300))
        said = f"error: --as-user nobody: that user cannot run this machine's dltestbed: env: '{venv}/bin/python'"
        assert line.startswith(said), line
        assert f"is {closed / 'python3'}, under {closed}, which others cannot enter" in line, line
        assert not results.exists()  # nothing run, nothing stored
    finally:
        shutil.rmtree(root)


def _clis(watch: SecretWatch) -> list[int]:
    """The CLIs the test started (children of this process running dltestbed)."""
    me = os.getpid()
    return [pid for pid, (ppid, _, _, cmd) in watch.procs.items() if ppid == me and " -m dltestbed" in cmd]


def _left_of(user: pwd.struct_passwd, within: float = 15.0) -> list[str]:
    """The user's live processes once those still exiting are gone (at most `within` s; zombies are ended)."""
    deadline = time.monotonic() + within
    while True:
        out = subprocess.run(["ps", "-u", str(user.pw_uid), "-o", "pid=,stat=,comm="], capture_output=True, text=True)
        live = [
            line.strip() for line in out.stdout.splitlines() if line.split() and not line.split()[1].startswith("Z")
        ]
        if not live or time.monotonic() > deadline:
            return live
        time.sleep(0.5)


def test_a_compiled_bench_as_nobody_shares_a_cache_per_kind_on_bare_metal_and_in_docker(results: Path) -> None:
    """--as-user nobody, bm and cbm under Docker (rootful: the container runs as nobody's uid): each kind's folder
    made as the user, or given to the container's user; each kind's first run compiles, its second reads the cache
    (the container's /tmp is new at each run: the folder is mounted); every folder gone at the end."""
    from tests.tf.test_compile_cache import COMPILED

    nobody = pwd.getpwnam("nobody")

    def _folders() -> set[Path]:  # nobody's, in /var/tmp: the bm folder made as nobody, cbm's given to nobody's uid
        return {p for p in Path("/var/tmp").glob("dltestbed-compile.*") if p.stat().st_uid == nobody.pw_uid}

    before = _folders()
    with interpreter_reached():
        build = run_cli("image", "build", "--runtime", "docker", "--vm", "no", "--framework", "pytorch", timeout=1800)
        assert build.returncode == 0, build.stderr[-2000:]
        args = ["bench", *COMPILED, "--targets", "bm,cbm", "--runtime", "docker", "--as-user", "nobody"]
        proc = run_cli(*args, "--format", "json", "--results", str(results), timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads(proc.stdout)
    got = [(r["target_kind"], r["status"], r["compile_cache"], r["fingerprint"]["uid"]) for r in runs]
    assert got == [
        ("bm", "ok", "miss", nobody.pw_uid),
        ("cbm", "ok", "miss", nobody.pw_uid),
        ("bm", "ok", "hit", nobody.pw_uid),
        ("cbm", "ok", "hit", nobody.pw_uid),
    ], runs
    assert "torch.compile's caches shared by the runs of each machine and kind (2 folders)" in proc.stderr
    assert _folders() == before
