"""Dataset folders: generating real JPEGs, and telling what is wrong with a folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from dltestbed import dataset
from dltestbed.errors import ConfigError, DataError


def test_make_writes_decodable_jpegs_per_class(tmp_path: Path) -> None:
    index = dataset.make(tmp_path / "d", classes=3, images_per_class=4, size=32, seed=1)
    assert index.classes == ["class_0", "class_1", "class_2"]
    assert len(index.files) == 12 and sorted(set(index.labels)) == [0, 1, 2]
    with Image.open(index.files[0]) as img:
        assert img.format == "JPEG" and img.size == (32, 32)
    again = dataset.make(tmp_path / "e", classes=3, images_per_class=4, size=32, seed=1)
    assert Path(again.files[5]).read_bytes() == Path(index.files[5]).read_bytes()


def test_scan_errors_say_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist"):
        dataset.scan(tmp_path / "missing")
    (tmp_path / "f").write_text("x")
    with pytest.raises(DataError, match="is not a folder"):
        dataset.scan(tmp_path / "f")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match="has no JPEG images"):
        dataset.scan(empty)
    (empty / "cls").mkdir()
    (empty / "cls" / "readme.txt").write_text("x")
    (empty / "loose.jpg").write_bytes(b"x")
    with pytest.raises(DataError, match="has no JPEG images in class subfolders"):
        dataset.scan(empty)


@pytest.mark.parametrize(("kw", "msg"), [({"classes": 0}, "at least 1"), ({"size": 4}, "between 8 and 4096")])
def test_make_rejects_bad_sizes(tmp_path: Path, kw: dict, msg: str) -> None:
    args = {"classes": 2, "images_per_class": 2, "size": 16} | kw
    with pytest.raises(ConfigError, match=msg):
        dataset.make(tmp_path, **args)
