"""The lab cluster's pure parts: its certificates, the sandbox image's archive, a node's configs and overlay, the
build's checksums, the nodes' states. Known answers; the cluster itself runs in tests/lab/test_kubernetes.py."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from dltestbed.lab import kube
from dltestbed.lab.kube import build, control, node, ociarchive, pki
from dltestbed.lab.net import LabError
from dltestbed.lab.state import plan
from dltestbed.requests.lab import LabSpec


def test_a_certificate_is_signed_by_the_ca_and_says_who_it_is() -> None:
    ca = pki.ca("t")
    kubelet = pki.issue(ca, "system:node:h1", "system:nodes")
    server = pki.issue(ca, "kube-apiserver", addresses=("10.1.2.1",), names=("kubernetes",))
    ca_cert = x509.load_pem_x509_certificate(ca.cert)
    key = ca_cert.public_key()
    assert isinstance(key, ec.EllipticCurvePublicKey)
    for pair in (kubelet, server):
        cert = x509.load_pem_x509_certificate(pair.cert)
        cert.verify_directly_issued_by(ca_cert)  # raises when it is not
    k = x509.load_pem_x509_certificate(kubelet.cert)
    assert k.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "system:node:h1"
    assert k.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:nodes"
    assert list(k.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    s = x509.load_pem_x509_certificate(server.cert)
    alt = s.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(a) for a in alt.get_values_for_type(x509.IPAddress)] == ["10.1.2.1"]
    assert alt.get_values_for_type(x509.DNSName) == ["kubernetes"]
    other = pki.ca("other")
    with pytest.raises(Exception):  # noqa: B017 — cryptography's own signature error
        x509.load_pem_x509_certificate(kubelet.cert).verify_directly_issued_by(
            x509.load_pem_x509_certificate(other.cert)
        )


def test_a_kubeconfig_holds_its_certificates_inline(tmp_path: Path) -> None:
    ca = pki.ca("t")
    client = pki.issue(ca, "u", "g")
    doc = yaml.safe_load(pki.kubeconfig("c", "https://10.0.0.1:6443", ca, "u", client))
    assert doc["current-context"] == "c" and doc["clusters"][0]["cluster"]["server"] == "https://10.0.0.1:6443"
    import base64

    assert base64.b64decode(doc["users"][0]["user"]["client-key-data"]) == client.key
    pki.write(tmp_path / "k", "secret", private=True)
    assert (tmp_path / "k").stat().st_mode & 0o777 == 0o600


def test_the_archive_is_an_oci_layout_whose_digests_hold() -> None:
    raw = ociarchive.archive("localhost/x/pause:3.4", {"pause": (b"\x7fELF...", 0o755)}, ["/pause"])
    assert raw == ociarchive.archive("localhost/x/pause:3.4", {"pause": (b"\x7fELF...", 0o755)}, ["/pause"])
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    for name, data in files.items():
        if name.startswith("blobs/sha256/"):
            assert hashlib.sha256(data).hexdigest() == name.rsplit("/", 1)[1]
    index = json.loads(files["index.json"])
    entry = index["manifests"][0]
    assert entry["annotations"]["io.containerd.image.name"] == "localhost/x/pause:3.4"
    manifest = json.loads(files["blobs/sha256/" + entry["digest"].split(":")[1]])
    config = json.loads(files["blobs/sha256/" + manifest["config"]["digest"].split(":")[1]])
    assert config["config"]["Entrypoint"] == ["/pause"]
    layer = files["blobs/sha256/" + manifest["layers"][0]["digest"].split(":")[1]]
    assert config["rootfs"]["diff_ids"] == [manifest["layers"][0]["digest"]]
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        member = tar.getmember("pause")
        assert member.mode == 0o755 and tar.extractfile(member).read() == b"\x7fELF..."  # type: ignore[union-attr]


def test_a_nodes_configs() -> None:
    lab = plan(LabSpec(name="kx", hosts=3, subnet="10.213.50.0/24", kubernetes=True))
    h2 = lab.hosts[1]
    kubelet = yaml.safe_load(node.kubelet_config(lab, h2))
    assert kubelet["cgroupRoot"] == "/dltestbed-lab/kx/kx-h2/k8s" and kubelet["address"] == h2.ip
    assert kubelet["makeIPTablesUtilChains"] is False and kubelet["authentication"]["anonymous"]["enabled"] is False
    cni = json.loads(node.cni_config(h2))
    assert cni["plugins"][0]["ipam"]["ranges"] == [[{"subnet": "10.244.2.0/24"}]]
    assert "restrict_oom_score_adj = true" in node.containerd_config()
    assert node.PAUSE in node.containerd_config()


def test_the_overlay_reaches_every_other_hosts_pod_subnet_through_its_vxlan_device() -> None:
    lab = plan(LabSpec(name="kx", hosts=3, subnet="10.213.50.0/24", kubernetes=True))
    h1, _, h3 = lab.hosts
    cmds = [" ".join(c) for c in node.overlay_commands(lab, h1)]
    assert cmds[0].startswith(f"ip link add flannel.1 type vxlan id 1 local {h1.ip} dev eth0 dstport 8472")
    assert "ip route replace 10.244.2.0/24 via 10.244.2.0 dev flannel.1 onlink" in cmds
    assert f"bridge fdb append {node.vtep_mac(h3)} dev flannel.1 dst {h3.ip}" in cmds
    assert not any("10.244.1.0/24" in c for c in cmds)  # its own subnet is on its bridge
    assert len({node.vtep_mac(h) for h in lab.hosts}) == 3


def test_a_lab_cluster_behind_a_bastion_is_one_line() -> None:
    from dltestbed.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^--kubernetes and --bastion: .*choose one$"):
        plan(LabSpec(name="kx", hosts=2, kubernetes=True, bastion=True))


def test_the_control_plane_listens_on_the_labs_bridge() -> None:
    lab = plan(LabSpec(name="kx", hosts=2, subnet="10.213.50.0/24", kubernetes=True))
    argv = control.argvs(lab)
    assert f"--bind-address={lab.bridge_ip}" in argv["kube-apiserver"]
    assert f"--etcd-servers=http://{lab.bridge_ip}:2379" in argv["kube-apiserver"]
    assert all(str(control.folder(lab)) in " ".join(a) for a in argv.values())  # how `down` finds them


def test_sha256sum_lines_and_a_missing_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = "a" * 64
    assert build.sums(f"{d}  bin/kubelet\n{d}  ./x.dsc\nnoise\n") == {"bin/kubelet": d, "x.dsc": d}
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(LabError, match=r"Kubernetes is not built here .*bash scripts/install.sh --kubernetes"):
        build.check()
    where = tmp_path / "dltestbed" / "kubernetes" / "v1"
    (where / "bin").mkdir(parents=True)
    (tmp_path / "dltestbed" / "kubernetes" / "current").symlink_to("v1")
    lines = []
    for name in build.BINARIES:
        (where / "bin" / name).write_bytes(name.encode())
        lines.append(f"{hashlib.sha256(name.encode()).hexdigest()}  bin/{name}")
    (where / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    build.check()
    assert build.version() == "v1"
    (where / "bin" / "kubelet").write_bytes(b"changed")
    with pytest.raises(LabError, match=r"kubelet is not what was built"):
        build.check()


def test_nodes_states_from_a_node_list() -> None:
    doc = {
        "items": [
            {"metadata": {"name": "a"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}},
            {"metadata": {"name": "b"}, "status": {"conditions": [{"type": "Ready", "status": "False"}]}},
            {"metadata": {"name": "c"}, "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}},
            {"metadata": {"name": "d"}, "status": {}},
        ]
    }
    assert kube.parse_nodes(doc) == {"a": "Ready", "b": "NotReady", "c": "Unknown", "d": "Unknown"}


def test_the_images_a_node_lists_and_ctr_says_it_unpacked() -> None:
    from dltestbed.lab.kube import imported, listed_images

    said = "unpacking localhost/dltestbed-workload:abc (sha256:0123)...done\nother line\n"
    assert imported(said) == {"localhost/dltestbed-workload:abc"}
    doc = {
        "items": [
            {"metadata": {"name": "h1"}, "status": {"images": [{"names": ["localhost/w:1", "localhost/w@sha256:9"]}]}},
            {"metadata": {"name": "h2"}, "status": {}},
        ]
    }
    assert listed_images(doc) == {"h1": {"localhost/w:1", "localhost/w@sha256:9"}, "h2": set()}
