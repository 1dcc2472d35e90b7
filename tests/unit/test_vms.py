"""VM definitions and host checks, pure: domain XML, virt type detection, GPUs from node devices,
the passthrough preflight. Validated with libvirt's own schema (virt-xml-validate) and test driver."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from dltestbed.errors import ConfigError
from dltestbed.vms import hostcheck
from dltestbed.vms.domain import DomainSpec, PciAddress, domain_xml
from tests.conftest import DATA

LIBVIRT = DATA / "libvirt"
CAPS = (LIBVIRT / "caps_tcg_host.xml").read_text()


def _spec(**kw: object) -> DomainSpec:
    values: dict[str, object] = dict(
        name="dltestbed-t1",
        virt_type="qemu",
        vcpus=2,
        memory_mib=2048,
        disk="/var/lib/x/overlay.qcow2",
        console_log="/var/lib/x/console.log",
        bridge="dltvm0",
        mac="52:54:00:aa:bb:cc",
        seed="/var/lib/x/seed.img",
        kernel="/i/vmlinuz",
        initrd="/i/initrd.img",
        cmdline="root=/dev/vda rw console=ttyS0",
    )
    values.update(kw)
    return DomainSpec(**values)  # type: ignore[arg-type]


def _facts(**kw: object) -> hostcheck.HostFacts:
    values: dict[str, object] = dict(
        capabilities=CAPS, kvm_pvm=False, dev_kvm=True, iommu_groups=40, vfio=True, numa_cpus={0: "0-15", 1: "16-31"}
    )
    values.update(kw)
    return hostcheck.HostFacts(**values)  # type: ignore[arg-type]


def test_tcg_domain_has_the_maximum_cpu_and_direct_kernel_boot() -> None:
    root = ET.fromstring(domain_xml(_spec()))
    assert root.get("type") == "qemu"
    assert root.find("cpu").get("mode") == "maximum"  # type: ignore[union-attr]  (qemu64 has no AVX: TF dies)
    assert root.findtext("os/kernel") == "/i/vmlinuz" and root.findtext("os/cmdline").startswith("root=/dev/vda")  # type: ignore[union-attr]
    disks = root.findall("devices/disk")
    assert [d.find("source").get("file") for d in disks] == ["/var/lib/x/overlay.qcow2", "/var/lib/x/seed.img"]  # type: ignore[union-attr]
    assert disks[1].find("readonly") is not None
    assert root.find("devices/serial/source").get("path") == "/var/lib/x/console.log"  # type: ignore[union-attr]
    kvm = ET.fromstring(domain_xml(_spec(virt_type="kvm", kernel=None)))
    assert kvm.find("cpu").get("mode") == "host-passthrough" and kvm.find("os/boot") is not None  # type: ignore[union-attr]


def test_pinning_numa_and_hostdev() -> None:
    xml = domain_xml(_spec(vcpu_pins=("16", "17"), numa_node=1, hostdevs=(PciAddress.parse("0000:3b:00.0"),)))
    root = ET.fromstring(xml)
    assert [(p.get("vcpu"), p.get("cpuset")) for p in root.iterfind("cputune/vcpupin")] == [("0", "16"), ("1", "17")]
    assert root.find("numatune/memory").attrib == {"mode": "strict", "nodeset": "1"}  # type: ignore[union-attr]
    hd = root.find("devices/hostdev")
    assert hd is not None and hd.attrib == {"mode": "subsystem", "type": "pci", "managed": "yes"}
    assert hd.find("source/address").attrib == {
        "domain": "0x0000",
        "bus": "0x3b",
        "slot": "0x00",  # type: ignore[union-attr]
        "function": "0x0",
    }


@pytest.mark.skipif(not shutil.which("virt-xml-validate"), reason="libxml2-utils/libvirt-clients not installed")
def test_the_xml_validates_against_libvirts_schema(tmp_path: Path) -> None:
    for spec in (
        _spec(),
        _spec(
            virt_type="kvm",
            kernel=None,
            seed=None,
            vcpu_pins=("2", "3"),
            numa_node=0,
            hostdevs=(PciAddress.parse("3b:00.0"), PciAddress.parse("0000:af:00.1")),
        ),
    ):
        f = tmp_path / "d.xml"
        f.write_text(domain_xml(spec))
        proc = subprocess.run(["virt-xml-validate", str(f), "domain"], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


def test_passthrough_domain_defines_on_libvirts_test_driver_with_validation() -> None:
    libvirt = pytest.importorskip("libvirt")
    conn = libvirt.open("test:///default")
    xml = domain_xml(_spec(virt_type="kvm", hostdevs=(PciAddress.parse("0000:3b:00.0"),)))
    dom = conn.defineXMLFlags(xml, libvirt.VIR_DOMAIN_DEFINE_VALIDATE)
    assert "<hostdev mode='subsystem' type='pci' managed='yes'>" in dom.XMLDesc()
    with pytest.raises(libvirt.libvirtError):  # the validation is real: an unknown element is refused
        conn.defineXMLFlags(xml.replace("<memballoon", "<nonsense/><memballoon"), libvirt.VIR_DOMAIN_DEFINE_VALIDATE)
    dom.undefine()


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"name": "bad name"}, "letters, digits"),
        ({"vcpus": 0}, "at least 1 vCPU"),
        ({"vcpu_pins": ("1",)}, "1 vCPU pin(s) for 2 vCPU(s)"),
        ({"mac": "00:11:22:33:44:55"}, "is not a locally administered"),
    ],
)
def test_bad_domain_settings(kw: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        domain_xml(_spec(**kw))


def test_virt_type_is_detected_not_assumed() -> None:
    assert hostcheck.virt_type(_facts()) == ("kvm", None)
    t, notice = hostcheck.virt_type(_facts(kvm_pvm=True))  # this machine: libvirt lists kvm, guests cannot boot
    assert t == "qemu" and "kvm_pvm" in (notice or "") and "TCG" in (notice or "")
    t, notice = hostcheck.virt_type(_facts(dev_kvm=False))
    assert t == "qemu" and "KVM is not available" in (notice or "")
    assert hostcheck.virt_type(_facts(kvm_pvm=True), forced="kvm") == ("kvm", None)  # the inventory decides
    with pytest.raises(ConfigError, match="is not kvm or qemu"):
        hostcheck.virt_type(_facts(), forced="xen")
    no_kvm = CAPS.replace("<domain type='kvm'/>", "")
    with pytest.raises(ConfigError, match="offers only qemu"):
        hostcheck.virt_type(_facts(capabilities=no_kvm), forced="kvm")


def _gpus(*names: str) -> list[hostcheck.Gpu]:
    return hostcheck.gpus([(LIBVIRT / n).read_text() for n in names])


def test_gpus_from_node_devices() -> None:
    assert _gpus("nodedev_this_machine_pci.xml") == []  # a NIC, not a GPU
    (a100,) = _gpus("nodedev_gpu_a100.xml")
    assert (str(a100.address), a100.vendor, a100.driver) == ("0000:3b:00.0", "NVIDIA", "vfio-pci")
    assert a100.product == "GA100 [A100 SXM4 40GB]"
    assert (a100.iommu_group, a100.numa_node, a100.group_members) == (32, 1, (a100.address,))


def test_passthrough_preflight_on_a_host_that_can() -> None:
    found = _gpus("nodedev_gpu_a100.xml")
    assert hostcheck.passthrough_preflight("v", "all", _facts(), found, ["16-17"]) == found
    assert hostcheck.passthrough_preflight("v", "0000:3b:00.0", _facts(), found, []) == found


@pytest.mark.parametrize(
    ("kw", "files", "wanted", "pins", "message"),
    [
        ({"iommu_groups": 0}, ["nodedev_gpu_a100.xml"], "all", [], "this host has no IOMMU"),
        ({"vfio": False}, ["nodedev_gpu_a100.xml"], "all", [], "vfio-pci is not available"),
        ({}, [], "all", [], "libvirt sees no GPU on this host"),
        ({}, ["nodedev_gpu_a100.xml"], "2", [], "2 GPU(s) asked, the host has 1"),
        ({}, ["nodedev_gpu_a100.xml"], "0000:af:00.0", [], "no GPU at 0000:af:00.0; GPUs here: 0000:3b:00.0"),
        ({}, ["nodedev_gpu_a100.xml"], "all", ["0-1"], "is on NUMA node 1 (CPUs 16-31) but the vCPUs are pinned"),
        ({}, ["nodedev_gpu_shared_group.xml"], "all", [], "shares IOMMU group 7 with 0000:66:00.0"),
    ],
)
def test_passthrough_preflight_failures(kw: dict, files: list[str], wanted: str, pins: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        hostcheck.passthrough_preflight("v", wanted, _facts(**kw), _gpus(*files), pins)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_without_the_libvirt_binding_vms_say_how_to_get_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import sys

    from dltestbed.vms import hypervisor, lifecycle, removal

    monkeypatch.setitem(sys.modules, "libvirt", None)  # `import libvirt` raises ImportError
    monkeypatch.setenv("DLTESTBED_VM_DIR", str(tmp_path))
    with pytest.raises(lifecycle.VMError, match=r"VMs need libvirt's Python binding: bash scripts/install.sh --vm"):
        hypervisor.local().facts()
    assert removal.delete("nothing-here") is False  # teardown still works without it
    assert removal.domains() == []


# ---- hypervisors: facts, settings, the remote URI, host-side resources on libvirt's test driver ----


def test_host_facts_from_the_facts_script() -> None:
    from dltestbed.vms.hypervisor import parse_facts

    here = parse_facts((LIBVIRT / "facts_this_machine.txt").read_text(), CAPS)  # captured on this machine
    assert (here.kvm_pvm, here.dev_kvm, here.iommu_groups, here.vfio, here.numa_cpus) == (
        True,
        True,
        0,
        False,
        {0: "0-1"},
    )
    assert hostcheck.virt_type(here)[0] == "qemu"
    big = parse_facts((LIBVIRT / "facts_two_socket_gpu_host.txt").read_text(), CAPS)
    assert (big.kvm_pvm, big.iommu_groups, big.vfio, big.numa_cpus[1]) == (False, 187, True, "28-55,84-111")
    assert parse_facts("", CAPS).numa_cpus == {}


def test_vm_settings_from_inventory_variables_and_options() -> None:
    from dltestbed.vms.settings import VMSettings

    host_vars = {
        "dltestbed_vm_vcpus": 4,
        "dltestbed_vm_memory_mib": "8192",
        "dltestbed_vm_cpus": "4-7",
        "dltestbed_vm_numa_node": 1,
    }
    s = VMSettings.from_vars(host_vars, "h1")
    assert (s.vcpus, s.memory_mib, s.numa_node, s.pins()) == (4, 8192, 1, ("4", "5", "6", "7"))
    wider = VMSettings.from_vars(host_vars, "h1", {"vcpus": 2, "memory_mib": None})  # None: not given
    assert (wider.vcpus, wider.memory_mib, wider.pins()) == (2, 8192, ("4-7", "4-7"))
    assert VMSettings.from_vars({}, "h1") == VMSettings()
    with pytest.raises(ConfigError, match=r"^h1: dltestbed_vm_vcpus 'four' is not a whole number$"):
        VMSettings.from_vars({"dltestbed_vm_vcpus": "four"}, "h1")
    with pytest.raises(ConfigError, match=r"^CPU list '4-x' is not like 0-3,8$"):
        VMSettings.from_vars({"dltestbed_vm_cpus": "4-x"}, "h1")


def _host(tmp_path: Path, **kw: object) -> object:
    from dltestbed.inventory import Host

    known = tmp_path / "known hosts"
    known.write_text("10.0.0.5 ssh-ed25519 AAAA\n")
    values: dict[str, object] = dict(
        name="gpu01.example.com",
        address="10.0.0.5",
        port=2222,
        user="ops",
        key_file=str(tmp_path / "id key"),
        known_hosts_files=(str(known),),
        groups=("bare_metal", "libvirt_hosts"),
        vars={},
    )
    values.update(kw)
    return Host(**values)  # type: ignore[arg-type]


def test_remote_uri_checks_host_keys_with_the_files_bench_uses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from urllib.parse import parse_qs, urlsplit

    from dltestbed.vms import hypervisor

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(tmp_path))
    host = _host(tmp_path)
    hv = hypervisor.for_host(host)  # type: ignore[arg-type]
    url = urlsplit(hv.uri)
    assert (url.scheme, url.netloc, url.path) == ("qemu+ssh", "ops@10.0.0.5:2222", "/system")
    query = parse_qs(url.query)
    assert query["keyfile"] == [str(tmp_path / "id key")] and query["no_tty"] == ["1"]
    wrapper = Path(query["command"][0])
    text = wrapper.read_text()
    assert wrapper.stat().st_mode & 0o777 == 0o755 and "StrictHostKeyChecking=yes" in text
    assert f'UserKnownHostsFile="{tmp_path}/known hosts"' in text  # one argument, a quoted path inside
    assert hv.pool_dir == "/var/lib/dltestbed/pool" and hv.host is host and not hv.local
    assert hypervisor.for_host(host).uri == hv.uri  # same wrapper, not a new file each time  # type: ignore[arg-type]
    own = hypervisor.for_host(
        _host(
            tmp_path,
            vars={
                "dltestbed_libvirt_uri": "qemu+tls://h/system",  # type: ignore[arg-type]
                "dltestbed_libvirt_pool": "/srv/vms",
            },
        )
    )
    assert (own.uri, own.pool_dir) == ("qemu+tls://h/system", "/srv/vms")
    with pytest.raises(hypervisor.VMError, match=r"^libvirt on gpu01.example.com: its host key is not recorded; run"):
        hypervisor.for_host(_host(tmp_path, known_hosts_files=()))  # type: ignore[arg-type]


def test_vm_names_on_inventory_hosts() -> None:
    from dltestbed.vms.lifecycle import vm_name

    assert vm_name("gpu01.example.com") == "on-gpu01-example-com"
    assert vm_name("d6-h1") == "on-d6-h1"


def test_pool_network_and_overlay_on_libvirts_test_driver() -> None:
    pytest.importorskip("libvirt", reason="libvirt-python is installed by scripts/install.sh --vm (CI has it)")
    from dltestbed.vms import hypervisor as h
    from dltestbed.vms import pool as pl

    hv = h.Hypervisor("test:///default", "/nowhere/dltestbed-pool")
    other = h.Hypervisor("test:///default", "/elsewhere/pool")
    assert hv.pool_name != other.pool_name  # one pool per folder on a shared libvirtd
    with hv.connect() as conn:
        pool = pl.pool(conn, hv)
        assert pool.isActive() and pl.pool(conn, hv).name() == pool.name()  # found, not made twice
        path = pl.overlay(pool, "vm1.overlay.qcow2", "/base/disk.qcow2", 2 * 10**9)
        pl.overlay(pool, "vm10.overlay.qcow2", "/base/disk.qcow2", 2 * 10**9)
        assert path == "/nowhere/dltestbed-pool/vm1.overlay.qcow2"
        xml = ET.fromstring(pool.storageVolLookupByName("vm1.overlay.qcow2").XMLDesc())
        assert xml.findtext("./backingStore/path") == "/base/disk.qcow2"
        assert pl.remove_volumes(pool, "vm1.") == 1 and list(pl.volumes(pool)) == ["vm10.overlay.qcow2"]
        h.ensure_network(conn)
        h.ensure_network(conn)  # idempotent
        net = ET.fromstring(conn.networkLookupByName(h.NETWORK).XMLDesc())
        assert net.find("./forward").get("mode") == "open" and net.find("./bridge").get("name") == h.BRIDGE
        assert net.find("./ip").get("address") == f"{h.SUBNET}.1" and net.find("./ip/dhcp") is None
        assert h.remove_network(conn) is True and h.remove_network(conn) is False


@pytest.mark.parametrize(
    ("capture", "message"),
    [
        (
            "overlay",
            r"^VM image x: it is an overlay of debian-12-genericcloud-amd64.qcow2; give one self-contained image",
        ),
        ("vmdk", r"^VM image x: format vmdk; use qcow2 or raw \(qemu-img convert -O qcow2 …\)$"),
        ("encrypted", r"^VM image x: it is encrypted; dltestbed cannot give qemu its secret$"),
    ],
)
def test_user_images_dltestbed_cannot_boot_are_refused(capture: str, message: str) -> None:
    from dltestbed.vms.userimage import parse_info

    assert parse_info((LIBVIRT / "qemu-img-info-cloud.json").read_text(), "x") == ("qcow2", 2 * 1024**3)
    with pytest.raises(ConfigError, match=message):
        parse_info((LIBVIRT / f"qemu-img-info-{capture}.json").read_text(), "x")
    with pytest.raises(ConfigError, match=r"^VM image x: qemu-img could not read it$"):
        parse_info("not json", "x")


def test_user_image_inspected_on_disk(tmp_path: Path) -> None:
    from dltestbed.vms import userimage

    disk = tmp_path / "cloud.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(disk), "3G"], check=True)
    img = userimage.inspect(str(disk))
    assert (img.format, img.virtual_size, img.name, img.kernel, img.container_tag) == (
        "qcow2",
        3 * 1024**3,
        "cloud.qcow2",
        None,
        "",
    )
    assert userimage.inspect(str(disk)).key == img.key  # same file, same key: uploaded once per host
    subprocess.run(["qemu-img", "resize", "-q", str(disk), "4G"], check=True)
    assert userimage.inspect(str(disk)).key != img.key  # changed: a new image
    text = tmp_path / "notes.txt"
    text.write_text("hello\n" * 200)  # qemu-img calls any file raw
    with pytest.raises(ConfigError, match=r"notes.txt: not a bootable disk image \(no boot sector\)$"):
        userimage.inspect(str(text))
    with pytest.raises(ConfigError, match=r"^VM image /nonexistent.qcow2: no such file$"):
        userimage.inspect("/nonexistent.qcow2")


def test_a_damaged_user_image_is_one_line_before_anything_runs(tmp_path: Path) -> None:
    """A qcow2 cut short by a copy (its header still reads): qemu-img check finds it; the bench says so
    in one line and runs nothing. Leaked clusters alone (exit 3) are no damage."""
    from dltestbed.vms import userimage
    from tests.conftest import one_error_line, run_cli

    disk = tmp_path / "cloud.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(disk), "64M"], check=True)
    subprocess.run(["qemu-io", "-c", "write -P 0xab 0 4M", str(disk)], check=True, capture_output=True)
    assert userimage.inspect(str(disk)).format == "qcow2"
    os.truncate(disk, 1024 * 1024)
    with pytest.raises(ConfigError, match=r"qemu-img check finds it damaged \(\d+ error\(s\), truncated\?\)$"):
        userimage.inspect(str(disk))
    assert userimage.corruption('{"leaks": 3, "corruptions": 0}', 3) is None
    results = tmp_path / "results.sqlite"
    proc = run_cli(
        "bench",
        "--targets",
        "vm",
        "--vm-image",
        str(disk),
        "--model",
        "alexnet",
        "--steps",
        "2",
        "--results",
        str(results),
        env={"XDG_STATE_HOME": str(tmp_path / "state")},
    )
    line = one_error_line(proc)
    assert proc.returncode == 2 and "cloud.qcow2: qemu-img check finds it damaged" in line
    assert not results.exists() or not sqlite3.connect(results).execute("SELECT count(*) FROM runs").fetchone()[0]


def test_user_image_and_disk_settings() -> None:
    from dltestbed.vms.settings import VMSettings

    s = VMSettings.from_vars({"dltestbed_vm_image": "/srv/debian-12.qcow2", "dltestbed_vm_disk_gib": "30"}, "h1")
    assert (s.image, s.disk_gib) == ("/srv/debian-12.qcow2", 30)
    assert VMSettings.from_vars({"dltestbed_vm_image": "/a.qcow2"}, "h1", {"image": "/b.qcow2"}).image == "/b.qcow2"
    with pytest.raises(ConfigError, match=r"^h1: dltestbed_vm_disk_gib 'lots' is not a whole number$"):
        VMSettings.from_vars({"dltestbed_vm_disk_gib": "lots"}, "h1")


def test_a_domain_without_a_kernel_boots_its_own_boot_loader() -> None:
    root = ET.fromstring(domain_xml(_spec(kernel=None, initrd=None, cmdline=None)))
    assert root.find("./os/boot").get("dev") == "hd"  # type: ignore[union-attr]
    assert root.find("./os/kernel") is None and root.find("./os/cmdline") is None


def test_the_seed_gives_cloud_init_root_login_one_host_key_and_a_static_address(tmp_path: Path) -> None:
    import yaml

    from dltestbed.vms.seed import mac as _mac
    from dltestbed.vms.seed import seed_disk as _seed

    key = tmp_path / "ssh_host_ed25519_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    seed = _seed(tmp_path, "vm1", "10.213.90.11", "ssh-ed25519 AAAAC3Nza controller\n", key)
    out = tmp_path / "out"
    out.mkdir()
    for name in ("user-data", "network-config", "meta-data"):
        subprocess.run(["mcopy", "-i", str(seed), f"::{name}", str(out / name)], check=True)
    label = subprocess.run(["mlabel", "-s", "-i", str(seed), "::"], capture_output=True, text=True).stdout
    assert "CIDATA" in label  # what cloud-init's NoCloud looks for
    user = (out / "user-data").read_text()
    assert user.startswith("#cloud-config\n")
    data = yaml.safe_load(user)
    assert data["ssh_authorized_keys"] == ["ssh-ed25519 AAAAC3Nza controller"]
    assert (data["disable_root"], data["ssh_pwauth"], data["ssh_genkeytypes"]) == (False, False, ["ed25519"])
    assert data["ssh_keys"]["ed25519_private"].strip() == key.read_text().strip()
    net = yaml.safe_load((out / "network-config").read_text())
    assert net["version"] == 1 and len(net["config"]) == 1
    eth = net["config"][0]
    assert (eth["type"], eth["name"], eth["mac_address"]) == ("physical", "eth0", _mac("vm1"))  # renamed by MAC
    assert eth["subnets"] == [
        {"type": "static", "address": "10.213.90.11", "netmask": "255.255.255.0", "gateway": "10.213.90.1"}
    ]  # the default route: the host's end of the bridge
    assert yaml.safe_load((out / "meta-data").read_text()) == {"instance-id": "vm1", "local-hostname": "vm1"}


def test_the_workload_check_and_the_vms_ansible_inventory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shlex

    import yaml

    from dltestbed.provision import guest
    from dltestbed.vms.record import VMRecord

    assert guest.parse_check("manifest=abc123\npython=3.11\n") == ("abc123", "3.11")
    assert guest.parse_check("manifest=\npython=\n") == ("", "")
    monkeypatch.setenv("DLTESTBED_VM_DIR", str(tmp_path / "vms"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(tmp_path))
    rec = VMRecord(
        name="on-h1",
        uri="qemu+ssh://h1/system",
        address="10.213.90.12",
        mac="52:54:00:01:02:03",
        bridge="dltvm0",
        virt_type="qemu",
        vcpus=2,
        memory_mib=3072,
        image_key="k",
        container_tag="",
        container_digest="",
        created_at=0.0,
        image_name="debian-12.qcow2",
    )
    local = yaml.safe_load(guest.inventory_text(rec, None))["all"]["hosts"]["on-h1"]
    assert (local["ansible_host"], local["ansible_user"], local["dltestbed_venv"]) == (
        "10.213.90.12",
        "root",
        "/opt/dltestbed/venv",
    )
    assert local["ansible_ssh_private_key_file"] == str(rec.key_file)
    assert shlex.split(local["ansible_ssh_common_args"]) == [
        "-o",
        f"UserKnownHostsFile={rec.known_hosts}",
        "-o",
        "StrictHostKeyChecking=yes",
    ]
    remote = yaml.safe_load(guest.inventory_text(rec, _host(tmp_path)))["all"]["hosts"]["on-h1"]  # type: ignore[arg-type]
    args = shlex.split(remote["ansible_ssh_common_args"])
    proxy = shlex.split(args[-1].removeprefix("ProxyCommand="))
    assert args[-2] == "-o" and proxy[:3] == ["ssh", "-W", "%h:%p"] and proxy[-1] == "ops@10.0.0.5"
    assert proxy[3:5] == ["-p", "2222"] and proxy[proxy.index("-i") + 1] == str(tmp_path / "id key")
    assert f"UserKnownHostsFile={tmp_path}/known hosts" in proxy  # one argument, though the path has a space
    assert "StrictHostKeyChecking=yes" in proxy and "BatchMode=yes" in proxy


def test_bench_checks_a_users_image_before_anything_is_made(tmp_path: Path, results: Path) -> None:
    from tests.conftest import one_error_line, run_cli

    disk = tmp_path / "cloud.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(disk), "2G"], check=True)
    env = {"DLTESTBED_VM_DIR": str(tmp_path / "vms")}
    tiny = ["--model", "alexnet", "--steps", "1", "--warmup", "1", "--repeat", "1", "--results", str(results)]
    line = one_error_line(run_cli("bench", "--targets", "vm,cvm", "--vm-image", str(disk), *tiny, env=env))
    assert line == (
        "error: cvm: the VM would run your image cloud.qcow2, which has no dltestbed container image; "
        "cvm needs dltestbed's guest image (run vm alone with your image)"
    )
    line = one_error_line(
        run_cli("bench", "--targets", "vm", "--vm-image", str(tmp_path / "nope.qcow2"), *tiny, env=env)
    )
    assert line == f"error: VM image {tmp_path}/nope.qcow2: no such file"
    assert not (tmp_path / "vms").exists() and not results.exists()  # nothing made, nothing stored


@pytest.mark.parametrize(
    ("tail", "stalled"),
    [
        ("[    1.996175] pnp: PnP ACPI: found 5 devices", True),  # captured: a TCG boot that never went on
        (
            "[    2.512345] ---[ end Kernel panic - not syncing: VFS: Unable to mount root fs"
            " on unknown-block(0,0) ]---",
            False,
        ),
        ("[   40.821527] powernow_k8: Power state transitions not supported", False),  # late: userspace is up
        ("[  OK  ] Finished dltestbed-seed.service", False),
        ("(empty)", False),
    ],
)
def test_an_early_boot_stall_is_told_from_a_panic_and_a_slow_boot(tail: str, stalled: bool) -> None:
    from dltestbed.vms.boot import stalled_early

    assert stalled_early(tail) is stalled


def test_the_domain_records_its_owner() -> None:
    """Known answer: dltestbed's metadata element carries the installation that made the domain; what
    libvirt hands back for that namespace reads as that owner, anything else as none."""
    from dltestbed.vms.domain import METADATA_NS, owner_in

    spec = DomainSpec(
        name="dltestbed-x",
        virt_type="qemu",
        vcpus=1,
        memory_mib=512,
        disk="/d.qcow2",
        console_log="/c.log",
        bridge="br0",
        mac="52:54:00:00:00:01",
        owner="ops@node-1a2b",
    )
    root = ET.fromstring(domain_xml(spec))
    (el,) = root.find("metadata") or []
    assert (el.tag, el.get("owner")) == (f"{{{METADATA_NS}}}vm", "ops@node-1a2b")
    assert owner_in(f'<dltestbed:vm xmlns:dltestbed="{METADATA_NS}" owner="ops@node-1a2b"/>') == "ops@node-1a2b"
    assert owner_in(None) is None and owner_in("<not xml") is None and owner_in("<vm/>") is None
    plain = DomainSpec(**{**spec.__dict__, "owner": None})
    assert ET.fromstring(domain_xml(plain)).find("metadata") is None
