"""Dataset folders: generating real JPEGs, and telling what is wrong with a folder."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from PIL import Image

from dltestbed import dataset
from dltestbed.config import spec_json
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


def _jpeg(body: bytes) -> bytes:
    """Bytes with a JPEG's start and end markers around them (enough for the dataset's whole-file check)."""
    return b"\xff\xd8" + body + b"\xff\xd9"


def _tree(root: Path, files: dict[str, bytes]) -> dataset.DatasetIndex:
    for rel, content in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(content)
    return dataset.scan(root)


def test_the_digest_is_of_paths_sizes_and_contents(tmp_path: Path) -> None:
    """Known answer: the digest is SHA-256 over `relpath\\0size\\0sha256(content)\\n` per file, in index order."""
    import hashlib

    files = {"a/1.jpg": _jpeg(b"one"), "a/2.jpg": _jpeg(b"two!"), "b/1.jpg": _jpeg(b"three")}
    ident = dataset.identify(_tree(tmp_path / "x", files))
    lines = "".join(f"{rel}\0{len(c)}\0{hashlib.sha256(c).hexdigest()}\n" for rel, c in sorted(files.items()))
    assert ident == dataset.DatasetId(hashlib.sha256(lines.encode()).hexdigest(), 3, 24)
    assert ident.short == ident.digest[:12] and ident.describe() == f"{ident.short} (3 files, 0.0 MB)"
    # the same files elsewhere: the same dataset; files that are not images in class folders do not count
    same = _tree(tmp_path / "y", {**files, "notes.txt": b"n", "b/readme.txt": b"r"})
    assert dataset.identify(same) == ident
    # one byte changed, a file moved to another class (its label), a file more: each another dataset
    assert dataset.identify(_tree(tmp_path / "z1", {**files, "b/1.jpg": _jpeg(b"threE")})).digest != ident.digest
    assert (
        dataset.identify(
            _tree(tmp_path / "z2", {"a/1.jpg": _jpeg(b"one"), "b/2.jpg": _jpeg(b"two!"), "b/1.jpg": _jpeg(b"three")})
        ).digest
        != ident.digest
    )
    assert dataset.identify(_tree(tmp_path / "z3", {**files, "b/2.jpg": _jpeg(b"")})).files == 4


def test_the_digest_cache_reads_contents_again_only_after_a_change(tmp_path: Path, monkeypatch) -> None:
    index = _tree(tmp_path / "d", {"a/1.jpg": _jpeg(b"one"), "b/1.jpg": _jpeg(b"two")})
    cache = tmp_path / "cache" / "digests.json"
    first = dataset.identify(index, cache)
    reads: list[str] = []
    real = dataset.content_digest
    monkeypatch.setattr(dataset, "content_digest", lambda i, stats=None: reads.append(str(i.root)) or real(i, stats))
    assert dataset.identify(index, cache) == first and reads == []  # unchanged: from the cache
    import os

    (tmp_path / "d" / "a" / "1.jpg").write_bytes(_jpeg(b"ONE"))
    os.utime(tmp_path / "d" / "a" / "1.jpg", ns=(1, 1))
    again = dataset.identify(dataset.scan(tmp_path / "d"), cache)
    assert reads == [str(index.root)] and again.digest != first.digest
    cache.write_text("not json")  # a broken cache is read around, never trusted
    assert dataset.identify(index, cache).digest == again.digest


def test_truncated_and_foreign_files_are_found_while_the_digest_reads_them(tmp_path: Path) -> None:
    made = dataset.make(tmp_path / "d", classes=2, images_per_class=3, size=16)
    assert all(dataset.not_whole_jpeg(Path(f).read_bytes()) is None for f in made.files)  # what `data make` writes
    cache = tmp_path / "digests.json"
    first = dataset.identify(made, cache)
    victim = Path(made.files[4])
    whole = victim.read_bytes()
    victim.write_bytes(whole[: len(whole) // 2])  # a copy cut short
    with pytest.raises(DataError, match=r"1 of 6 image\(s\) cannot be used; first: class_1/img_00001.jpg: truncated"):
        dataset.identify(dataset.scan(tmp_path / "d"), cache)
    victim.write_bytes(b"\x89PNG\r\n\x1a\n" + whole)  # another format under a .jpg name
    with pytest.raises(DataError, match="not a JPEG file"):
        dataset.identify(dataset.scan(tmp_path / "d"), cache)
    victim.write_bytes(whole + b"\0" * 100)  # padding after the end marker is fine, as decoders read it
    assert dataset.identify(dataset.scan(tmp_path / "d"), cache).digest != first.digest
    victim.write_bytes(whole)
    assert dataset.identify(dataset.scan(tmp_path / "d"), cache).digest == first.digest


def test_a_truncated_dataset_stops_the_bench_before_it_runs(tmp_path: Path) -> None:
    from tests.conftest import one_error_line, run_cli

    made = dataset.make(tmp_path / "d", classes=2, images_per_class=2, size=16)
    Path(made.files[0]).write_bytes(Path(made.files[0]).read_bytes()[:100])
    results = tmp_path / "results.sqlite"
    proc = run_cli(
        "bench",
        "--model",
        "alexnet",
        "--image-size",
        "32",
        "--steps",
        "2",
        "--targets",
        "bm",
        "--data",
        "real",
        "--data-dir",
        str(tmp_path / "d"),
        "--results",
        str(results),
        env={"XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    line = one_error_line(proc)
    assert proc.returncode == 2 and "1 of 4 image(s) cannot be used; first: class_0/" in line and "truncated" in line
    assert not results.exists() or not sqlite3.connect(results).execute("SELECT count(*) FROM runs").fetchone()[0]


def test_unreadable_files_are_found(tmp_path: Path) -> None:
    index = _tree(tmp_path / "d", {"a/1.jpg": b"one", "b/1.jpg": b"two"})
    assert dataset.unreadable_by_others(index.root) is None
    (tmp_path / "d" / "b" / "1.jpg").chmod(0o600)
    assert dataset.unreadable_by_others(index.root) == str(tmp_path / "d" / "b" / "1.jpg")
    (tmp_path / "d" / "a").chmod(0o700)
    assert dataset.unreadable_by_others(index.root) == str(tmp_path / "d" / "a")


def test_a_target_refuses_a_copy_that_is_not_the_dataset(tmp_path: Path) -> None:
    """The workload checks its copy's files and bytes against the controller's identity, then records the digest."""
    from dltestbed.config import workload_spec
    from dltestbed.workload.start import _check_copy

    index = _tree(tmp_path / "d", {"a/1.jpg": _jpeg(b"one"), "b/1.jpg": _jpeg(b"two")})
    ident = dataset.identify(index)
    spec = workload_spec(
        model="alexnet",
        data="real",
        data_dir=str(index.root),
        classes=2,
        data_digest=ident.digest,
        data_files=ident.files,
        data_bytes=ident.bytes,
    )
    assert _check_copy(spec, index) == {"dataset_digest": ident.digest, "dataset_files": 2, "dataset_bytes": 14}
    (tmp_path / "d" / "b" / "1.jpg").write_bytes(_jpeg(b"tw"))  # a partial copy
    with pytest.raises(DataError) as err:
        _check_copy(spec, dataset.scan(index.root))
    assert str(err.value) == (
        f"data dir {str(index.root)!r} is not dataset {ident.short}: 2 files, 13 bytes here; 2 files, 14 bytes expected"
    )
    with pytest.raises(ConfigError, match="--data-digest goes with --data real, --data-files and --data-bytes"):
        workload_spec(model="alexnet", data="real", data_dir="/d", data_digest=ident.digest)
    sent = json.loads(spec_json(spec))  # what the workload is sent, to check its copy against
    assert (sent["data_digest"], sent["data_files"], sent["data_bytes"]) == (ident.digest, 2, 14)


def test_each_target_reads_its_own_copy(tmp_path: Path) -> None:
    """A container mounts its machine's copy read-only and the spec it runs reads the mount; bare metal
    reads its copy; a target the bench placed nothing for keeps the spec's path."""
    from dltestbed.config import workload_spec
    from dltestbed.runner import for_target
    from dltestbed.targets import ContainerImage, DataPlace, Site, make
    from dltestbed.targets.container import CONTAINER_DATA

    spec = workload_spec(model="alexnet", data="real", data_dir="/ctl/d", classes=2)
    site = Site(container=ContainerImage("docker", "img:t", "sha256:x"), data=DataPlace(host="/srv/copy"))
    bm, cbm = make("bm", site), make("cbm", site)
    assert for_target(spec, bm).data_dir == "/srv/copy" and for_target(spec, cbm).data_dir == CONTAINER_DATA
    assert cbm.data_source == "/srv/copy"  # type: ignore[attr-defined]
    assert for_target(spec, make("bm")).data_dir == "/ctl/d"
    synthetic = workload_spec(model="alexnet")
    assert for_target(synthetic, cbm) == synthetic


def test_the_plan_refuses_a_kind_that_cannot_read_the_data(tmp_path: Path) -> None:
    """Before anything is made: cbm here needs a folder its unprivileged user can read and mount; a shared
    path is for inventory hosts."""
    from dltestbed.config import workload_spec
    from dltestbed.inventory import Host
    from dltestbed.orchestrate.dataplace import Dataset, check

    index = _tree(tmp_path / "d", {"a/1.jpg": _jpeg(b"one"), "b/1.jpg": _jpeg(b"two")})
    ident = dataset.identify(index)
    spec = workload_spec(
        model="alexnet",
        data="real",
        data_dir=str(index.root),
        classes=2,
        data_digest=ident.digest,
        data_files=ident.files,
        data_bytes=ident.bytes,
    )
    ds = Dataset.of(spec)
    assert ds is not None and ds.ident == ident and ds.source == index.root
    assert Dataset.of(workload_spec(model="alexnet")) is None
    check(ds, ("bm", "cbm"), (None,))  # readable by all: fine
    (tmp_path / "d" / "a" / "1.jpg").chmod(0o600)
    with pytest.raises(ConfigError, match=r"cbm reads the dataset as the container.s unprivileged user \(10001"):
        check(ds, ("bm", "cbm"), (None,))
    check(ds, ("bm", "vm"), (None,))  # the VM's copy is made readable by the dataset role
    with pytest.raises(ConfigError, match="--data-shared is for --inventory hosts"):
        check(Dataset(ds.source, ident, shared=True), ("bm",), (None,))
    host = Host("h1", "192.0.2.1", 22, None, None, (), ("bare_metal",), {})
    check(Dataset(ds.source, ident, shared=True), ("bm", "cbm"), (host,))  # read on the host, checked there


def test_data_shared_needs_real_data(results: Path) -> None:
    from tests.conftest import one_error_line, run_cli

    line = one_error_line(run_cli("bench", "--targets", "bm", "--data-shared", "--results", str(results)))
    assert line == "error: --data-shared goes with --data real --data-dir DIR"
