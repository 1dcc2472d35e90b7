"""A lab's plan: names, addresses and the CPUs a host may use, validated before anything is made."""

from __future__ import annotations

import os

import pytest

from dltestbed.errors import ConfigError
from dltestbed.lab.state import plan
from dltestbed.requests.lab import LabSpec


def test_host_cpus_by_number_or_name() -> None:
    first = min(os.sched_getaffinity(0))
    lab = plan(LabSpec(name="x", hosts=3, cpus=(("2", str(first)), ("x-h3", f"{first}-{first}"))))
    assert [h.cpus for h in lab.hosts] == [None, str(first), str(first)]
    assert [h.ip for h in lab.hosts] == ["10.213.77.11", "10.213.77.12", "10.213.77.13"]


@pytest.mark.parametrize(
    ("cpus", "message"),
    [
        ({"4": "0"}, "--host-cpus 4=0: no host '4' in a lab of 3 (give 1-3 or a name)"),
        ({"1": "0-"}, "--host-cpus 1=0-: CPU list '0-' is not like 0-3,8"),
        ({"1": "4096"}, "--host-cpus 1=4096: CPU 4096 is not one of this machine's ("),
    ],
)
def test_bad_host_cpus(cpus: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        plan(LabSpec(name="x", hosts=3, cpus=tuple(cpus.items())))
    assert str(exc.value).startswith(message)


def test_shares_are_absolute_folders_once(tmp_path) -> None:
    assert plan(LabSpec(name="x", hosts=1, shares=[str(tmp_path), str(tmp_path)])).shares == [str(tmp_path.resolve())]
    for bad in ("relative/dir", str(tmp_path / "missing")):
        with pytest.raises(ConfigError) as exc:
            plan(LabSpec(name="x", hosts=1, shares=[bad]))
        assert str(exc.value) == f"--share {bad}: not an absolute path to a folder of this machine"
