"""WorkloadSpec validation (one-line messages) and its round trip through the workload's parser."""

from __future__ import annotations

import pytest

from dltestbed.catalog import MODELS
from dltestbed.config import spec_json, workload_spec
from dltestbed.errors import ConfigError
from dltestbed.workload.args import parse


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"model": "vgg16"}, "unknown model 'vgg16'; known: inception3, resnet50, alexnet"),
        ({"model": "alexnet", "steps": 0}, "--steps: more than 0 (got 0)"),
        ({"model": "alexnet", "warmup": -1}, "--warmup: at least 0"),
        ({"model": "alexnet", "batch_size": 0}, "--batch-size: at least 1"),
        ({"model": "inception3", "image_size": 64}, "image size 64 is below inception3's minimum of 75 px"),
        ({"model": "alexnet", "data": "real"}, "--data real needs --data-dir DIR"),
        ({"model": "alexnet", "data_dir": "/x"}, "--data-dir is only used with --data real"),
        ({"model": "alexnet", "mode": "fit"}, "--mode: Input should be 'train' or 'infer'"),
    ],
)
def test_bad_specs_name_the_problem(values: dict, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        workload_spec(**values)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("model", list(MODELS))
def test_native_size_is_the_default(model: str) -> None:
    assert workload_spec(model=model).size == MODELS[model].native_size


def test_argv_round_trips_through_the_workload_parser() -> None:
    spec = workload_spec(
        model="resnet50",
        data="real",
        data_dir="/data",
        mode="infer",
        device="cpu",
        batch_size=4,
        image_size=96,
        warmup=2,
        steps=7,
        classes=5,
        sample_interval=0.25,
        seed=3,
    )
    again, ns = parse(["--spec", spec_json(spec)])
    assert again == spec and ns.watch_stdin is False
    assert parse(["--spec", spec_json(spec), "--watch-stdin"])[1].watch_stdin is True
