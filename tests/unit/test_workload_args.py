"""The workload's command line: the spec as JSON (the object itself, a file or stdin), validated by the model the
controller built it from, and nothing of the spec parsed from argv."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from dltestbed.config import ProbeSpec, RunSpec, WorkloadSpec, load_spec, probe_spec, spec_json, workload_spec
from dltestbed.errors import ConfigError
from dltestbed.runner import workload_argv
from dltestbed.workload import args


def test_a_spec_goes_to_the_workload_and_back_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    specs = [
        workload_spec(model="alexnet"),
        workload_spec(model="resnet50", math="tf32", device="gpu", warmup=0, cpus="0-3,8", sample_interval=0.25),
        workload_spec(model="inception3", data="real", data_dir="/d", data_digest="ab", data_files=3, data_bytes=9),
        probe_spec(probes=("net", "allreduce"), distributed=True, framework="pytorch"),
        probe_spec(probes=("gemm", "conv"), screen_seconds=2.5, gpu="GPU-0a1b", gpu_index=3, device="gpu"),
    ]
    for spec in specs:
        text = spec_json(spec)
        assert "\n" not in text and json.loads(text)["model"] == spec.model  # its kind travels with it
        assert load_spec(text) == spec and type(load_spec(text)) is type(spec)
        file = tmp_path / "spec.json"
        file.write_text(text)
        assert args.parse(["--spec", str(file)])[0] == spec
        monkeypatch.setattr(sys, "stdin", io.StringIO(text))
        assert args.parse(["--spec", "-"])[0] == spec
    assert json.loads(spec_json(specs[0])) == {"model": "alexnet"}  # the defaults are the workload's own


def test_the_controller_sends_the_spec_alone(tmp_path: Path) -> None:
    class Target:
        python = "/venv/bin/python"

    spec = workload_spec(model="alexnet", steps=5, cpus="0-1")
    argv = workload_argv(Target(), spec)  # type: ignore[arg-type]
    assert argv == ["/venv/bin/python", "-m", "dltestbed.workload", "--spec", spec_json(spec), "--watch-stdin"]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--spec", "{not json"], "--spec: not JSON: Expecting property name"),
        (["--spec", "/no/such/spec.json"], "--spec /no/such/spec.json: cannot read it (No such file or directory)"),
        (["--spec", '{"steps": 3}'], "--model: required"),
        (["--spec", '{"model": "alexnet", "step": 3}'], "--step: Extra inputs are not permitted (got 3)"),
        (["--spec", '{"model": "vgg"}'], "--model: unknown model 'vgg'"),
        (["--spec", '{"model": "micro", "probes": ["gemm"], "batch_size": 8}'], "--batch-size: Input should be 0"),
        (["--spec", '{"model": "alexnet", "gpus": "per-gpu"}'], "--gpus: Input should be 'one' or 'node'"),
        (["--spec", "-", "--watch-stdin"], "--spec - reads stdin, which --watch-stdin watches"),
        ([], "--spec SPEC is required"),
        (["--model", "alexnet"], "unrecognized arguments: --model alexnet"),  # no field is an option of its own
    ],
)
def test_a_bad_spec_is_one_line(argv: list[str], said: str) -> None:
    with pytest.raises(ConfigError) as err:
        args.parse(argv)
    assert str(err.value).startswith(said) and "\n" not in str(err.value)


def test_help_lists_every_described_field_from_the_model_and_schema_prints_it() -> None:
    text = args.parser().format_help()
    for kind in (RunSpec, WorkloadSpec, ProbeSpec):
        for name, info in kind.model_fields.items():
            if info.description:
                assert f"  {name:<16} {info.description}" in text
    assert sorted(a.dest for a in args.parser()._actions) == ["help", "schema", "spec", "watch_stdin"]
    proc = subprocess.run(
        [sys.executable, "-m", "dltestbed.workload", "--schema"], capture_output=True, text=True, timeout=60
    )
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0 and doc["run"]["required"] == ["model"]
    assert doc["micro"]["properties"]["probes"]["description"].startswith("of: gemm, conv")


def test_the_workload_says_a_bad_spec_as_an_event_and_exits_2() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dltestbed.workload", "--spec", '{"model": "alexnet", "steps": 0}'],
        capture_output=True,
        text=True,
        timeout=60,
    )
    (event,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 2 and event["event"] == "error" and event["kind"] == "config"
    assert event["message"] == "--steps: more than 0 (got 0)" and not proc.stderr
