"""On-disk ImageNet-style datasets: DIR/<class>/<image>.jpg. Scanning (pure Python) and generating."""

from __future__ import annotations

import colorsys
import hashlib
import json
import os
import random
from dataclasses import dataclass
from pathlib import Path

from dltestbed.errors import ConfigError, DataError

JPEG_SUFFIXES = (".jpg", ".jpeg", ".JPG", ".JPEG")


@dataclass(frozen=True)
class DatasetIndex:
    """The files of a dataset folder and their integer labels (class folders in sorted order)."""

    root: Path
    classes: list[str]
    files: list[str]
    labels: list[int]


def scan(root: str | Path) -> DatasetIndex:
    """Index a dataset folder, or raise DataError saying what is wrong with it."""
    path = Path(root).expanduser()
    hint = "expected DIR/<class>/*.jpg; make one with `dltestbed data make --out DIR`"
    if not path.exists():
        raise DataError(f"data dir {str(path)!r} does not exist ({hint})")
    if not path.is_dir():
        raise DataError(f"data dir {str(path)!r} is not a folder ({hint})")
    classes: list[str] = []
    files: list[str] = []
    labels: list[int] = []
    try:
        subdirs = sorted(e.name for e in os.scandir(path) if e.is_dir())
    except OSError as exc:
        raise DataError(f"data dir {str(path)!r} cannot be read: {exc.strerror}") from None
    for name in subdirs:
        images = sorted(e.path for e in os.scandir(path / name) if e.is_file() and e.name.endswith(JPEG_SUFFIXES))
        if not images:
            continue
        label = len(classes)
        classes.append(name)
        files.extend(images)
        labels.extend([label] * len(images))
    if not files:
        raise DataError(f"data dir {str(path)!r} has no JPEG images in class subfolders ({hint})")
    return DatasetIndex(path.resolve(), classes, files, labels)


def class_colour(c: int, classes: int) -> tuple[int, int, int]:
    """Class c's colour: hues spread evenly round the colour wheel (so every class differs from the others
    by at least 360/classes degrees of hue), full saturation, value 200. Pure."""
    r, g, b = colorsys.hsv_to_rgb(c / classes, 1.0, 200 / 255)
    return round(r * 255), round(g * 255), round(b * 255)


SIGNAL = 0.35  # the class colour's share of each pixel; the rest is noise: learnable, not at a glance


def make(out: str | Path, classes: int, images_per_class: int, size: int, seed: int = 0) -> DatasetIndex:
    """Write a dataset of generated JPEGs whose classes can be learned: each image is noise tinted with its
    class's colour (class_colour, SIGNAL of each pixel) under three ellipses of random colours (distractors)."""
    from PIL import Image, ImageDraw  # only this command needs Pillow

    if classes < 1 or images_per_class < 1:
        raise ConfigError("--classes and --images-per-class must be at least 1")
    if not 8 <= size <= 4096:
        raise ConfigError(f"--image-size: between 8 and 4096 px (got {size})")
    root = Path(out).expanduser()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create {str(root)!r}: {exc.strerror}") from None
    rng = random.Random(seed)
    width = len(str(classes - 1))
    for c in range(classes):
        cls_dir = root / f"class_{c:0{width}d}"
        cls_dir.mkdir(exist_ok=True)
        tint = Image.new("RGB", (size, size), class_colour(c, classes))
        for i in range(images_per_class):
            img = Image.frombytes("RGB", (size, size), rng.randbytes(size * size * 3))
            img = Image.blend(img, tint, SIGNAL)
            draw = ImageDraw.Draw(img)
            for _ in range(3):
                x0, y0 = rng.randrange(size), rng.randrange(size)
                x1, y1 = min(size, x0 + rng.randrange(1, size)), min(size, y0 + rng.randrange(1, size))
                colour = (rng.randrange(256), rng.randrange(256), rng.randrange(256))
                draw.ellipse((x0, y0, max(x0, x1), max(y0, y1)), fill=colour)
            img.save(cls_dir / f"img_{i:05d}.jpg", format="JPEG", quality=90)
    return scan(root)


HOLDOUT_EVERY = 5  # --accuracy: every 5th image of each class is held out (a fifth), the rest trained on


def split(index: DatasetIndex, every: int = HOLDOUT_EVERY) -> tuple[DatasetIndex, DatasetIndex]:
    """(trained on, held out): within each class, in file order, every `every`-th file is held out — the same
    split on every target, whatever the seed. Pure."""
    train: tuple[list[str], list[int]] = ([], [])
    held: tuple[list[str], list[int]] = ([], [])
    seen: dict[int, int] = {}
    for f, label in zip(index.files, index.labels, strict=True):
        k = seen[label] = seen.get(label, 0) + 1
        part = held if k % every == 0 else train
        part[0].append(f)
        part[1].append(label)
    return DatasetIndex(index.root, index.classes, *train), DatasetIndex(index.root, index.classes, *held)


@dataclass(frozen=True)
class DatasetId:
    """What a dataset is, by content: a SHA-256 over each indexed file's path (relative to the root,
    so the class folder: the label), size and content's SHA-256, in index order; its file count and bytes."""

    digest: str
    files: int
    bytes: int

    @property
    def short(self) -> str:
        """The digest's first 12 hex digits, for messages and folder names people read."""
        return self.digest[:12]

    def describe(self) -> str:
        """e.g. `3f2a9c01d4e5 (120 files, 1.2 MB)`."""
        return f"{self.short} ({self.files} files, {self.bytes / 1e6:.1f} MB)"


def shape(index: DatasetIndex) -> tuple[int, int]:
    """(files, bytes) of an index: a stat per file, no content read — what a target checks of its copy."""
    return len(index.files), sum(os.stat(f).st_size for f in index.files)


def _stats(index: DatasetIndex) -> list[tuple[str, str, os.stat_result]]:
    """(path, path relative to the root, stat) per indexed file, in index order: each file stat'ed once."""
    return [(f, os.path.relpath(f, index.root), os.stat(f)) for f in index.files]


def _signature(stats: list[tuple[str, str, os.stat_result]]) -> str:
    """A digest of each file's relative path, size and mtime: when it is unchanged, so is the content digest."""
    h = hashlib.sha256()
    for _, rel, st in stats:
        h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def not_whole_jpeg(data: bytes) -> str | None:
    """Why these bytes are not a whole JPEG file, or None: it must start with the start-of-image marker
    and hold the end-of-image marker in its last 4 KiB (a truncated copy or download lacks it; inside the
    compressed data 0xFF is always followed by 0x00 or a restart marker, so FF D9 cannot occur there)."""
    if not data.startswith(b"\xff\xd8"):
        return "not a JPEG file (no start-of-image marker)"
    if b"\xff\xd9" not in data[-4096:]:
        return "truncated (no end-of-image marker)"
    return None


def content_digest(index: DatasetIndex, stats: list[tuple[str, str, os.stat_result]] | None = None) -> str:
    """The content digest (see DatasetId); reads every file once, and checks on the way that each one is a
    whole JPEG: a DataError names the first that is not, and how many are not."""
    h = hashlib.sha256()
    bad: list[tuple[str, str]] = []
    for f, rel, st in stats or _stats(index):
        with open(f, "rb") as fh:
            data = fh.read()
        if why := not_whole_jpeg(data):
            bad.append((rel, why))
        h.update(f"{rel}\0{st.st_size}\0{hashlib.sha256(data).hexdigest()}\n".encode())
    if bad:
        raise DataError(
            f"data dir {str(index.root)!r}: {len(bad)} of {len(index.files)} image(s) cannot be used; "
            f"first: {bad[0][0]}: {bad[0][1]} (copy the dataset again, or remove them)"
        )
    return h.hexdigest()


def identify(index: DatasetIndex, cache: Path | None = None) -> DatasetId:
    """The dataset's identity. With `cache` (a JSON file), the content digest is read again only when a
    file's path, size or mtime changed since it was computed for this folder."""
    stats = _stats(index)
    files, nbytes = len(stats), sum(st.st_size for _, _, st in stats)
    if cache is None:
        return DatasetId(content_digest(index, stats), files, nbytes)
    sig = _signature(stats)
    try:
        known = json.loads(cache.read_text())
    except (OSError, ValueError):
        known = {}
    hit = known.get(str(index.root)) if isinstance(known, dict) else None
    if isinstance(hit, dict) and hit.get("signature") == sig and hit.get("digest") and hit.get("checked"):
        return DatasetId(str(hit["digest"]), files, nbytes)
    digest = content_digest(index, stats)
    known = known if isinstance(known, dict) else {}
    known[str(index.root)] = {"signature": sig, "digest": digest, "checked": True}  # checked: whole JPEGs
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(".tmp")
        tmp.write_text(json.dumps(known, indent=1))
        tmp.replace(cache)
    except OSError:
        pass  # a cache that cannot be written costs a re-read next time, nothing else
    return DatasetId(digest, files, nbytes)


def unreadable_by_others(root: Path) -> str | None:
    """The first folder or file under root that a user other than its owner cannot read (a container's
    unprivileged user must), or None."""
    for dirpath, dirnames, filenames in os.walk(root):
        if os.stat(dirpath).st_mode & 0o005 != 0o005:
            return dirpath
        for name in filenames:
            p = os.path.join(dirpath, name)
            if name.endswith(JPEG_SUFFIXES) and not os.stat(p).st_mode & 0o004:
                return p
        dirnames.sort()
    return None
