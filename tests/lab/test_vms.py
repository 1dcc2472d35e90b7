"""VMs for real: libvirtd and qemu (TCG here), the guest image built by `dltestbed image build`, a
workload in the VM (vm) and in a container in the VM (cvm), teardown, and the failures that must be
one line. Slow: TensorFlow under TCG is ~200× slower than on the host, so the runs are the smallest."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from dltestbed import paths
from tests.conftest import one_error_line, run_cli
from tests.lab.conftest import DISK_ONLY, ansible_task, only_tools, this_checkout
from tests.secretwatch import SecretWatch, new_token

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]  # the first test builds the guest image

ONE_STEP = ["--warmup", "1", "--steps", "1", "--repeat", "1"]
# a model's one step timed, without a warm-up step before it: each step of a model in a TCG guest takes tens of
# seconds, and a run asserts only that it trains and is stored
MODEL_STEP = ["--warmup", "0", "--steps", "1", "--repeat", "1"]
TINY = ["--model", "alexnet", "--image-size", "32", "--batch-size", "2", *MODEL_STEP]


def _qemus() -> list[str]:
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if "qemu-system" in cmd.split(" ", 1)[0] and "dltestbed-" in cmd:
            out.append(cmd)
    return out


def _domains() -> list[str]:
    out = subprocess.run(["virsh", "-c", "qemu:///system", "list", "--all", "--name"], capture_output=True, text=True)
    return [n for n in out.stdout.split() if n.startswith("dltestbed-")]


@pytest.fixture(scope="module")
def vm_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    subprocess.run(["bash", "scripts/libvirt-up.sh"], check=True)
    import shutil
    import tempfile

    _sweep_dead_runs_vms()
    # not under pytest's 0700 temp folder: qemu's own user must reach the VMs' files. Beside the run's VM
    # folder (scripts/fresh.sh's root in CI), with this run's pid beside it: a run killed before its
    # teardown leaves a folder the next run's fresh_sweep removes
    parent = paths.vm_root().parent
    parent.mkdir(parents=True, exist_ok=True)
    vms = Path(tempfile.mkdtemp(prefix="test-vms-", dir=parent))
    vms.chmod(0o755)
    Path(f"{vms}.pid").write_text(f"{os.getpid()}\n")
    env = {"DLTESTBED_VM_DIR": str(vms)}
    yield env
    run_cli("teardown", env=env)
    shutil.rmtree(vms, ignore_errors=True)
    Path(f"{vms}.lock").unlink(missing_ok=True)  # the VMs' address lock, beside their folder (locks.beside)
    Path(f"{vms}.pid").unlink(missing_ok=True)


def _sweep_dead_runs_vms() -> None:
    """dltestbed's domains and storage pools whose folder is gone: a run killed before its teardown left
    them in libvirt (persistent), and a domain of the same name would stand in this run's way."""
    virsh = ["virsh", "-c", "qemu:///system"]
    for kind, listing, dump, verbs in (
        ("domain", ["list", "--all", "--name"], "dumpxml", (["destroy"], ["undefine"])),
        ("pool", ["pool-list", "--all", "--name"], "pool-dumpxml", (["pool-destroy"], ["pool-undefine"])),
    ):
        names = subprocess.run([*virsh, *listing], capture_output=True, text=True, check=True).stdout.split()
        for name in (n for n in names if n.startswith("dltestbed-")):
            xml = subprocess.run([*virsh, dump, name], capture_output=True, text=True).stdout
            files = re.findall(r"<(?:source file|path)(?:=')?>?([^<']+)", xml)
            if files and not any(Path(f).exists() for f in files):
                for verb in verbs:
                    subprocess.run([*virsh, *verb, name], capture_output=True)
                print(f"removed {kind} {name}: its files are gone ({files[0]}), a killed run's")


@pytest.fixture(autouse=True)
def _no_vm_left_for_the_next_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that failed half-way must not hand its VM to the next one: teardown, then virsh."""
    yield
    if "vm_env" not in request.fixturenames or not _domains():
        return
    _teardown_vms(request.getfixturevalue("vm_env"))


def _teardown_vms(vm_env: dict[str, str]) -> None:
    """Every VM of this run gone: teardown, then virsh for what it left."""
    import tempfile

    bin_dir = Path(tempfile.mkdtemp(prefix="dltestbed-no-runtimes-"))
    try:  # the VMs only: CI runs the container tests beside this tier (their containers are theirs)
        run_cli("teardown", "--all-owners", env={**vm_env, **only_tools(bin_dir / "bin")})
    finally:
        shutil.rmtree(bin_dir)
    for name in _domains():
        for verb in (["destroy"], ["undefine", "--remove-all-storage"]):
            subprocess.run(["virsh", "-c", "qemu:///system", *verb, name], capture_output=True)


@pytest.fixture(scope="module")
def guest_image(vm_env: dict[str, str]) -> Path:
    """The guest image with PyTorch beside TensorFlow (`image build --framework pytorch --vm yes`): one image
    serves every VM test, TensorFlow's benches too (a guest that carries more serves a bench that needs fewer),
    so the tier builds one image of gigabytes, not two. The default build differs from it only in its wheelhouse
    (tests/lab/test_containers.py builds that one's Podman image)."""
    build = ["image", "build", "--runtime", "podman", "--vm", "yes", "--framework", "pytorch"]
    proc = run_cli(*build, env=vm_env, timeout=3000)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "VM guest image" in proc.stderr and "(TensorFlow and PyTorch, " in proc.stderr  # built (or kept: FRESH=0)
    path = Path(proc.stdout.split()[-1])
    assert (path / "disk.qcow2").exists() and (path / "vmlinuz").exists()
    again = run_cli(*build, env=vm_env)
    said = again.stderr.split("VM guest image", 1)[-1]
    assert "(TensorFlow and PyTorch, up to date)" in said, again.stderr[-2000:]
    return path


def test_passthrough_fails_before_anything_is_created(
    vm_env: dict[str, str], guest_image: Path, cloud_image: Path, results: Path
) -> None:
    """dltestbed's guest image is the CPU flavour: GPUs passed to it are refused; a user's image with GPUs
    gets the host checks (no IOMMU here). Either way nothing is created."""
    before = _domains()  # dltestbed's domains of any live run on this machine: no new one
    line = one_error_line(
        run_cli("bench", "--targets", "vm", "--vm-gpus", "all", *TINY, "--results", str(results), env=vm_env)
    )
    assert line.startswith(
        "error: VM local: --vm-gpus needs a guest with the NVIDIA driver and TensorFlow's CUDA "
        "build; dltestbed's guest image is the CPU flavour"
    )
    assert _domains() == before and not list(Path(vm_env["DLTESTBED_VM_DIR"]).iterdir())
    line = one_error_line(
        run_cli(
            "bench",
            "--targets",
            "vm",
            "--vm-gpus",
            "all",
            "--vm-image",
            str(cloud_image),
            *TINY,
            "--results",
            str(results),
            env=vm_env,
        )
    )
    assert line == (
        "error: GPU passthrough to VM local: this host has no IOMMU (/sys/kernel/iommu_groups is empty; enable "
        "VT-d or AMD-Vi in the firmware and boot with intel_iommu=on or amd_iommu=on); nothing was created"
    )
    assert _domains() == before and not list(Path(vm_env["DLTESTBED_VM_DIR"]).iterdir())


def test_a_bad_stream_is_refused_before_any_vm_is_made(
    vm_env: dict[str, str], guest_image: Path, results: Path
) -> None:
    before = _domains()
    env = {
        **vm_env,
        "INFLUXDB_V2_URL": "http://127.0.0.1:9",
        "INFLUXDB_V2_ORG": "lab",
        "INFLUXDB_V2_BUCKET": "b",
        "INFLUXDB_V2_TOKEN": "dltestbed:secret",
    }
    line = one_error_line(run_cli("bench", "--targets", "vm", *TINY, "--results", str(results), env=env))
    assert line.startswith("error: InfluxDB at http://127.0.0.1:9 (org lab, bucket b): unreachable (")
    assert _domains() == before and not list(Path(vm_env["DLTESTBED_VM_DIR"]).iterdir())  # checked first, nothing made


def test_another_installations_vm_is_left_alone(
    vm_env: dict[str, str], guest_image: Path, results: Path, tmp_path: Path
) -> None:
    """Two operators on one libvirt host: a domain another installation made (its owner in the domain's
    metadata; defined, not started) under the name our VM would have. bench refuses to replace it and
    teardown leaves it, each saying so; teardown --all-owners removes it."""
    from dltestbed.vms.domain import DomainSpec, domain_xml

    xml = domain_xml(
        DomainSpec(
            name="dltestbed-local",
            virt_type="qemu",
            vcpus=1,
            memory_mib=256,
            disk=str(tmp_path / "none.qcow2"),
            console_log=str(tmp_path / "console.log"),
            bridge="dltb-nobr",
            mac="52:54:00:0a:0b:0c",
            owner="someone@else-0bad",
        )
    )
    subprocess.run(
        ["virsh", "-c", "qemu:///system", "define", "/dev/stdin"], input=xml, text=True, check=True, capture_output=True
    )
    try:
        line = one_error_line(run_cli("bench", "--targets", "vm", *TINY, "--results", str(results), env=vm_env))
        assert (
            "VM dltestbed-local belongs to another dltestbed installation (someone@else-0bad): left as it is"
        ) in line, line
        assert _domains() == ["dltestbed-local"]
        proc = run_cli("teardown", env=vm_env)
        assert proc.returncode == 0 and _domains() == ["dltestbed-local"], proc.stderr
        vms_only = only_tools(tmp_path / "no-runtimes")  # the VMs only: CI runs the container tests beside this
        proc = run_cli("teardown", "--all-owners", env={**vm_env, **vms_only})
        assert proc.returncode == 0 and "VM local" in proc.stderr and not _domains(), proc.stderr
    finally:
        subprocess.run(["virsh", "-c", "qemu:///system", "undefine", "dltestbed-local"], capture_output=True)


def _digest(folder: Path) -> str:
    from dltestbed import dataset

    return dataset.identify(dataset.scan(folder)).digest


@pytest.mark.torch
def test_vm_and_cvm_runs_and_teardown(
    vm_env: dict[str, str], guest_image: Path, results: Path, dataset_dir: Path, tmp_path: Path
) -> None:
    """Bare metal and the VM on real data, each with a model run and the microbenchmarks beside it (--suite
    full: one bench, one boot) — bm reads the folder, the VM gets a copy (once per digest) — then cvm in the same
    VM, its probes reading that copy through the container's mount, nothing copied again; then, in the same VM,
    --device gpu is refused up front. cvm runs no TensorFlow model here: its image is the one whose model runs cbm
    runs (test_containers), and each TensorFlow import in a TCG guest takes 4 to 5 minutes of CI. Then PyTorch
    in the same VM (the guest image's venv and Podman image carry it beside TensorFlow): where there is no guest
    image, a PyTorch bench on vm is one line naming the command that builds it; with it, a model trains in the VM
    on real data decoded there, at 32 px, and in a container in that VM (cvm): the PyTorch the controller has, in
    each. Under TCG a PyTorch process takes about 3 minutes to start and AlexNet a minute a step at 75 px
    (measured here), so the VM runs two: the other models, inference and the models' own code are the bare-metal
    tiers' (tests/tf/test_pytorch.py). One VM serves every run; teardown removes all of it. (Nothing here touches
    this machine's container stores. The shared scenario's --isolate halves the CPU list that the same probe
    reads inside every kind: tested on bm and its split in the unit tier.)"""
    real = ["--data", "real", "--data-dir", str(dataset_dir)]
    proc = run_cli(
        "bench",
        "--targets",
        "bm,vm",
        "--suite",
        "full",
        "--probes",
        "disk,membw",
        *TINY,
        *real,
        "--format",
        "json",
        "--results",
        str(results),
        env=vm_env,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    every = json.loads(proc.stdout)
    assert "copying to VM local (once" in proc.stderr
    # cvm in the same VM: its container mounts the VM's copy; nothing is copied again
    in_vm = run_cli(
        "bench",
        "--targets",
        "cvm",
        "--suite",
        "micro",
        "--probes",
        "disk,membw",
        *ONE_STEP,
        *real,
        "--format",
        "json",
        "--results",
        str(results),
        env=vm_env,
        timeout=1800,
    )
    assert in_vm.returncode == 0 and "copying" not in in_vm.stderr, in_vm.stderr[-3000:]
    every += json.loads(in_vm.stdout)
    runs = {r["target_kind"]: r for r in every if r["model"] == "alexnet"}
    mruns = {r["target_kind"]: r for r in every if r["model"] == "micro"}
    assert sorted(runs) == ["bm", "vm"] and sorted(mruns) == ["bm", "cvm", "vm"] and len(every) == 5
    assert all(r["status"] == "ok" and r["images_per_sec"] > 0 for r in runs.values())
    assert all(r["status"] == "ok" for r in mruns.values())
    digest = _digest(dataset_dir)
    assert {r["fingerprint"]["dataset_digest"] for r in every} == {digest}
    reads = {
        "bm": str(dataset_dir),
        "cvm": "/mnt/dltestbed-data",
        "vm": f"/var/lib/dltestbed/datasets/{digest}",
    }
    assert {k: r["spec"]["data_dir"] for k, r in runs.items()} == {k: reads[k] for k in ("bm", "vm")}
    assert {k: r["spec"]["data_dir"] for k, r in mruns.items()} == reads  # disk reads each layer's copy
    vm, cvm = runs["vm"], mruns["cvm"]
    assert vm["fingerprint"]["host"] == "local" and vm["fingerprint"]["vm_virt_type"] == "qemu"  # TCG here
    assert (
        "notice: VM local: KVM here is the nested kvm_pvm variant" in proc.stderr
        or "notice: VM local: KVM is not available" in proc.stderr
    )
    meta = json.loads((guest_image / "image.json").read_text())
    assert cvm["fingerprint"]["container_image_digest"] == meta["container_digest"]
    assert cvm["fingerprint"]["container_image"] == meta["container_digest"]  # seen from inside the container
    assert vm["fingerprint"]["kernel"] != runs["bm"]["fingerprint"]["kernel"]  # really another kernel
    import socket

    here = socket.gethostname()  # --by-host puts the VM and its container beside the machine they run on
    assert (vm["host"], vm["machine"], cvm["machine"], runs["bm"]["machine"]) == ("local", here, here, here)
    assert len(_domains()) == 1 and _qemus()
    # the probes of every layer, in the report beside the model's overhead; disk read each layer's copy
    report = run_cli("report", "--all", "--format", "json", "--results", str(results))
    cases = json.loads(report.stdout)["micro"]["cases"]
    got = {(c["key"]["target_kind"], c["key"]["probe"]) for c in cases}
    assert got == {(k, p) for k in ("bm", "vm", "cvm") for p in ("disk", "membw")}
    assert all(
        c["note"].startswith("dataset on ") and "; page cache dropped" in c["note"]
        for c in cases
        if c["key"]["probe"] == "disk"
    )
    # --device gpu where there is none (no --vm-gpus): refused in one line before any run, nothing stored
    # (bm and cbm: test_containers; cvm runs the same workload in a container in this VM)
    gpu = run_cli(
        "bench",
        "--targets",
        "vm",
        "--device",
        "gpu",
        *TINY,
        "--format",
        "json",
        "--results",
        str(results),
        env=vm_env,
        timeout=1800,
    )
    assert one_error_line(gpu) == (
        "error: --device gpu: no GPU on vm:local (its VM has no GPU passed through: --vm-gpus or dltestbed_vm_gpus "
        "gives it one); use --device auto or cpu"
    )
    assert gpu.returncode == 2 and gpu.stdout == ""
    # PyTorch in the same VM and in a container in it; where there is no guest image, one line naming the command
    # that builds it
    import importlib.metadata as md

    argv = ["bench", "--framework", "pytorch", "--results", str(results), "--format", "json"]
    none = {**vm_env, "DLTESTBED_VM_IMAGES": str(tmp_path / "no-guest-images")}  # a machine without one
    line = one_error_line(run_cli(*argv, "--targets", "vm", *TINY, env=none, timeout=1800))
    assert line == (
        "error: vm: no VM guest image with PyTorch for this dltestbed build; "
        "run `dltestbed image build --framework pytorch`"
    )
    tf = one_error_line(run_cli("bench", *argv[3:], "--targets", "vm", *TINY, env=none, timeout=1800))
    assert tf == "error: vm: no VM guest image for this dltestbed build; run `dltestbed image build`"
    sizes = ["--image-size", "32", "--batch-size", "2", *MODEL_STEP]
    proc = run_cli(*argv, "--targets", "vm", "-m", "alexnet", *sizes, *real, env=vm_env, timeout=1800)
    assert proc.returncode == 0 and "copying" not in proc.stderr, proc.stderr[-3000:]  # the VM's copy of the data
    torch_runs = json.loads(proc.stdout)
    in_vm = run_cli(*argv, "--targets", "cvm", "-m", "alexnet", *sizes, env=vm_env, timeout=1800)
    assert in_vm.returncode == 0, in_vm.stderr[-3000:]
    torch_runs += json.loads(in_vm.stdout)
    assert [(r["target_kind"], r["model"], r["mode"], r["data"], r["status"]) for r in torch_runs] == [
        ("vm", "alexnet", "train", "real", "ok"),
        ("cvm", "alexnet", "train", "synthetic", "ok"),
    ]
    assert all(r["framework"] == "pytorch" and r["images_per_sec"] > 0 for r in torch_runs)
    assert {r["fingerprint"]["pytorch"] for r in torch_runs} == {md.version("torch")}  # the controller's build
    assert all(r["fingerprint"]["vm_virt_type"] == "qemu" for r in torch_runs)
    assert torch_runs[-1]["fingerprint"]["container_image_digest"] == meta["container_digest"]
    assert len(_domains()) == 1  # one VM, made on the guest image with PyTorch, for every run
    # the VM is kept for the next bench; teardown removes all of it
    proc = run_cli("teardown", env=vm_env)
    assert proc.returncode == 0 and "VM local" in proc.stderr
    assert not _domains() and not _qemus() and not list(Path(vm_env["DLTESTBED_VM_DIR"]).iterdir())
    assert "dltvm0" not in subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    assert run_cli("teardown", env=vm_env).stderr.strip().endswith("nothing to remove")  # idempotent


@pytest.fixture(scope="module")
def cloud_image(vm_env: dict[str, str]) -> Path:
    """A user's cloud image (tests/cloudimage.py): own boot loader, cloud-init, a venv without a manifest."""
    from dltestbed.provision import wheelhouse
    from tests import cloudimage

    return cloudimage.build(wheelhouse.build("cpu"))


def _stamp(path: Path) -> tuple[int, int, str]:
    import hashlib

    st = path.stat()
    with path.open("rb") as f:
        return st.st_size, st.st_mtime_ns, hashlib.file_digest(f, "sha256").hexdigest()


def test_a_users_cloud_image(vm_env: dict[str, str], cloud_image: Path, results: Path) -> None:
    """Booted by its own boot loader, keyed and addressed by cloud-init from the seed, the workload
    brought up to this build by the workload role over SSH (its venv holds every dependency: dltestbed's
    wheel alone is sent), measured as its own layer; the user's file untouched, and teardown leaves nothing.
    The disk probe measures it, on a scratch file: TensorFlow's import checks the install, and a model run
    and real data in a VM are test_vm_and_cvm's (minutes under TCG)."""
    before = _stamp(cloud_image)
    argv = [
        "bench",
        "--targets",
        "bm,vm",
        "--vm-image",
        str(cloud_image),
        *DISK_ONLY,
        "--results",
        str(results),
        "--format",
        "json",
    ]
    token = new_token()  # exported, as for streaming: ansible-runner's artifacts and ssh must not get it
    with SecretWatch(token) as watch:
        proc = run_cli(*argv, env={**vm_env, "INFLUXDB_V2_TOKEN": token}, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert not watch.leaks and {"ansible-playboo", "ssh"} <= watch.seen, (watch.leaks, sorted(watch.seen))
    roots = [results.parent, Path(vm_env["DLTESTBED_VM_DIR"]), paths.state_dir(), paths.cache_dir()]
    assert not watch.files(roots)  # ansible's artifacts, the VM's records and logs, the store
    assert f"notice: uploading your image {cloud_image.name} (" in proc.stderr
    assert f"notice: VM local ({cloud_image.name}): installing the workload (none there yet)" in proc.stderr
    assert f"notice: VM local ({cloud_image.name}): workload installed in " in proc.stderr
    alone = "Copy dltestbed's wheel alone (the venv holds every pinned dependency)"
    wheel_alone = ansible_task(paths.state_dir() / "provision", "v-*/artifacts/vm-workload/stdout", alone)
    assert "changed: [local]" in wheel_alone  # the image's venv holds every pinned dependency
    runs = {r["target_kind"]: r for r in json.loads(proc.stdout)}
    assert all(r["status"] == "ok" and r["model"] == "micro" for r in runs.values()), runs
    assert runs["vm"]["fingerprint"]["vm_image_name"] == cloud_image.name
    assert runs["vm"]["fingerprint"]["kernel"] != runs["bm"]["fingerprint"]["kernel"]

    xml = subprocess.run(
        ["virsh", "-c", "qemu:///system", "dumpxml", "dltestbed-local"], capture_output=True, text=True, check=True
    ).stdout
    assert "<boot dev='hd'/>" in xml and "<kernel>" not in xml  # its own boot loader
    console = (Path(vm_env["DLTESTBED_VM_DIR"]) / "pool" / "local.console.log").read_text(errors="replace")
    assert "Datasource DataSourceNoCloud [seed=/dev/vdb]" in console  # cloud-init read our seed
    assert "Invalid cloud-config" not in console and "failed stage" not in console  # and took all of it
    assert "resized filesystem" in console  # growpart + resize_rootfs: the overlay's 20 GiB are usable

    d = Path(vm_env["DLTESTBED_VM_DIR"]) / "local" / "ssh"
    route = subprocess.run(
        [
            "ssh",
            "-i",
            str(d / "id_ed25519"),
            "-o",
            f"UserKnownHostsFile={d / 'known_hosts'}",
            "-o",
            "BatchMode=yes",
            f"root@{runs['vm']['fingerprint']['target_address']}",
            "ip route show default",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert route.stdout.startswith("default via 10.213.90.1 dev eth0"), route  # reachable from off the bridge too

    report = run_cli("report", "--results", str(results), "--bench", "last", env=vm_env)
    assert f"| vm ({cloud_image.name}) | 1 |" in report.stdout  # the probes' table: its own layer

    proc = run_cli("teardown", env=vm_env)
    assert proc.returncode == 0 and "VM local" in proc.stderr
    assert not _domains() and not _qemus() and not list(Path(vm_env["DLTESTBED_VM_DIR"]).iterdir())
    assert _stamp(cloud_image) == before  # uploaded, never written


def test_a_vm_that_never_answers_names_its_console_log(vm_env: dict[str, str], guest_image: Path) -> None:
    from dltestbed.provision import guestimage as image
    from dltestbed.vms import lifecycle
    from dltestbed.vms.settings import VMSettings

    meta = json.loads((guest_image / "image.json").read_text())
    img = image.GuestImage(path=guest_image, **{k: v for k, v in meta.items() if k != "path"})
    import os

    os.environ["DLTESTBED_VM_DIR"] = vm_env["DLTESTBED_VM_DIR"]
    try:
        with pytest.raises(lifecycle.VMError) as err:
            lifecycle.create(
                "broken",
                img,
                VMSettings(memory_mib=512),
                cmdline="root=/dev/nonexistent console=ttyS0 panic=0",
                ssh_timeout=45,
            )
    finally:
        del os.environ["DLTESTBED_VM_DIR"]
    text = str(err.value)
    assert text.startswith("VM broken did not answer SSH at 10.213.90.") and "within 45 s" in text
    pool = Path(vm_env["DLTESTBED_VM_DIR"]) / "pool"  # disks and console logs: volumes of this machine's pool
    assert f"its console log: {pool}/broken.console.log (last line: " in text and "(empty)" not in text
    assert not _domains() and not (Path(vm_env["DLTESTBED_VM_DIR"]) / "broken").exists()  # cleaned up
    assert not [p.name for p in pool.glob("broken.*")]


def test_a_stop_signal_while_the_vm_boots_leaves_nothing(vm_env: dict[str, str], results: Path) -> None:
    """SIGTERM (as Ctrl-C) during the VM's creation: the half-made VM is deleted, exit 130."""
    import os
    import signal
    import sys
    import time

    subprocess.run(["bash", "scripts/libvirt-up.sh"], check=True)
    argv = [sys.executable, "-m", "dltestbed", "bench", "--targets", "vm", *TINY, "--results", str(results)]
    proc = subprocess.Popen(argv, env={**os.environ, **vm_env}, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not _domains() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert _domains(), "the VM was never defined"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted while preparing the targets" in err and "Traceback" not in err
    assert not _domains() and not _qemus() and not list(Path(vm_env["DLTESTBED_VM_DIR"]).iterdir())


def _pool_files(pool: Path) -> list[str]:
    return sorted(p.name for p in pool.iterdir()) if pool.exists() else []


def _remove_pool(path: Path) -> None:
    import libvirt

    conn = libvirt.open("qemu:///system")
    try:
        for p in conn.listAllStoragePools():
            if f"<path>{path}</path>" in p.XMLDesc():
                if p.isActive():
                    for v in p.listAllVolumes():
                        v.delete(0)
                    p.destroy()
                p.undefine()
    finally:
        conn.close()


def test_vms_on_an_inventory_libvirt_host(
    vm_env: dict[str, str],
    guest_image: Path,
    results: Path,
    tmp_path_factory: pytest.TempPathFactory,
    dataset_dir: Path,
) -> None:
    """A lab host in libvirt_hosts (it reaches this machine's libvirtd through its socket): provision
    makes its VM over qemu+ssh, uploading the guest image into the host's pool; bench reaches the VM
    through the host (jump); teardown --inventory leaves only the uploaded guest image."""
    import tempfile

    import yaml

    from dltestbed import lab
    from dltestbed.lab import LabSpec

    labs = tmp_path_factory.mktemp("labs")
    env = {**vm_env, "DLTESTBED_LAB_DIR": str(labs), "XDG_STATE_HOME": str(tmp_path_factory.mktemp("state"))}
    pool = Path(tempfile.mkdtemp(prefix="test-pool-", dir="/var/lib/dltestbed"))  # where qemu can read it
    pool.rmdir()  # libvirt makes it
    import os

    old = os.environ.get("DLTESTBED_LAB_DIR")
    os.environ["DLTESTBED_LAB_DIR"] = str(labs)
    state = lab.up(LabSpec(name="tv", hosts=1, subnet="10.213.87.0/24", vms=True, shares=this_checkout()))
    doc = yaml.safe_load(state.inventory.read_text())
    doc["all"]["vars"]["dltestbed_libvirt_pool"] = str(pool)
    # the host runs this checkout's venv, shared (installing on hosts: test_provision's and test_bastion's)
    doc["all"]["vars"] |= {"dltestbed_venv": sys.prefix, "dltestbed_venv_shared": True}
    inv = labs / "inventory.yml"
    inv.write_text(yaml.safe_dump(doc))
    try:
        prov = run_cli("provision", "--layout", "single", "--inventory", str(inv), env=env, timeout=1800)
        assert prov.returncode == 0, prov.stderr[-4000:]
        assert "uploading the guest image" in prov.stderr and "VM on tv-h1: on-tv-h1 at 10.213.90." in prov.stderr
        assert "made: SSH in" in prov.stderr and "uploaded in" in prov.stderr
        assert "Secsh" not in prov.stderr and "Traceback" not in prov.stderr  # no library noise while it boots
        assert (pool / "on-tv-h1.console.log").stat().st_size > 0  # the boot is logged, for when one fails
        assert any(f.startswith("guest-") and f.endswith(".ok") for f in _pool_files(pool))
        assert {"on-tv-h1.overlay.qcow2", "on-tv-h1.seed.img", "on-tv-h1.console.log"} <= set(_pool_files(pool))

        # real data: the host's copy for bm, the VM's for vm and cvm (cbm on a lab host: test_containers); the
        # disk probe reads it on every layer: the workload through the host, without TensorFlow's minutes under
        # TCG (test_vm_and_cvm_runs_and_teardown runs the model in a VM and in a container in it)
        bench = run_cli(
            "bench",
            "--inventory",
            str(inv),
            "--targets",
            "bm,vm,cvm",
            *DISK_ONLY,
            "--data",
            "real",
            "--data-dir",
            str(dataset_dir),
            "--results",
            str(results),
            "--format",
            "json",
            env=env,
            timeout=1800,
        )
        assert bench.returncode == 0, bench.stderr[-4000:]
        assert "uploading" not in bench.stderr  # the VM provision made is reused
        assert "copying to tv-h1, VM on-tv-h1 (once" in bench.stderr  # the host's copy, the VM's copy
        all_runs = json.loads(bench.stdout)
        assert sorted(r["target_kind"] for r in all_runs) == ["bm", "cvm", "vm"]
        assert all(r["status"] == "ok" and r["model"] == "micro" for r in all_runs), all_runs
        assert {r["fingerprint"]["dataset_digest"] for r in all_runs} == {_digest(dataset_dir)}
        runs = [r for r in all_runs if r["target_kind"] in ("vm", "cvm")]
        fps = [r["fingerprint"] for r in runs]
        assert all(f["vm_hypervisor"] == "tv-h1" and f["target_host"] == "on-tv-h1" for f in fps), fps
        assert all(f["vm_libvirt_uri"] == f"qemu+ssh://root@{state.hosts[0].ip}:22/system" for f in fps)

        down = run_cli("teardown", "--inventory", str(inv), env=env)
        assert down.returncode == 0, down.stderr
        assert "VM on-tv-h1 on tv-h1" in down.stderr
        assert not _domains() and not _qemus()
        assert all(f.startswith("guest-") for f in _pool_files(pool)), _pool_files(pool)  # the cache stays
        assert not (Path(vm_env["DLTESTBED_VM_DIR"]) / "on-tv-h1").exists()
        again = run_cli("teardown", "--inventory", str(inv), env=env)
        assert again.returncode == 0 and "nothing to remove" in again.stderr
    finally:
        run_cli("teardown", "--inventory", str(inv), env=env)
        lab.down("tv")
        if old is None:
            os.environ.pop("DLTESTBED_LAB_DIR", None)
        else:
            os.environ["DLTESTBED_LAB_DIR"] = old
        _remove_pool(pool)
        import shutil

        shutil.rmtree(pool, ignore_errors=True)
