"""Every name a user picks from is spelled once (dltestbed.choices): each registry holds exactly its axis's
names, and every choice of the CLI is one of those axes, its default among them and, where a metavar hides
the list, its help naming each one. A choice added to a registry, the CLI or choices.py alone fails here."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import typer

from dltestbed import choices, runtimes
from dltestbed.accept import levels
from dltestbed.cli import app
from dltestbed.errors import ConfigError
from dltestbed.orchestrate import launchers, presets, scenarios
from dltestbed.workload import frameworks, mathmode

# the CLI's option → its axis (the names it must offer, in this order)
AXES: dict[str, tuple[str, ...]] = {
    "--data": choices.DATA,
    "--mode": choices.MODES,
    "--device": choices.DEVICES,
    "--math": choices.MATHS,
    "--gpus": choices.GPUS,
    "--probe-scale": choices.PROBE_SCALES,
    "--vm-virt-type": choices.VIRT_TYPES,
    "--scenario": tuple(choices.SCENARIOS),
    "--layout": tuple(choices.LAYOUTS),
    "--cotenant": tuple(choices.COTENANTS),
    "--preset": (choices.AUTO_PRESET, *choices.PRESETS),
    "--suite": tuple(choices.SUITES),
    "--order": choices.ORDERS,
    "--launcher": tuple(choices.LAUNCHERS),
    "--runtime": choices.RUNTIMES,
    "--flavor": ("auto", *choices.FLAVORS),
    "--format": ("table", "json"),  # how a command prints (Output), or `report`'s file format below
    "--vm": ("auto", "yes", "no"),  # image build: the guest image too
}
REPORT_FORMATS = ("md", "json", "html")


def _choice_options() -> Iterator[tuple[str, Any]]:
    """(command path, option) for every option of every command that offers a fixed list of names."""
    root = typer.main.get_command(app)

    def walk(cmd: Any, path: str) -> Iterator[tuple[str, Any]]:
        for name, sub in getattr(cmd, "commands", {}).items():
            yield from walk(sub, f"{path} {name}")
        for param in cmd.params:
            if param.type_descriptor.is_choice:
                yield path, param

    yield from walk(root, "dltestbed")


def test_each_registry_holds_its_axis_names_and_no_other() -> None:
    assert tuple(runtimes.RUNTIMES) == choices.RUNTIMES
    assert tuple(presets.PRESETS) == choices.PRESETS
    assert tuple(n for n in choices.SCENARIOS if n in scenarios.REGISTRY) == tuple(choices.SCENARIOS)
    assert set(scenarios.REGISTRY) == set(choices.SCENARIOS)
    assert tuple(launchers.LAUNCHERS) == tuple(choices.LAUNCHERS)
    assert tuple(levels.LEVELS) == tuple(choices.LEVELS)
    assert all(lv.summary == choices.LEVELS[name] for name, lv in levels.LEVELS.items())
    assert all(tuple(fw.packages) == choices.FLAVORS for fw in frameworks.REGISTRY.values())
    assert tuple(frameworks.REGISTRY) == choices.FRAMEWORKS
    assert choices.PER_GPU in choices.GPUS
    assert tuple(choices.LAYOUTS) == tuple(choices.SCENARIOS)  # a layout places hosts for its scenario
    for math in choices.MATHS:  # each is one the workload applies (on a Hopper GPU: every one resolves)
        assert mathmode.resolve(math, [(9, 0)]) in choices.MATHS


def test_every_cli_choice_is_an_axis_with_its_default_and_help() -> None:
    seen = set()
    for where, param in _choice_options():
        option = max(param.opts, key=len)
        offered = tuple(param.type_descriptor.choices)
        expected = REPORT_FORMATS if where == "dltestbed report" and option == "--format" else AXES.get(option)
        assert expected is not None, f"{where} {option} offers {offered}: which axis of dltestbed.choices is it?"
        assert offered == expected, f"{where} {option}"
        if param.default is not None:
            assert param.default in offered, f"{where} {option}: default {param.default!r}"
        if param.metavar and param.help:  # the metavar hides the list: the help names every choice
            missing = [c for c in offered if c not in param.help]
            assert not missing, f"{where} {option}: its help does not name {missing}"
        seen.add(option)
    assert seen >= {"--scenario", "--runtime", "--launcher", "--preset", "--suite", "--cotenant", "--layout"}


@pytest.mark.parametrize("option", ["--scenario", "--runtime", "--launcher", "--cotenant"])
def test_an_unknown_name_is_one_line_that_lists_the_known(option: str) -> None:
    from tests.conftest import run_cli

    proc = run_cli("bench", option, "nosuch", "--dry-run")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [f"error: {option}: one of {', '.join(AXES[option])} (got 'nosuch')"]


def test_what_each_scenario_asks_of_the_launcher_and_the_gpu_checks() -> None:
    """The registered scenarios answer what the Slurm launcher, gpus and `--targets auto` read off their names."""
    from dltestbed.orchestrate import prepare
    from dltestbed.orchestrate.scenarios import Options, scenario

    assert [scenario(n).machines(None) for n in choices.SCENARIOS] == [1, 2, 1]
    assert scenario("distributed").machines(5) == 5
    assert [scenario(n).one_host for n in choices.SCENARIOS] == [False, False, True]
    pools = {c: scenario("shared").gpu_pools(Options("shared", cotenant=c)) for c in choices.COTENANTS}
    assert pools == {"alexnet": 2, "cpu": 1, "io": 2, "gpu": 2} and scenario("single").gpu_pools(Options()) == 1
    assert scenario("shared").gpu_needs(Options("shared", cotenant="gpu")) == [
        ("--cotenant gpu", "use --cotenant alexnet, cpu or io")
    ]
    assert not scenario("shared").gpu_needs(Options("shared", cotenant="alexnet"))
    for name in ("distributed", "shared"):
        assert prepare.auto_kinds(name, [None]).kinds == ("bm",)


def _docs_table(first_header: str) -> tuple[str, ...]:
    """The names in the first column of docs/reference.md's table whose header starts `| first_header |`."""
    from pathlib import Path

    lines = (Path(__file__).resolve().parents[2] / "docs" / "reference.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    names = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        names.append(line.split("|")[1].strip().split()[0].strip("`"))
    return tuple(names)


def test_the_references_tables_list_each_registry() -> None:
    """docs/reference.md's tables of presets, suites and layouts name exactly their axis's names, in order."""
    assert _docs_table("preset") == choices.PRESETS
    assert _docs_table("suite") == tuple(choices.SUITES)
    assert _docs_table("layout") == tuple(choices.LAYOUTS)


def test_a_framework_is_asked_by_name_and_an_unknown_one_is_one_line() -> None:
    """The controller asks the spec's framework for a distributed worker's environment; the worker reads its
    cluster back from that environment; an unknown name lists the known ones."""
    tf = frameworks.framework("tensorflow")
    env = tf.worker_env(["10.0.0.1:2222", "10.0.0.2:2222"], 1)
    cluster = tf.cluster(env)
    assert (cluster.workers, cluster.index) == (("10.0.0.1:2222", "10.0.0.2:2222"), 1)
    assert tf.build({"tensorflow": "2.20.0", "tensorflow_cuda_build": True}) == "TensorFlow 2.20.0 (CUDA build)"
    assert tf.ran({"tensorflow": "2.20.0"}) and not tf.ran({"host": "x"})
    with pytest.raises(ConfigError, match=r"^unknown framework 'caffe'; known: tensorflow or pytorch$"):
        frameworks.framework("caffe")
