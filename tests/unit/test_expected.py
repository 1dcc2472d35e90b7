"""The expected values per board (dltestbed/boards/*.toml): every value has a source, the H100's measured figures
(tests/data/gpu/h100) are the file's known answers, a GPU of a board with no file falls back to its peers, and a
site's file overrides values one by one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dltestbed import expected
from dltestbed.errors import ConfigError
from tests.h100data import H100_NAME, captured

GEN5_X16_GBS = 32 * 16 * 128 / 130 / 8  # 32 GT/s a lane, 128b/130b encoding: GB/s a direction


def test_every_value_has_a_source_and_every_board_a_version() -> None:
    boards = expected.shipped()
    assert {b.key for b in boards} >= {"a100-sxm4-80gb", "h100-pcie", "h100-sxm", "h100-nvl", "h200-sxm", "gh200"}
    assert {"l40s", "b200"} <= {b.key for b in boards}
    for board in boards:
        assert board.version == expected.FORMAT and board.values
        for v in board.values.values():
            assert v.source.startswith(expected.SOURCE_KINDS), (board.key, v.name)
            if v.source.startswith("measured: "):  # a named machine and its date
                assert re.search(r"\b20\d\d-\d\d-\d\d\b", v.source) and "NVIDIA " in v.source, (board.key, v.name)


@pytest.mark.parametrize(
    ("gpu", "key"),
    [
        (H100_NAME, "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H100 NVL", "h100-nvl"),
        ("NVIDIA H200", "h200-sxm"),
        ("NVIDIA GH200 480GB", "gh200"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"),
        ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA B200", "b200"),
        ("NVIDIA H200 NVL", None),  # no file: peers alone
        ("NVIDIA A100-PCIE-40GB", None),
        ("Tesla V100-SXM2-16GB", None),
    ],
)
def test_each_nvml_name_is_one_board_or_none(gpu: str, key: str | None) -> None:
    board = expected.for_gpu(gpu, expected.shipped())
    assert (board.key if board else None) == key


def test_a_board_with_no_file_is_judged_against_its_peers() -> None:
    assert expected.for_gpu("NVIDIA H200 NVL", expected.shipped()) is None
    assert expected.unknown_board("NVIDIA H200 NVL") == (
        "NVIDIA H200 NVL: no expected values for this board; judged against its peers alone"
    )
    h100 = expected.for_gpu(H100_NAME, expected.shipped())
    assert h100 is not None and h100.get("kernel_launches_per_s") is None  # a value it lacks: peers alone too
    with pytest.raises(KeyError):
        h100.get("no_such_value")


def test_the_h100s_datasheet_figures_are_the_known_answers() -> None:
    """The H100 SXM file's datasheet values are what the H100 printed; its figures from a bare burst are gone (a
    board's measured value is what dltestbed's own probe reads: tests/unit/test_boards.py)."""
    board = expected.for_gpu(H100_NAME, expected.shipped())
    assert board is not None
    got = captured()
    assert (board.values["pcie_gen"].value, board.values["pcie_width"].value) == (got["pcie_gen"], got["pcie_width"])
    assert board.values["power_limit_w"].value == got["power"]
    gib = board.values["memory_gb"].value * 1024  # "80GB" boards show 80 GiB less what the driver reserves
    assert 0.98 * gib <= got["memory_mib"] <= gib
    assert not set(board.values) & set(expected.MEASURED)


def test_a_sites_file_overrides_values_one_by_one(tmp_path: Path) -> None:
    site = tmp_path / "site.toml"
    site.write_text(
        """
[boards.h100-sxm]
version = 1
board = "H100 SXM (our racks: power capped)"
values.power_limit_w = { value = 600, source = "measured: our golden node gn01, NVIDIA H100 80GB HBM3, 2026-12-01" }

[boards.rtx6000-ada]
version = 1
board = "RTX 6000 Ada"
match = ["RTX 6000 Ada"]
values.memory_gb = { value = 48, source = "datasheet: NVIDIA RTX 6000 Ada Generation datasheet: 48 GB GDDR6" }
"""
    )
    boards = expected.with_site(expected.shipped(), site)
    h100 = expected.for_gpu(H100_NAME, boards)
    assert h100 is not None and h100.board == "H100 SXM (our racks: power capped)"
    assert h100.values["power_limit_w"].value == 600 and "gn01" in h100.values["power_limit_w"].source
    assert h100.values["memory_bandwidth_tbs"].value == pytest.approx(3.35)  # the rest as shipped
    ada = expected.for_gpu("NVIDIA RTX 6000 Ada Generation", boards)
    assert ada is not None and ada.values["memory_gb"].value == 48


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[boards.h100-sxm]\nversion = 1\nboard = "x"\nvalues.power_limit_w = { value = 600 }\n',
            r"\[boards.h100-sxm\]: power_limit_w: `source` must say where the value comes from",
        ),
        (
            '[boards.h100-sxm]\nversion = 1\nboard = "x"\n'
            'values.speed = { value = 1, source = "datasheet: somewhere, some page" }\n',
            r"unknown value 'speed'; known: pcie_gen, ",
        ),
        (
            '[boards.h100-sxm]\nversion = 2\nboard = "x"\nvalues = {}\n',
            r"version 2; this dltestbed reads board files of version 1",
        ),
        (
            '[boards.new]\nversion = 1\nboard = "x"\n'
            'values.memory_gb = { value = 1, source = "datasheet: somewhere, some page" }\n',
            r"\[boards.new\]: `match` is missing",
        ),
        ("[boards.h100-sxm\n", r"not TOML"),
        ("x = 1\n", r"no \[boards.<name>\] table"),
    ],
)
def test_a_wrong_site_file_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    site = tmp_path / "site.toml"
    site.write_text(text)
    with pytest.raises(ConfigError, match=message) as err:
        expected.with_site(expected.shipped(), site)
    assert "\n" not in str(err.value)
