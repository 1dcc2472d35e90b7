"""The guest image's venv taken from the workload image's layer in the guest's Podman store: hard links, the
wheelhouse's manifest a file of its own, and the wheelhouse's install where the image is on another base or no
single layer holds the venv."""

from __future__ import annotations

from pathlib import Path

from dltestbed.provision import guestimage
from dltestbed.provision import image as ctr_image
from dltestbed.provision.wheelhouse import Wheelhouse
from dltestbed.vms.images import GUEST_VENV

VENV = GUEST_VENV.lstrip("/")


def _tree(tmp_path: Path, layers: int = 1) -> tuple[Path, Wheelhouse, ctr_image.Image]:
    root = tmp_path / "root"
    overlay = root / "var/lib/containers/storage/overlay"
    (overlay / "base/diff/usr/bin").mkdir(parents=True)  # a layer without the venv
    for i in range(layers):
        venv = overlay / f"l{i}/diff" / VENV
        (venv / "bin").mkdir(parents=True)
        (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
        (venv / "bin/python3").write_text("#!\n")
        (venv / "dltestbed-manifest.txt").write_text("the layer's\n")
    house_dir = tmp_path / "house"
    house_dir.mkdir()
    (house_dir / "manifest.txt").write_text("abc123\n")
    house = Wheelhouse(house_dir, "cpu", "abc123")
    return root, house, ctr_image.Image("podman", ctr_image.tag_of(house), "sha256:00")


def test_the_venv_is_linked_from_the_layer_and_its_manifest_is_its_own(tmp_path: Path) -> None:
    root, house, img = _tree(tmp_path)
    assert guestimage._venv_from_image(root, img, house)
    layer = root / "var/lib/containers/storage/overlay/l0/diff" / VENV
    venv = root / VENV
    assert (venv / "pyvenv.cfg").stat().st_ino == (layer / "pyvenv.cfg").stat().st_ino  # one copy on the disk
    assert (venv / "bin/python3").stat().st_ino == (layer / "bin/python3").stat().st_ino
    assert (venv / "dltestbed-manifest.txt").read_text() == "abc123\n"
    assert (layer / "dltestbed-manifest.txt").read_text() == "the layer's\n"  # the image's layer unchanged


def test_another_base_or_no_single_layer_falls_back_to_the_wheelhouse(tmp_path: Path) -> None:
    root, house, img = _tree(tmp_path / "a")
    other = ctr_image.Image("podman", ctr_image.tag_of(house, "someone/base:1"), "sha256:00")
    assert not guestimage._venv_from_image(root, other, house) and not (root / VENV).exists()
    root, house, img = _tree(tmp_path / "b", layers=2)
    assert not guestimage._venv_from_image(root, img, house) and not (root / VENV).exists()
    root, house, img = _tree(tmp_path / "c", layers=0)
    assert not guestimage._venv_from_image(root, img, house) and not (root / VENV).exists()
