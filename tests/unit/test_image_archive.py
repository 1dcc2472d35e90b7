"""The image archive's save: its uncompressed layers piped through a compressor (Docker's gzip, Podman's zstd),
each side checked."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from dltestbed.provision.image import ImageError
from dltestbed.provision.imagearchive import _piped
from dltestbed.runtimes import runtime


def test_each_runtime_saves_uncompressed_layers_to_stdout_through_its_compressor() -> None:
    docker, podman = runtime("docker"), runtime("podman")
    assert docker.save_argv("t:1", None) == ["docker", "save", "t:1"]
    assert docker.archive_compressor == ("gzip", "-1")
    assert podman.save_argv("t:1", None) == ["podman", "save", "--format", "oci-archive", "--uncompressed", "t:1"]
    assert podman.archive_compressor[0] == "zstd" and "-c" in podman.archive_compressor


@pytest.mark.parametrize(("name", "decompress"), [("docker", "gzip"), ("podman", "zstd")])
def test_a_pipe_through_a_runtimes_compressor_gives_the_bytes_back(name: str, decompress: str, tmp_path: Path) -> None:
    data = os.urandom(1 << 16) + b"\0" * (1 << 20)  # compressible, and more than a pipe's buffer
    src = tmp_path / "src"
    src.write_bytes(data)
    out = tmp_path / "out"
    _piped(["cat", str(src)], list(runtime(name).archive_compressor), out, "a save", os.environ)
    assert 0 < out.stat().st_size < len(data)
    back = subprocess.run([decompress, "-dc", str(out)], capture_output=True, check=True).stdout
    assert back == data


@pytest.mark.parametrize(
    ("first", "second", "said"),
    [
        (["sh", "-c", "echo 'no such image' >&2; exit 1"], ["gzip", "-1"], "a save failed (sh): no such image"),
        (["sh", "-c", "echo data"], ["sh", "-c", "cat >/dev/null; echo 'disk full' >&2; exit 2"], "(sh): disk full"),
        (["sh", "-c", "exit 5"], ["cat"], "a save failed (sh): exit code 5"),
    ],
)
def test_either_side_failing_is_one_line_naming_it(
    first: list[str], second: list[str], said: str, tmp_path: Path
) -> None:
    with pytest.raises(ImageError) as caught:
        _piped(first, second, tmp_path / "out", "a save", os.environ)
    assert said in str(caught.value) and "\n" not in str(caught.value)
