"""`bench --dry-run`'s words: the size a run uses (never "Nonepx"), the shared scenario's co-tenant, and the
screen, which runs once per bench and target (repetition 1), not once per repetition."""

from __future__ import annotations

from pathlib import Path

from dltestbed.orchestrate import planning, preview, running
from dltestbed.orchestrate.scenarios import Options
from tests.conftest import run_cli
from tests.plans import plan_of


def test_the_gpu_presets_native_sizes_are_printed(results: Path) -> None:
    proc = run_cli(
        "bench", "--dry-run", "--preset", "gpu", "--targets", "bm", "--repeat", "1", "--results", str(results)
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "rep 1  bm   alexnet train synthetic 224px bs512 auto+200 steps mixed",
        "rep 1  bm   resnet50 train synthetic 224px bs256 auto+200 steps mixed",
        "rep 1  bm   inception3 train synthetic 299px bs256 auto+200 steps mixed",
        "3 run(s); none was run (--dry-run)",
    ]
    assert not results.exists()


def test_the_shared_scenario_names_its_co_tenant_without_an_article() -> None:
    plan = plan_of(models=["resnet50"], repeat=2)
    for cotenant in ("alexnet", "io", "cpu", "gpu"):
        options = Options("shared", cotenant=cotenant)
        assert preview.scope(options, [None]) == f" (alone, then beside co-tenant {cotenant})"
    lines = preview.lines(plan, ["bm"], Options("shared", cotenant="alexnet"), [None])
    head = "rep 1  bm   resnet50 train synthetic 64px bs8 auto+20 steps float32"
    assert lines[0] == f"{head} (alone, then beside co-tenant alexnet)"
    assert lines[-1] == "4 run(s); none was run (--dry-run)"


def test_the_screen_runs_once_per_bench_and_target() -> None:
    """--screen-time 300 with --repeat 3: each GPU screened 5 minutes per target, not 15; the deterministic
    training beside it runs every repetition (rep 2 and 3 are compared with rep 1 bit for bit)."""
    plan = plan_of(suite="screen", repeat=3, screen_seconds=300.0)
    got = [(rep, "screen" if planning.is_screen(spec) else spec.model) for rep, spec in plan.runs()]
    assert got == [(1, "alexnet"), (1, "screen"), (2, "alexnet"), (3, "alexnet")]
    rounds = plan.rounds(["bm", "cbm"])
    assert [len(r) for r in rounds] == [4, 2, 2]
    assert preview.count(plan, ["bm", "cbm"], Options(), [None]) == 8
    lines = preview.lines(plan, ["bm", "cbm"], Options(), [None])
    screens = [line for line in lines if "screen" in line]
    assert screens == [
        "rep 1  bm   screen gemm,conv for 300 s per GPU (once per bench)",
        "rep 1  cbm  screen gemm,conv for 300 s per GPU (once per bench)",
    ]
    assert lines[-1] == "8 run(s); none was run (--dry-run)"
    shuffled = plan_of(suite="screen", repeat=3, order="random", seed=4)
    assert sorted(rep for r in shuffled.rounds(["bm"]) for rep, _, _ in r) == [1, 1, 2, 3]


def test_the_announcement_says_the_screen_runs_once() -> None:
    plan = plan_of(suite="screen", repeat=3)

    class T:
        kind, name, host = "bm", "local", "local"

    from dltestbed.targets import Site

    line = running.announce(plan, Options(), [[T()]], [Site()])  # type: ignore[list-item]
    assert "2 workload(s) × 3 repetition(s) (the screen in repetition 1 only) × 1 kind(s) = 4 run(s)" in line
    shared = running.announce(plan_of(models=["alexnet"]), Options("shared"), [[T()]], [Site()])  # type: ignore[list-item]
    assert "each alone and beside co-tenant alexnet, on bm:local" in shared


def test_screen_dry_run_and_help_say_once(results: Path) -> None:
    proc = run_cli(
        "bench", "--dry-run", "--suite", "screen", "--screen-time", "300", "--targets", "bm", "--results", str(results)
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines.count("rep 1  bm   screen gemm,conv for 300 s per GPU (once per bench)") == 1
    assert lines[-1] == "4 run(s); none was run (--dry-run)"
    text = run_cli("bench", "--help", env={"COLUMNS": "200"}).stdout
    assert "screen: seconds per GPU, once (60)." in text
