"""The disk probe: sequential and random reads of the dataset (or a scratch file), the page cache dropped where
it can be, and the mount they were read from."""

from __future__ import annotations

import os
import random
import tempfile

from dltestbed.workload.probes.base import BLOCK, RANDOM_READS, SCRATCH_BYTES, Case, Skip, Where, read_text


def mount_of(path: str, mounts: str) -> tuple[str, str]:
    """(mount point, filesystem type) holding `path`, from /proc/self/mounts' text: the longest mount point
    that is a prefix of the path (the last mounted there wins). Pure."""
    best = ("", "unknown")
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best[0]):
            best = (point, parts[2])
    return best


def drop_cache(paths: tuple[str, ...]) -> str | None:
    """Ask the kernel to drop the page cache of each file (posix_fadvise DONTNEED); why not, or None."""
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError as exc:
            return f"{p}: {exc.strerror}"
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError as exc:
            return f"posix_fadvise: {exc.strerror}"
        finally:
            os.close(fd)
    return None


def _scratch(size: int, seed: int) -> str:
    """A file of `size` random-looking bytes in the temp folder, on disk (fsynced)."""
    rnd = random.Random(seed)
    chunk = rnd.randbytes(1 << 20)
    fd, path = tempfile.mkstemp(prefix="dltestbed-disk-")
    with os.fdopen(fd, "wb") as f:
        for _ in range(size // len(chunk)):
            f.write(chunk)
        f.flush()
        os.fsync(f.fileno())
    return path


def disk(w: Where) -> list[Case | Skip]:
    """Sequential (1 MiB reads) and random (4 KiB preads) read throughput, page cache dropped before each
    pass: the dataset's files as the target sees them, else a scratch file in the temp folder."""
    scratch = None
    files = w.data_files
    if not files:
        scratch = _scratch(SCRATCH_BYTES[w.scale], w.seed)
        files = (scratch,)
    sizes = [os.path.getsize(p) for p in files]
    total = sum(sizes)
    if total == 0:
        raise Skip("the dataset's files are empty")
    point, fstype = mount_of(os.path.realpath(files[0]), read_text("/proc/self/mounts") or "")
    memory = " — in memory, not on a disk" if fstype in ("tmpfs", "ramfs") else ""
    where = (
        "dataset" if w.data_files else f"scratch file in {os.path.dirname(files[0])}"
    ) + f" on {fstype} ({point}){memory}"
    why = drop_cache(files)
    note = (
        f"{where}; page cache dropped per file before each pass (posix_fadvise DONTNEED)"
        if why is None
        else f"{where}; page cache NOT dropped ({why}): cached reads"
    )
    rnd = random.Random(w.seed)
    reads = RANDOM_READS[w.scale]
    picks = [
        (i, rnd.randrange(0, max(1, sizes[i] // BLOCK)) * BLOCK)
        for i in rnd.choices(range(len(files)), weights=[max(s, 1) for s in sizes], k=reads)
    ]

    def seq(reps: int) -> None:
        drop_cache(files)
        for p in files:
            with open(p, "rb", buffering=0) as f:
                while f.read(1 << 20):
                    pass

    def rand(reps: int) -> None:
        drop_cache(files)
        fds = [os.open(p, os.O_RDONLY) for p in files]
        try:
            for i, off in picks:
                os.pread(fds[i], BLOCK, off)
        finally:
            for fd in fds:
                os.close(fd)

    got = sum(min(BLOCK, sizes[i] - off) for i, off in picks)
    cleanup = (lambda: os.unlink(scratch)) if scratch else None
    seq_name = f"sequential 1 MiB reads of {total / 2**20:.1f} MiB"
    return [
        Case("disk", seq_name, "B/s", float(total), seq, headline=True, calibrate=False, note=note, cleanup=cleanup),
        Case("disk", f"random 4 KiB reads x{reads}", "B/s", float(got), rand, calibrate=False, note=note),
    ]
