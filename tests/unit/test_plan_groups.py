"""The planner reads the request's groups: a group's field that a run's spec has reaches every spec as given, and
one not given leaves the spec's default."""

from __future__ import annotations

import pytest

from dltestbed.config import ProbeSpec, WorkloadSpec
from dltestbed.errors import ConfigError
from tests.plans import plan_of


def test_a_field_a_spec_has_reaches_every_spec_as_given() -> None:
    given = plan_of(models=["alexnet"], suite="full", probes=["membw"], sample_interval=0.25, classes=10)
    assert {type(s) for s in given.specs} == {WorkloadSpec, ProbeSpec}
    assert all(s.sample_interval == 0.25 for s in given.specs)
    assert [s.classes for s in given.specs if isinstance(s, WorkloadSpec)] == [10]
    default = plan_of(models=["alexnet"])
    assert default.specs[0].sample_interval == WorkloadSpec.model_fields["sample_interval"].default


def test_a_bad_value_is_the_specs_one_line() -> None:
    with pytest.raises(ConfigError, match=r"^--sample-interval: more than 0"):
        plan_of(models=["alexnet"], sample_interval=0)
