"""What `--targets auto` chooses, and the container limits checked before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from dltestbed.errors import ConfigError
from dltestbed.inventory import Host
from dltestbed.orchestrate import prepare
from dltestbed.runtimes import ContainerOptions, runtime
from dltestbed.targets.container import check_limits, limits
from tests.conftest import one_error_line, run_cli

HOST = Host("n1", "10.0.0.1", 22, "root", None, (), ("bare_metal",))


def test_auto_without_a_container_runtime_is_bare_metal_twice(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no docker, no podman
    auto = prepare.auto_kinds("single", [None])
    assert auto.kinds == ("bm",) and auto.aa
    assert auto.why == (
        "--targets auto: bm twice, as A and A′ (no container: no container runtime works here: "
        "docker is not installed; podman is not installed)"
    )


def test_auto_on_an_inventory_or_another_scenario_is_bare_metal() -> None:
    assert prepare.auto_kinds("single", [HOST]) == prepare.AutoKinds(
        ("bm",), False, "--targets auto: bm on the inventory's hosts"
    )
    for scenario in ("distributed", "shared"):
        auto = prepare.auto_kinds(scenario, [None])
        assert auto.kinds == ("bm",) and not auto.aa and scenario in auto.why


def test_auto_is_announced_before_the_checks(tmp_path: Path, results: Path) -> None:
    # no runtime on PATH: bare metal twice; the bad CPU set then fails the bench before anything runs
    proc = run_cli(
        "bench", "-m", "alexnet", "--container-cpuset", "9999", "--results", str(results), env={"PATH": str(tmp_path)}
    )
    assert "--container-cpuset 9999: CPU 9999 is not one of this machine's" in one_error_line(proc)
    assert "--targets auto: bm twice, as A and A′ (no container: no container runtime works here" in proc.stderr
    assert not results.exists()


def test_limits_in_words_and_in_the_runtime_command() -> None:
    opts = ContainerOptions(cpuset="0-1", memory="4g")
    assert limits(opts) == "cpuset 0-1, memory 4g"
    assert limits(ContainerOptions()) == ""
    argv = runtime("docker").run_argv("img", "c1", ["python"], opts)
    assert "--cpuset-cpus=0-1" in argv and "--memory=4g" in argv


@pytest.mark.parametrize(
    ("cpuset", "memory", "cpus", "message"),
    [
        ("a", None, None, "--container-cpuset: CPU list 'a' is not like 0-3,8"),
        ("3-1", None, None, "--container-cpuset: CPU list '3-1': range 3-1 runs backwards"),
        ("0,5", None, {0, 1}, "--container-cpuset 0,5: CPU 5 is not one of this machine's (0-1)"),
        (None, "4x", None, "--container-memory: a size like 4g or 512m (got '4x')"),
    ],
)
def test_bad_limits_are_one_line(cpuset: str | None, memory: str | None, cpus: set[int] | None, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        check_limits(cpuset, memory, cpus)
    assert str(exc.value) == message


def test_good_limits_pass() -> None:
    check_limits("0-1,3", "512m", {0, 1, 2, 3})
    check_limits("7", "2G", None)  # a remote host's CPUs are not known here: its runtime judges


def test_a_bad_cpuset_fails_before_anything_runs(results: Path) -> None:
    proc = run_cli(
        "bench", "--targets", "bm,cbm", "--container-cpuset", "9999", "-m", "alexnet", "--results", str(results)
    )
    assert "--container-cpuset 9999: CPU 9999 is not one of this machine's" in one_error_line(proc)


def test_cbm_on_a_host_looks_up_the_image_of_the_hosts_flavour(monkeypatch) -> None:
    """A GPU host's containers need the CUDA build's image: bench asks for the host's flavour, never this machine's."""
    host = Host("g1", "192.0.2.7", 22, None, None, (), ("bare_metal", "container_hosts"), {})
    asked: list[tuple[str, str]] = []

    def built(runtime: str, flavor: str) -> None:
        asked.append((runtime, flavor))

    monkeypatch.setattr(prepare, "host_flavor", lambda h: "gpu")  # read on the host (lab tests do it for real)
    with pytest.raises(ConfigError) as err:
        prepare._container(host, prepare.Setup(("cbm",), (host,), "podman"), built)
    assert asked == [("podman", "gpu")]
    assert str(err.value) == (
        "cbm on g1: no podman image of the gpu flavour for this dltestbed build here; "
        "run `dltestbed provision --layout single --inventory INVENTORY --limit g1`"
    )
    with pytest.raises(ConfigError) as err:  # a bench of PyTorch: the image that carries it, and how it is made
        prepare._container(host, prepare.Setup(("cbm",), (host,), "podman", frameworks=("pytorch",)), built)
    assert str(err.value) == (
        "cbm on g1: no podman image of the gpu flavour with PyTorch for this dltestbed build here; "
        "run `dltestbed provision --layout single --inventory INVENTORY --limit g1 --framework pytorch`"
    )


def test_provision_keys_container_images_by_runtime_and_flavour(monkeypatch) -> None:
    """Two podman hosts, one with GPUs: each gets the image built from its own flavour's wheelhouse."""
    from types import SimpleNamespace

    from dltestbed import provision
    from dltestbed.provision import HostReport, image, imagearchive

    builds: list[tuple[str, str]] = []

    def build(runtime: str, house: object) -> object:  # fails closed: only the calls provision makes
        builds.append((runtime, house.flavor))  # type: ignore[attr-defined]
        return SimpleNamespace(tag=f"w:{house.flavor}", digest=f"sha256:{house.flavor}")  # type: ignore[attr-defined]

    monkeypatch.setattr(image, "build", build)
    monkeypatch.setattr(imagearchive, "archive", lambda img: f"/cache/{img.tag}.tar")
    inv = SimpleNamespace(hosts={n: SimpleNamespace(vars={}) for n in ("c1", "g1", "c2")})
    hosts = [HostReport("c1", "a", ["bm", "cbm"]), HostReport("g1", "b", ["cbm"]), HostReport("c2", "c", ["cbm"])]
    hosts[0].flavor, hosts[1].flavor, hosts[2].flavor = "cpu", "gpu", "cpu"
    houses = {f: SimpleNamespace(flavor=f) for f in ("cpu", "gpu")}
    out = provision._container_images(inv, hosts, houses, None)  # type: ignore[arg-type]
    assert builds == [("podman", "cpu"), ("podman", "gpu")]  # once per runtime and flavour
    assert out["dltestbed_images"] == {
        "podman/cpu": {"tag": "w:cpu", "digest": "sha256:cpu", "archive": "/cache/w:cpu.tar"},
        "podman/gpu": {"tag": "w:gpu", "digest": "sha256:gpu", "archive": "/cache/w:gpu.tar"},
    }
    assert out["dltestbed_runtimes"] == {"c1": "podman", "g1": "podman", "c2": "podman"}
    assert [h.image for h in hosts] == ["w:cpu", "w:gpu", "w:cpu"]


@pytest.mark.parametrize(
    ("var", "value", "message"),
    [
        ("dltestbed_container_gpus", "lots", "dltestbed_container_gpus: auto, none, all, indices like 0,1"),
        ("dltestbed_container_runtime", "lxc", "dltestbed_container_runtime: podman or docker (got 'lxc')"),
        ("dltestbed_container_memory", "4q", "dltestbed_container_memory: a size like 4g or 512m (got '4q')"),
        ("dltestbed_container_cpuset", "a-b", "dltestbed_container_cpuset: CPU list 'a-b' is not like 0-3,8"),
        ("dltestbed_container_privileged", "maybe", "dltestbed_container_privileged: true or false (got 'maybe')"),
        ("dltestbed_venv", "relative/venv", "dltestbed_venv must be an absolute path (got 'relative/venv')"),
        ("dltestbed_vm_vcpus", "0", "dltestbed_vm_vcpus 0 is below 1"),
        ("dltestbed_vm_numa_node", "-1", "dltestbed_vm_numa_node -1 is below 0"),
        ("dltestbed_vm_virt_type", "xen", "dltestbed_vm_virt_type: kvm or qemu (got 'xen')"),
        ("dltestbed_vm_memory_mib", "lots", "dltestbed_vm_memory_mib 'lots' is not a whole number"),
    ],
)
def test_every_inventory_value_is_checked_before_a_host_is_contacted(var: str, value: str, message: str) -> None:
    """Known answers: each bad value is one line naming the host, the variable and what is allowed; the
    host (192.0.2.1, TEST-NET) is never contacted: the check returns before any SSH."""
    host = Host("g1", "192.0.2.1", 22, None, None, (), ("bare_metal", "container_hosts", "libvirt_hosts"), {var: value})
    setup = prepare.Setup(("bm", "cbm", "vm"), (host,), None, {}, {}, None, None)
    with pytest.raises(ConfigError) as err:
        prepare.check_host_values(host, setup)
    assert message in str(err.value) and "g1" in str(err.value) and "\n" not in str(err.value)
    good = Host(
        "g1",
        "192.0.2.1",
        22,
        None,
        None,
        (),
        host.groups,
        {"dltestbed_container_gpus": "0,1", "dltestbed_container_privileged": "no", "dltestbed_vm_virt_type": "qemu"},
    )
    prepare.check_host_values(good, setup)


def test_hosts_that_do_not_answer_are_named_and_a_bench_of_only_such_hosts_is_one_line() -> None:
    """192.0.2.0/24 is TEST-NET: nothing answers there. Each host's reason is kept; none answering is refused."""
    quiet = [Host(f"q{i}", f"192.0.2.{i}", 22, "root", None, (), ("bare_metal",)) for i in (1, 2)]
    down = prepare.check_host_keys(quiet)
    assert sorted(down) == ["q1", "q2"] and all("unreachable" in why for why in down.values())
    with pytest.raises(ConfigError, match=r"^no host answers: host q1 .*unreachable.*; host q2 .*unreachable"):
        prepare.check(prepare.Setup(("bm",), tuple(quiet)))


def test_a_site_that_was_down_fails_each_run_at_once_with_its_reason(results: Path) -> None:
    """No connection per run: the target of a down site refuses at once, and the run is stored failed with why."""
    import time

    from dltestbed.config import workload_spec
    from dltestbed.results.store import Store
    from dltestbed.runner import RunContext, execute
    from dltestbed.targets import Site, make

    site = Site(host=HOST, down="host n1 (10.0.0.1:22): unreachable: Connection refused")
    store = Store.open(results)
    started = time.monotonic()
    for kind in ("bm", "cbm", "vm", "cvm"):  # no image or VM was prepared for it: none is needed
        t = make(kind, site)
        assert (t.kind, t.host, t.machine) == (kind, "n1", "n1")
        run = execute(t, workload_spec(model="alexnet", image_size=32, batch_size=2), store, RunContext("b"))
        assert run.status == "failed"
        assert (
            run.reason
            == "n1 did not answer when the bench began: host n1 (10.0.0.1:22): unreachable: Connection refused"
        )
    assert time.monotonic() - started < 5
    store.close()
