"""The workload image's two Containerfiles: one stage where the builder binds the wheels into the installing RUN
(Podman's), cached stages where it cannot (Docker's legacy builder); the tag hashes both."""

from __future__ import annotations

from pathlib import Path

import pytest

from dltestbed.provision import containerfile
from dltestbed.provision import image as ctr_image
from dltestbed.provision.wheelhouse import Wheelhouse
from dltestbed.runtimes.base import runtime

FILLED = {"base": "b:1", "wheel": "dltestbed-1-py3-none-any.whl", "imports": "import x", "stage_label": "l"}


def _filled(template: str, inputs: str) -> list[str]:
    return template.format(inputs=inputs, **FILLED).splitlines()


def test_podman_builds_one_stage_whose_run_binds_the_wheels_and_names_their_hash() -> None:
    assert runtime("podman").build_mounts and not runtime("docker").build_mounts
    lines = _filled(containerfile.ONE_STAGE, "0123abcd")
    assert [x for x in lines if x.startswith("FROM ")] == ["FROM b:1"]
    assert not [x for x in lines if x.startswith("COPY")]  # no wheel in a layer, no venv copied
    run = lines.index(next(x for x in lines if x.startswith("RUN --mount")))
    installing = " ".join(lines[run : run + 4])
    for folder in ("deps", "more", "dltestbed"):
        assert f"--mount=type=bind,source={folder},target=/tmp/{folder}" in installing
    # buildah 1.28 reuses a cached RUN with mounts by its text alone: what is bound must change the text
    assert ": inputs 0123abcd" in installing


def test_docker_keeps_its_cached_stages() -> None:
    lines = _filled(containerfile.CONTAINERFILE, "0123abcd")
    assert len([x for x in lines if x.startswith("FROM ")]) == 4
    assert "COPY --from=install /opt/dltestbed/venv /opt/dltestbed/venv" in lines


def test_the_tag_changes_with_either_containerfile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "manifest.txt").write_text("abc123\n")
    house = Wheelhouse(tmp_path, "cpu", "abc123")
    tag = ctr_image.tag_of(house)
    assert ctr_image.tag_of(house) == tag
    monkeypatch.setattr(ctr_image, "ONE_STAGE", ctr_image.ONE_STAGE + "# another\n")
    one_stage = ctr_image.tag_of(house)
    monkeypatch.setattr(ctr_image, "CONTAINERFILE", ctr_image.CONTAINERFILE + "# another\n")
    assert len({tag, one_stage, ctr_image.tag_of(house)}) == 3
