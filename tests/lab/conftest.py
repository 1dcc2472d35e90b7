"""The lab tier: needs root, iproute2 and openssh-server (CI installs them and runs as root)."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from dltestbed import lab
from dltestbed.lab.state import LabState, bridge_name, netns_name, veth_name

# the disk probe alone: it reads each layer's copy of the dataset without TensorFlow (minutes under TCG)
DISK_ONLY = ["--suite", "micro", "--probes", "disk", "--warmup", "0", "--steps", "1", "--repeat", "1"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/lab/" in str(item.fspath):
            item.add_marker(pytest.mark.lab)


@pytest.fixture(scope="session", autouse=True)
def _requirements() -> None:
    if os.geteuid() != 0:
        pytest.skip("the lab tier needs root")
    missing = [tool for tool in ("ip", "ssh", "ssh-keygen", "/usr/sbin/sshd") if not shutil.which(tool)]
    assert not missing, f"lab tier tools missing: {missing} (scripts/install.sh --test installs them)"


@pytest.fixture(scope="session")
def lab_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    d = tmp_path_factory.mktemp("labs")
    old = os.environ.get("DLTESTBED_LAB_DIR")
    os.environ["DLTESTBED_LAB_DIR"] = str(d)
    yield d
    if old is None:
        os.environ.pop("DLTESTBED_LAB_DIR", None)
    else:
        os.environ["DLTESTBED_LAB_DIR"] = old


def accept_argv(inv: Path, out: Path, results: Path, *more: str) -> list[str]:
    """`dltestbed accept --level quick` of an inventory into a pack and a store, its verdict as JSON, and `more`."""
    base = [sys.executable, "-m", "dltestbed", "accept", "--inventory", str(inv), "--level", "quick"]
    return [*base, "--out", str(out), "--results", str(results), "--format", "json", *more]


def run_spans(results: Path, bench: str, models_only: bool = False) -> dict[str, tuple[float, float]]:
    """Each host's run of a bench in a store (its model runs only, when asked): (started, finished), seconds since
    the epoch."""
    from datetime import datetime

    from dltestbed.results.store import Store

    store = Store.open(results, read_only=True)
    try:
        runs = [r for r in store.runs(bench_id=bench) if r.role == "foreground" and r.finished_at]
    finally:
        store.close()
    return {
        r.host: (
            datetime.fromisoformat(r.started_at).timestamp(),
            datetime.fromisoformat(str(r.finished_at)).timestamp(),
        )
        for r in runs
        if not models_only or not r.is_probe
    }


def overlap(spans: list[tuple[float, float]]) -> bool:
    """Whether every span overlaps every other: the latest start comes before the earliest end."""
    return max(s for s, _ in spans) < min(f for _, f in spans)


def ssh(state: LabState, host: str, command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run a command on a lab host with the lab's key and recorded host keys (strict checking)."""
    h = next(x for x in state.hosts if x.name == host)
    argv = [
        "ssh",
        "-i",
        str(state.key),
        "-o",
        f"UserKnownHostsFile={state.known_hosts}",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        f"root@{h.ip}",
        command,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def drift_tensorflow(state: LabState, host: str, version: str) -> str:
    """Make a lab host's TensorFlow metadata say `version` (a bind mount in that host's own mount namespace, over
    the shared venv's file); the mounted path, for `umount`."""
    import importlib.metadata as md

    dist = md.distribution("tensorflow-cpu")
    meta = Path(str(dist.locate_file(""))) / next(
        str(f) for f in dist.files or [] if str(f).endswith(".dist-info/METADATA")
    )
    scratch = f"/tmp/METADATA-{version}"
    said = f"sed 's/^Version: .*/Version: {version}/' {meta} > {scratch} && mount --bind {scratch} {meta}"
    done = ssh(state, host, said)
    assert done.returncode == 0, done.stderr
    return str(meta)


def shared_venv_inventory(state: LabState, path: Path, **more: object) -> Path:
    """The lab's inventory with this checkout's venv as every host's (shared, as a site's filesystem), and `more`
    variables for group all, written to `path`."""
    doc = yaml.safe_load(state.inventory.read_text())
    doc["all"].setdefault("vars", {}).update(dltestbed_venv=sys.prefix, dltestbed_venv_shared=True, **more)
    path.write_text(yaml.safe_dump(doc))
    return path


def ansible_task(runs: Path, pattern: str, name: str) -> str:
    """What the newest playbook run under `runs` (its artifacts' stdout, by `pattern`) printed for the workload
    role's task `name`: its host lines ("changed: [h1]", "skipping: [h1]")."""
    stdout = max(runs.glob(pattern), key=lambda f: f.stat().st_mtime).read_text()
    return stdout.split(f"TASK [workload : {name}]", 1)[1].split("TASK [", 1)[0]


def only_tools(folder: Path, *tools: str) -> dict[str, str]:
    """An environment whose PATH has the system's sbin folders and, of the rest, only `tools`: a sweep
    (`teardown --all-owners`) then leaves alone what the tools it lacks would reach. CI runs the VM tier beside
    the container tests (scripts/test.sh): neither may remove the other's containers or VMs."""
    folder.mkdir(parents=True, exist_ok=True)
    for tool in tools:
        found = shutil.which(tool)
        assert found, f"{tool} missing"
        (folder / tool).symlink_to(found)
    return {"PATH": f"{folder}:/usr/sbin:/sbin"}


def this_checkout() -> list[str]:
    """This test run's source and venv: shared with lab hosts read-only at the same path (a site's shared
    filesystem), they run the workload with nothing provisioned."""
    import sys

    import dltestbed

    source = Path(dltestbed.__file__).resolve().parents[1]
    venv = Path(sys.prefix).resolve()
    return [str(source)] + ([] if venv.is_relative_to(source) else [str(venv)])


def leftovers(name: str) -> list[str]:
    """Anything of lab `name` still on this machine: namespaces, links, mounts, processes."""
    from dltestbed.lab import net

    out = [f"netns {n}" for n in net.namespaces() if n.startswith(netns_name(name, ""))]
    out += [f"link {n}" for n in net.links() if n.startswith((veth_name(name, ""), bridge_name(name)))]
    with open("/proc/mounts") as f:
        out += [f"mount {line.split()[1]}" for line in f if f"/{name}/hosts/" in line]
    ps = subprocess.run(["ps", "-eo", "stat=,args="], capture_output=True, text=True, timeout=60).stdout
    out += [
        f"process {line}"
        for line in ps.splitlines()
        if "dltestbed_sshd_config" in line and f"/{name}/hosts/" in line and not line.startswith("Z")
    ]
    # a Slurm controller's (lab up --slurm), a Kubernetes control plane's (lab up --kubernetes)
    marks = (f"dltestbed-munge-{name}/", f"/{name}/slurm/", f"/{name}/kubernetes/")
    out += [f"process {line}" for line in ps.splitlines() if any(m in line for m in marks) and not line.startswith("Z")]
    # the hosts' cgroups (--capacity, a kubelet's) and what lives in them (a pod's containers, in their own namespaces)
    cgroup_mark = f"/dltestbed-lab/{name}/"
    groups = [*Path("/sys/fs/cgroup").glob(f"*/dltestbed-lab/{name}"), Path(f"/sys/fs/cgroup/dltestbed-lab/{name}")]
    out += [f"cgroup {g}" for g in groups if g.exists()]
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if cgroup_mark in (proc / "cgroup").read_text() and state != "Z":
                    out.append(f"process {proc.name} in the lab's cgroups: {(proc / 'comm').read_text().strip()}")
    return out


@pytest.fixture
def fresh_lab(lab_dir: Path) -> Iterator[str]:
    """A lab name that is down before and after the test."""
    name = "t" + os.urandom(2).hex()[:4]
    lab.down(name)
    yield name
    lab.down(name)
    assert not leftovers(name)


RUN_USER = "dltb-runner"  # the unprivileged user the --as-user tests make


@contextlib.contextmanager
def run_user(name: str = RUN_USER) -> Iterator[pwd.struct_passwd]:
    """A new unprivileged user (made before any lab host that must know it is up), removed with its home (its
    Podman store) at the end; the folders on the way to this machine's interpreter opened to others meanwhile
    where they are not (a site installs Python where its users reach it; this machine's may sit under /root)."""
    for tool in ("ch-run", "ch-convert", "newuidmap", "setpriv"):
        assert shutil.which(tool), f"{tool} missing (scripts/install.sh --test installs it)"
    subprocess.run(["userdel", "--remove", name], capture_output=True)
    subprocess.run(["useradd", "--create-home", name], check=True)
    try:
        with interpreter_reached():
            yield pwd.getpwnam(name)
    finally:
        subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
        subprocess.run(["userdel", "--remove", name], capture_output=True)


@contextlib.contextmanager
def interpreter_reached() -> Iterator[None]:
    """The folders on the way to this machine's interpreter (the venv's real one) opened to others where they are
    not, as they were after."""
    opened = []
    for parent in Path(os.path.realpath(sys.executable)).parents:
        if parent.stat().st_mode & 0o001 == 0:
            opened.append((parent, parent.stat().st_mode))
            parent.chmod(parent.stat().st_mode | 0o001)
    try:
        yield
    finally:
        for parent, mode in reversed(opened):
            parent.chmod(mode)
