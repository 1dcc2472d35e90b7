"""Container targets for real: images built with Docker and Podman, bm vs cbm on this machine,
failures inside the container, and no container left behind."""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dltestbed import paths, runtimes
from dltestbed.provision.cache import KEEP
from dltestbed.provision.image import REPO, STAGE_LABEL, prune_store, runtime_env
from tests.conftest import one_error_line, run_cli, start_endless_bench, wait_for_steps
from tests.htmlcheck import look
from tests.lab.conftest import DISK_ONLY, only_tools
from tests.secretwatch import SecretWatch, new_token

QUICK = [
    "--model",
    "alexnet",
    "--image-size",
    "32",
    "--batch-size",
    "4",
    "--warmup",
    "1",
    "--steps",
    "3",
    "--repeat",
    "1",
]


def _docker_up() -> bool:
    proc = subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True, text=True)
    return proc.returncode == 0


@pytest.fixture(scope="module", autouse=True)
def dockerd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A running dockerd (started here, without iptables, when none runs; stopped after)."""
    for tool in ("docker", "podman", "debootstrap"):
        assert shutil.which(tool), f"{tool} missing (scripts/install.sh --test installs it)"
    started = None
    if not _docker_up():
        log = tmp_path_factory.mktemp("dockerd") / "dockerd.log"
        started = subprocess.Popen(
            ["dockerd", "--iptables=false"], stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + 60
        while not _docker_up():
            assert time.monotonic() < deadline and started.poll() is None, log.read_text()[-2000:]
            time.sleep(0.5)
    yield
    if started:
        started.terminate()
        started.wait(60)


def containers(runtime: str) -> list[str]:
    """Names of dltestbed's containers, running or not."""
    out = subprocess.run(
        [runtime, "ps", "-a", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        env=runtime_env(runtime),
        check=True,
    ).stdout
    return [n for n in out.split() if n.startswith("dltestbed-")]


@pytest.mark.parametrize("runtime", ["docker", "podman"])
def test_image_build_is_cached(runtime: str) -> None:
    first = run_cli("image", "build", "--runtime", runtime, "--vm", "no", timeout=1800)
    assert first.returncode == 0, first.stderr[-3000:]
    tag = first.stdout.strip()
    assert tag.startswith("dltestbed-workload:")
    again = run_cli("image", "build", "--runtime", runtime, "--vm", "no")
    assert again.returncode == 0 and again.stdout.strip() == tag and "up to date" in again.stderr
    user = subprocess.run(
        [runtime, "run", "--rm", tag, "id", "-u"], capture_output=True, text=True, env=runtime_env(runtime)
    )
    assert user.stdout.strip() == "10001"  # not root inside

    # builds do not pile up in the store (each source change is a new 1.7 GB image): three older tags,
    # pruned down to the current one and the one before; at most one install stage is left untagged (Docker's:
    # Podman builds in one stage, and leaves none)
    def listed(*args: str) -> list[str]:
        return subprocess.run(
            [runtime, "images", *args], capture_output=True, text=True, env=runtime_env(runtime), check=True
        ).stdout.split()

    for n in range(3):
        subprocess.run([runtime, "tag", tag, f"{REPO}:old{n}"], check=True, env=runtime_env(runtime))
    prune_store(runtime, keep={tag})
    left = [t.removeprefix("localhost/") for t in listed(REPO, "--format", "{{.Repository}}:{{.Tag}}")]
    for extra in (t for t in left if t.startswith(f"{REPO}:old")):
        subprocess.run([runtime, "rmi", extra], capture_output=True, env=runtime_env(runtime))
    assert tag in left and len(left) == KEEP, left
    stages = listed("--filter", "dangling=true", "--filter", f"label={STAGE_LABEL}", "--format", "{{.ID}}")
    assert len(stages) <= (0 if runtimes.runtime(runtime).build_mounts else 1), stages


def test_bm_and_cbm_interleaved_with_docker(results: Path, tmp_path: Path) -> None:
    # --targets auto (the default): docker holds this build's image, so bare metal and the container
    page = tmp_path / "report.html"
    token = new_token()  # exported, as for streaming: the docker CLI and the container must not get it
    with SecretWatch(token) as watch:
        proc = run_cli(
            "bench",
            "--runtime",
            "docker",
            *QUICK,
            "--repeat",
            "2",
            "--format",
            "json",
            "--results",
            str(results),
            "--report",
            str(page),
            env={"INFLUXDB_V2_TOKEN": token},
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not watch.leaks and "docker" in watch.seen, (watch.leaks, sorted(watch.seen))
    assert not watch.files([tmp_path, paths.cache_dir(), paths.state_dir()])  # the store, logs, the report
    # the report of a real bench, as Chromium shows it: the layer comparison drawn, nothing loaded
    (desktop, phone), _ = look(page, tmp_path)
    for seen in (desktop, phone):
        assert seen.console_errors == [] and seen.requests == []
        names = {f.name for f in seen.figures}
        assert {"throughput", "overhead", "steps", "memory-1"} <= names, names
        assert all(f.ink > 0.02 and f.natural[0] > 300 for f in seen.figures)
    assert "--targets auto: bm and cbm (docker image dltestbed-workload:" in proc.stderr
    runs = json.loads(proc.stdout)
    assert [(r["target_kind"], r["repetition"]) for r in runs] == [("bm", 1), ("cbm", 1), ("bm", 2), ("cbm", 2)]
    cbm = [r for r in runs if r["target_kind"] == "cbm"]
    for r in cbm:
        fp = r["fingerprint"]
        assert fp["container_runtime"] == "docker" and fp["container_image_digest"].startswith("sha256:")
        assert fp["container_image"] == fp["container_image_digest"]  # seen from inside the container
        assert fp["python"] != "" and r["status"] == "ok"
    groups = json.loads(run_cli("report", "--format", "json", "--results", str(results)).stdout)["groups"]
    kinds = {g["key"]["target_kind"]: g for g in groups}
    assert set(kinds) == {"bm", "cbm"}
    assert kinds["cbm"]["overhead_percent"] is not None and kinds["cbm"]["images_per_sec"]["std"] is not None
    assert not containers("docker")


@pytest.mark.torch
def test_pytorch_in_a_container(results: Path, dataset_dir: Path) -> None:
    """image build --framework pytorch: an image that carries PyTorch beside TensorFlow, built on the TensorFlow
    image's cached dependencies stage. Before it, a PyTorch bench on cbm is one line naming that command; after,
    the three models train and infer in it, real data decoded there."""
    argv = ["bench", "--framework", "pytorch", "--targets", "cbm", "--runtime", "docker"]
    line = one_error_line(run_cli(*argv, *QUICK, "--results", str(results)))
    assert line == (
        "error: cbm: no docker image with PyTorch for this dltestbed build; "
        "run `dltestbed image build --runtime docker --framework pytorch`"
    )
    built = run_cli("image", "build", "--runtime", "docker", "--vm", "no", "--framework", "pytorch", timeout=1800)
    assert built.returncode == 0, built.stderr[-3000:]
    assert "(cpu flavour, TensorFlow and PyTorch, built in " in built.stderr
    models = ["-m", "alexnet", "-m", "resnet50", "-m", "inception3"]
    sizes = ["--image-size", "75", "--batch-size", "2", "--warmup", "1", "--steps", "2", "--repeat", "1"]
    for mode, data in (("train", []), ("infer", ["--data", "real", "--data-dir", str(dataset_dir)])):
        proc = run_cli(*argv, *models, *sizes, "--mode", mode, *data, "--format", "json", "--results", str(results))
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs = json.loads(proc.stdout)
        assert [(r["model"], r["mode"], r["framework"], r["status"]) for r in runs] == [
            (m, mode, "pytorch", "ok") for m in ("alexnet", "resnet50", "inception3")
        ]
        assert all(r["fingerprint"]["container_runtime"] == "docker" and r["images_per_sec"] > 0 for r in runs)
        assert all(r["fingerprint"]["pytorch"] == md.version("torch") for r in runs)  # the controller's build
    assert not containers("docker")


def _digest(folder: Path) -> str:
    from dltestbed import dataset

    return dataset.identify(dataset.scan(folder)).digest


def test_cbm_with_podman_limits_and_real_data(results: Path, dataset_dir: Path) -> None:
    """Podman, limited, reading the real dataset mounted read-only: the same digest the controller computed."""
    proc = run_cli(
        "bench",
        "--targets",
        "cbm",
        "--runtime",
        "podman",
        "--container-cpuset",
        "0",
        "--container-memory",
        "3g",
        *QUICK,
        "--data",
        "real",
        "--data-dir",
        str(dataset_dir),
        "--format",
        "json",
        "--results",
        str(results),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = json.loads(proc.stdout)
    fp = run["fingerprint"]
    assert run["status"] == "ok" and fp["container_runtime"] == "podman"
    assert fp["container_limits"] == "cpuset 0, memory 3g"  # what the report shows beside the overhead
    assert fp["cpu_affinity"] == 1  # seen from inside: the runtime applied the CPU set
    assert fp["dataset_digest"] == _digest(dataset_dir) and fp["dataset_files"] == 24
    assert run["spec"]["data_dir"] == "/mnt/dltestbed-data"  # the mount, read inside the container
    assert not containers("podman")


def test_real_data_on_bm_and_cbm_with_docker(results: Path, dataset_dir: Path, tmp_path: Path) -> None:
    """bm reads the folder, cbm its read-only mount: one digest, so the report gives the layer's overhead.
    --suite full: the microbenchmarks run beside the model on both kinds (disk reads the dataset through the
    container's mount) and the report's decomposition puts them beside the model's overhead.
    A folder the container's user cannot read is refused before anything runs."""
    proc = run_cli(
        "bench",
        "--targets",
        "bm,cbm",
        "--runtime",
        "docker",
        *QUICK,
        "--data",
        "real",
        "--data-dir",
        str(dataset_dir),
        "--repeat",
        "2",
        "--suite",
        "full",
        "--format",
        "json",
        "--results",
        str(results),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads(proc.stdout)
    assert (
        sorted((r["target_kind"], r["model"]) for r in runs)
        == [("bm", "alexnet")] * 2 + [("bm", "micro")] * 2 + [("cbm", "alexnet")] * 2 + [("cbm", "micro")] * 2
    )
    assert all(r["status"] == "ok" for r in runs)
    assert {r["fingerprint"]["dataset_digest"] for r in runs} == {_digest(dataset_dir)}
    report = json.loads(run_cli("report", "--format", "json", "--results", str(results)).stdout)
    (cbm,) = [g for g in report["groups"] if g["key"]["target_kind"] == "cbm"]
    assert cbm["overhead_percent"] is not None and not cbm["verdict"].startswith("refused")
    cases = report["micro"]["cases"]
    for kind in ("bm", "cbm"):  # every probe that can run here, on both kinds, from both repetitions
        mine = [c for c in cases if c["key"]["target_kind"] == kind]
        assert {c["key"]["probe"] for c in mine} == {"gemm", "conv", "membw", "disk"}
        assert all(c["runs"] == 2 and c["value"]["mean"] > 0 for c in mine)
        assert all(
            c["note"].startswith("dataset on ") and "; page cache dropped" in c["note"]
            for c in mine
            if c["key"]["probe"] == "disk"
        )
    assert all(c["effect"] is not None for c in cases if c["key"]["target_kind"] == "cbm")
    skipped = {(s["target_kind"], s["probe"]) for s in report["micro"]["skipped"]}
    assert {("bm", "h2d"), ("bm", "d2h"), ("cbm", "h2d"), ("cbm", "d2h")} <= skipped
    md = run_cli("report", "--results", str(results)).stdout
    rows = [line for line in md.splitlines() if line.startswith("| cbm (docker) | ") and line.count("[") == 5]
    assert len(rows) == 1, md  # the decomposition: the model's change and 4 probes', each with its interval
    assert "## Layer decomposition" in md and "alexnet train img/s" in md, md
    private = tmp_path / "private"
    shutil.copytree(dataset_dir, private)
    (private / "class_1").chmod(0o700)
    line = one_error_line(
        run_cli(
            "bench",
            "--targets",
            "cbm",
            "--runtime",
            "docker",
            *QUICK,
            "--data",
            "real",
            "--data-dir",
            str(private),
            "--results",
            str(results),
        )
    )
    assert line == (
        f"error: cbm reads the dataset as the container's unprivileged user (10001:10001) and "
        f"'{private}/class_1' is not readable by others; `chmod -R a+rX {private}`"
    )
    assert not containers("docker")


def test_a_failure_inside_the_container_is_stored_and_cleaned_up(results: Path) -> None:
    """The kernel kills the workload inside the container (its memory limit is below what TensorFlow needs
    to import): the cbm run is stored as failed with how it ended, bare metal beside it is not affected,
    and no container is left."""
    proc = run_cli(
        "bench",
        "--targets",
        "bm,cbm",
        "--runtime",
        "docker",
        "--container-memory",
        "150m",
        *QUICK,
        "--format",
        "json",
        "--results",
        str(results),
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    runs = {r["target_kind"]: r for r in json.loads(proc.stdout)}
    assert runs["bm"]["status"] == "ok"
    assert runs["cbm"]["status"] == "failed" and runs["cbm"]["reason"].startswith("workload exited with code 137")
    assert "1 of 2 run(s) failed" in one_error_line(proc)
    assert not containers("docker")


def test_ctrl_c_removes_the_container(results: Path) -> None:
    """Ctrl-C, and Ctrl-C again while the container is being removed (an impatient user): the removal
    and the run's end are still done."""
    proc = start_endless_bench(results, "--targets", "cbm", "--runtime", "docker")
    assert wait_for_steps(results, 4)
    assert containers("docker")
    proc.send_signal(signal.SIGINT)
    for _ in range(10):
        time.sleep(0.1)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 130, err[-2000:]
    with sqlite3.connect(results) as db:
        (status, reason, done) = db.execute("SELECT status, reason, steps_done FROM runs").fetchone()
    assert (status, reason) == ("failed", "interrupted (Ctrl-C or a stop signal)") and done >= 5
    assert not containers("docker")


def test_a_daemon_that_is_not_running_is_one_line(results: Path, tmp_path: Path) -> None:
    env = {"DOCKER_HOST": f"unix://{tmp_path}/nothing.sock"}
    line = one_error_line(
        run_cli("bench", "--targets", "cbm", "--runtime", "docker", *QUICK, "--results", str(results), env=env)
    )
    assert "cbm: the docker daemon is not running or not reachable" in line


def test_a_missing_image_is_one_line(results: Path, tmp_path: Path) -> None:
    storage = tmp_path / "storage.conf"
    storage.write_text(f'[storage]\ndriver = "vfs"\ngraphroot = "{tmp_path}/graph"\nrunroot = "{tmp_path}/run"\n')
    env = {"CONTAINERS_STORAGE_CONF": str(storage)}
    line = one_error_line(
        run_cli("bench", "--targets", "cbm", "--runtime", "podman", *QUICK, "--results", str(results), env=env)
    )
    assert "cbm: no podman image for this dltestbed build; run `dltestbed image build --runtime podman`" in line


def test_unknown_target_kind(results: Path) -> None:
    line = one_error_line(run_cli("bench", "--targets", "bm,gpu", *QUICK, "--results", str(results)))
    assert "--targets: unknown kind 'gpu'; known: auto, bm, vm, cbm, cvm" in line


LAB_RUNTIMES = {"tk-h1": "podman", "tk-h2": "docker"}  # one container host per runtime, as hosts name theirs


@pytest.mark.timeout(1800)  # two hosts provisioned, four benches and a Slurm job: ~6 min beside the VM tier
def test_cbm_on_lab_hosts_over_ssh(results: Path, lab_dir: Path, tmp_path: Path, dataset_dir: Path) -> None:
    """Two container hosts of an inventory, each naming its runtime (tk-h1 Podman, tk-h2 Docker): one
    provisioning loads the image into each, one bench runs bm and cbm on both on real data: copied to each host
    once per digest (the container mounts the copy), or read from a shared path. The hosts are also Slurm
    nodes (lab up --slurm): cbm through srun runs, on the node Slurm picks, the image that node's runtime
    loaded. Bare metal runs this checkout's venv, shared as a site's filesystem would share it (the workload's
    install on hosts: test_provision, test_bastion)."""
    import sys

    import yaml

    from dltestbed import lab
    from dltestbed.lab import LabSpec
    from dltestbed.lab.slurm import conf_path
    from tests.lab.conftest import leftovers, ssh, this_checkout

    token = new_token()  # exported as a user streaming to InfluxDB would: it must reach no child and no file
    env = {"DLTESTBED_LAB_DIR": str(lab_dir), "XDG_STATE_HOME": str(tmp_path / "state"), "INFLUXDB_V2_TOKEN": token}
    lab.down("tk")
    state = lab.up(
        LabSpec(
            name="tk",
            hosts=2,
            subnet="10.213.83.0/24",
            containers=True,
            shares=[str(dataset_dir), *this_checkout()],
            slurm=True,
        )
    )
    watch = SecretWatch(token).__enter__()
    try:
        doc = yaml.safe_load(state.inventory.read_text())
        hosts = doc["all"]["children"]["container_hosts"]["hosts"]
        for host, runtime in LAB_RUNTIMES.items():
            hosts[host] = {"dltestbed_container_runtime": runtime}  # a host's own setting over its group's
        doc["all"].setdefault("vars", {})["dltestbed_slurm_time"] = "7"  # the site's Slurm setting: --time's default
        doc["all"]["vars"] |= {"dltestbed_venv": sys.prefix, "dltestbed_venv_shared": True}
        inv = str(tmp_path / "inventory.yml")
        Path(inv).write_text(yaml.safe_dump(doc))
        first = run_cli("provision", "--layout", "distributed", "--inventory", inv, env=env, timeout=1800)
        assert first.returncode == 0, first.stderr[-3000:]
        assert "bm,cbm" in first.stderr and "Load it" in first.stderr
        again = run_cli("provision", "--layout", "distributed", "--inventory", inv, env=env)
        assert again.returncode == 0 and "nothing changed" in again.stderr
        real = ["--data", "real", "--data-dir", str(dataset_dir)]
        proc = run_cli(
            "bench",
            "--inventory",
            inv,
            "--targets",
            "bm,cbm",
            *QUICK,
            *real,
            "--format",
            "json",
            "--results",
            str(results),
            env=env,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs = json.loads(proc.stdout)
        assert sorted((r["host"], r["target_kind"]) for r in runs) == [
            (h, k) for h in sorted(LAB_RUNTIMES) for k in ("bm", "cbm")
        ]
        cbm = {r["host"]: r for r in runs if r["target_kind"] == "cbm"}
        for host, runtime in LAB_RUNTIMES.items():
            fp = cbm[host]["fingerprint"]
            assert fp["container_runtime"] == runtime and fp["container_image"] == fp["container_image_digest"]
        digest = _digest(dataset_dir)
        assert {r["fingerprint"]["dataset_digest"] for r in runs} == {digest}
        assert "copying to tk-h1, tk-h2 (once" in proc.stderr  # to both hosts at once
        for host in LAB_RUNTIMES:
            listed = ssh(state, host, f"find /var/lib/dltestbed/datasets/{digest} -name '*.jpg' | wc -l")
            assert listed.stdout.strip() == "24"
        assert {r["spec"]["data_dir"] for r in runs if r["target_kind"] == "bm"} == {
            f"/var/lib/dltestbed/datasets/{digest}"  # the host's copy
        }
        # the copy is kept: the next bench copies nothing; a shared path is read where it is (the disk probe
        # reads each: no TensorFlow needed to see which copy a run reads)
        again = run_cli(
            "bench",
            "--inventory",
            inv,
            "--limit",
            "tk-h1",
            "--targets",
            "cbm",
            *DISK_ONLY,
            *real,
            "--format",
            "json",
            "--results",
            str(results),
            env=env,
        )
        assert again.returncode == 0 and "copying" not in again.stderr, again.stderr[-3000:]
        shared = run_cli(
            "bench",
            "--inventory",
            inv,
            "--limit",
            "tk-h1",
            "--targets",
            "bm",
            *DISK_ONLY,
            *real,
            "--data-shared",
            "--format",
            "json",
            "--results",
            str(results),
            env=env,
        )
        assert shared.returncode == 0, shared.stderr[-3000:]
        (run,) = json.loads(shared.stdout)
        assert run["spec"]["data_dir"] == str(dataset_dir) and run["fingerprint"]["dataset_digest"] == digest
        slurm_env = {**env, "SLURM_CONF": str(conf_path(state))}  # the runtime's command inside srun
        sl = run_cli(
            "bench",
            "--launcher",
            "slurm",
            "--inventory",
            inv,
            "--targets",
            "cbm",
            *QUICK,
            "--format",
            "json",
            "--results",
            str(results),
            env=slurm_env,
        )
        assert sl.returncode == 0, sl.stderr[-3000:]
        (run,) = json.loads(sl.stdout)  # scenario single: one job, on the node Slurm gives it
        host, fp = run["host"], run["fingerprint"]
        runtime = LAB_RUNTIMES[host]
        assert run["target_kind"] == "cbm" and fp["transport"] == "slurm"
        job = subprocess.run(
            ["scontrol", "show", "job", "-o", str(fp["slurm_job_id"])],
            capture_output=True,
            text=True,
            env={**os.environ, **slurm_env},
            timeout=60,
        ).stdout
        assert "TimeLimit=00:07:00" in job, job
        loaded = cbm[host]["fingerprint"]["container_image_digest"]  # the image provision loaded there
        assert fp["container_runtime"] == runtime and fp["container_image_digest"] == loaded  # that node's own
        for host, runtime in LAB_RUNTIMES.items():
            left = ssh(
                state, host, f"CONTAINERS_CONF=/etc/dltestbed/containers.conf {runtime} ps -a --format '{{{{.Names}}}}'"
            )
            assert left.returncode == 0 and "dltestbed-" not in left.stdout
        queue = subprocess.run(
            ["squeue", "-h"], capture_output=True, text=True, env={**os.environ, **slurm_env}, timeout=60
        )
        assert queue.returncode == 0 and not queue.stdout.strip()
        watch.__exit__()
        assert not watch.leaks, watch.leaks  # no process of ansible, ssh, the lab hosts, the runtimes held it
        assert {"ansible-playboo", "sshd", *LAB_RUNTIMES.values()} <= watch.seen, sorted(watch.seen)  # all read
        assert not watch.files([tmp_path, lab_dir, results.parent, paths.cache_dir()])  # artifacts, logs, store
    finally:
        watch.__exit__()
        lab.down("tk")
    assert not leftovers("tk")


def test_sigterm_tears_down_like_ctrl_c(results: Path) -> None:
    proc = start_endless_bench(results, "--targets", "cbm", "--runtime", "podman")
    # long enough for the VM tier beside it to save this image for its guest (podman's store is locked)
    assert wait_for_steps(results, 2, timeout=420), proc.stderr.read() if proc.poll() is not None else "no steps"  # type: ignore[union-attr]
    assert containers("podman")
    proc.terminate()
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 130, err[-2000:]
    with sqlite3.connect(results) as db:
        (status, reason) = db.execute("SELECT status, reason FROM runs").fetchone()
    assert (status, reason) == ("failed", "interrupted (Ctrl-C or a stop signal)")
    assert not containers("podman")


@pytest.mark.parametrize("runtime", ["docker", "podman"])
def test_a_killed_controller_leaves_no_container(runtime: str, results: Path) -> None:
    """SIGKILL (an OOM kill, a lost login session) runs no cleanup at all: the container ends because
    its stdin — the runtime CLI's, passed on with -i — closes, and --rm removes it."""
    proc = start_endless_bench(results, "--targets", "cbm", "--runtime", runtime)
    assert wait_for_steps(results, 3), proc.stderr.read() if proc.poll() is not None else "no steps"  # type: ignore[union-attr]
    (name,) = containers(runtime)
    proc.kill()
    proc.communicate(timeout=60)
    killed = time.monotonic()
    while containers(runtime) and time.monotonic() - killed < 60:
        time.sleep(0.5)
    assert not containers(runtime), f"{name} still there {time.monotonic() - killed:.0f} s after the kill"
    with sqlite3.connect(results) as db:  # what was measured stays; the run was never finished
        (status, done) = db.execute("SELECT status, steps_done FROM runs").fetchone()
    assert status == "running" and done >= 4


def test_teardown_leaves_another_operators_containers(results: Path, tmp_path: Path) -> None:
    """Two operators share a host: teardown removes this installation's leftover container (its owner
    label) and not the other's; --all-owners removes both."""
    from dltestbed.owner import OWNER_LABEL, installation_id

    image = subprocess.run(
        ["docker", "images", "dltestbed-workload", "--format", "{{.Repository}}:{{.Tag}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[0]
    for name, owner in (("dltestbed-mine", installation_id()), ("dltestbed-theirs", "them@h-0000")):
        subprocess.run(
            [
                "docker",
                "run",
                "-d",
                "--name",
                name,
                f"--label={OWNER_LABEL}={owner}",
                "--entrypoint",
                "sleep",
                image,
                "600",
            ],
            capture_output=True,
            check=True,
        )
    # Docker's containers only: no libvirt, so the sweep leaves the VMs that CI's VM tier runs beside this
    docker_only = {**only_tools(tmp_path / "docker-only", "docker"), "DLTESTBED_VM_DIR": str(tmp_path / "no-vms")}
    try:
        proc = run_cli("teardown", env=docker_only)
        assert proc.returncode == 0 and "docker container dltestbed-mine" in proc.stderr, proc.stderr
        assert containers("docker") == ["dltestbed-theirs"]
        proc = run_cli("teardown", "--all-owners", env=docker_only)
        assert proc.returncode == 0 and "docker container dltestbed-theirs" in proc.stderr, proc.stderr
        assert not containers("docker")
    finally:
        subprocess.run(["docker", "rm", "--force", "dltestbed-mine", "dltestbed-theirs"], capture_output=True)


def test_a_base_image_that_is_not_there_is_one_line() -> None:
    line = one_error_line(run_cli("image", "build", "--runtime", "docker", "--base", "tensorflow/tensorflow:none"))
    assert "base image 'tensorflow/tensorflow:none' is not in docker's local store" in line
