"""A bench's compile caches: a folder per machine and kind made on the machine (here: this one, for real), given to
the workload in its environment, mounted into a container, removed at the end; what a run's counters say."""

from __future__ import annotations

from pathlib import Path

import pytest

from dltestbed.config import ProbeSpec, WorkloadSpec
from dltestbed.errors import TargetError
from dltestbed.orchestrate import compilecache
from dltestbed.report.render.tables import compiled_cell
from dltestbed.runtimes import CONTAINER_CACHE, RUNTIMES, ContainerOptions
from dltestbed.runtimes.charliecloud import MOUNT_POINTS
from dltestbed.targets import Site, make
from dltestbed.targets.container import ContainerTarget
from dltestbed.targets.local import LocalTarget
from dltestbed.workload.frameworks.base import COMPILE_CACHE_ENV
from dltestbed.workload.frameworks.pytorch import cache_outcome, inductor_caches


def _spec(framework: str, xla: bool) -> WorkloadSpec:
    return WorkloadSpec(model="alexnet", framework=framework, xla=xla)


@pytest.mark.parametrize(
    ("counters", "word"),
    [
        ({}, None),
        ({"inductor": {"fxgraph_cache_bypass": 2}}, None),
        ({"aot_autograd": {"autograd_cache_miss": 1}, "inductor": {"fxgraph_cache_miss": 2}}, "miss"),
        ({"aot_autograd": {"autograd_cache_hit": 1}, "inductor": {"fxgraph_cache_hit": 2}}, "hit"),
        ({"inductor": {"fxgraph_cache_hit": 1}}, "hit"),
        ({"aot_autograd": {"autograd_cache_hit": 1}, "inductor": {"fxgraph_cache_miss": 1}}, "partial"),
    ],
)
def test_a_runs_counters_say_where_its_graphs_came_from(counters: dict, word: str | None) -> None:
    assert cache_outcome(counters) == word


def test_inductor_and_triton_keep_their_caches_in_the_benchs_folder_unless_the_user_chose() -> None:
    env = {COMPILE_CACHE_ENV: "/tmp/c"}
    assert inductor_caches(env) == "/tmp/c/tmp"
    assert env["TORCHINDUCTOR_CACHE_DIR"] == "/tmp/c" and env["TRITON_CACHE_DIR"] == "/tmp/c/triton"
    assert env["TMPDIR"] == "/tmp/c/tmp"  # Inductor's precompiled headers: under the temp folder, whatever else
    assert env["TORCHINDUCTOR_FX_GRAPH_CACHE"] == env["TORCHINDUCTOR_AUTOGRAD_CACHE"] == "1"
    mine = {COMPILE_CACHE_ENV: "/tmp/c", "TRITON_CACHE_DIR": "/mine", "TORCHINDUCTOR_FX_GRAPH_CACHE": "0"}
    inductor_caches(mine)
    assert mine["TRITON_CACHE_DIR"] == "/mine" and mine["TORCHINDUCTOR_FX_GRAPH_CACHE"] == "0"
    alone: dict[str, str] = {}
    assert inductor_caches(alone) is None and inductor_caches(empty := {COMPILE_CACHE_ENV: ""}) is None
    assert empty == {COMPILE_CACHE_ENV: ""}
    assert alone == {}  # no folder: PyTorch's own defaults


def test_only_a_compiled_run_of_a_framework_that_keeps_caches_wants_a_folder() -> None:
    assert compilecache.wanted([_spec("pytorch", xla=True)])
    assert not compilecache.wanted([_spec("pytorch", xla=False), _spec("tensorflow", xla=True)])
    assert not compilecache.wanted([ProbeSpec()])


def test_each_kind_gets_its_folder_on_its_machine_and_every_folder_goes_at_the_end() -> None:
    said: list[str] = []
    with compilecache.shared([Site()], ["bm", "bm"], [_spec("pytorch", xla=True)], said.append) as sites:
        folder = Path(sites[0].caches["bm"])
        assert folder.is_dir() and folder.name.startswith("dltestbed-compile.") and folder.stat().st_mode & 0o077 == 0
        target = make("bm", sites[0])
        assert target.compile_cache == str(folder)  # A and A′ (bm twice) share it: one kind
        (folder / "graph").write_text("compiled")
    assert not folder.exists()
    assert said == [
        f"torch.compile's caches shared by the runs of each machine and kind ({folder}); removed at the end"
    ]


def test_nothing_is_made_for_a_bench_that_does_not_compile() -> None:
    with compilecache.shared([Site()], ["bm"], [_spec("pytorch", xla=False)], print) as sites:
        assert sites == [Site()] and make("bm", sites[0]).compile_cache is None


def test_a_folder_that_cannot_be_made_is_one_line_and_the_runs_go_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", "/nonexistent-dltestbed-tmp")  # mktemp -t makes its folder there: it cannot
    said: list[str] = []
    with compilecache.shared([Site()], ["bm"], [_spec("pytorch", xla=True)], said.append) as sites:
        assert sites[0].caches == {}
    (line,) = said
    assert line.startswith("this machine: no compile cache for bm (`mktemp -d` failed on ")
    assert line.endswith(
        "): its compiled runs use PyTorch's own (/tmp/torchinductor_USER, which a container loses at each run)"
    )


def test_a_container_mounts_its_kinds_folder_writable_and_a_rootful_one_gives_it_to_its_user() -> None:
    runs: list[list[str]] = []

    class Host(LocalTarget):
        def run(self, argv, **options):  # type: ignore[no-untyped-def]
            runs.append(list(argv))
            return super().run(["true"], **options)

    opts = ContainerOptions(gpus=None)
    docker = ContainerTarget(Host(), RUNTIMES["docker"], "img:1", "sha256:1", opts, cache_source="/tmp/c1")
    assert docker.compile_cache == CONTAINER_CACHE and docker.writer() == "10001:10001"
    docker.run(["python", "-m", "dltestbed.workload"], env={COMPILE_CACHE_ENV: CONTAINER_CACHE})
    assert (
        f"--volume=/tmp/c1:{CONTAINER_CACHE}" in runs[0] and f"--env={COMPILE_CACHE_ENV}={CONTAINER_CACHE}" in runs[0]
    )
    rootless = ContainerTarget(Host(), RUNTIMES["podman-rootless"], "img:1", "sha256:1", opts, cache_source="/c")
    with pytest.raises(TargetError, match="runs the container as 10001:10001, a subordinate uid"):
        rootless.writer()  # keep-id keeps the CLI user's uid alone: the image's user cannot be given the folder
    as_user = ContainerTarget(
        Host(), RUNTIMES["podman-rootless"], "img:1", "sha256:1", ContainerOptions(gpus=None, user="1000:1000"),
        as_user="someone",
    )  # fmt: skip
    assert as_user.writer() is None  # the user's own uid inside: the folder's owner
    charliecloud = ContainerTarget(Host(), RUNTIMES["charliecloud"], "img", "sha256:1", opts, cache_source="/c")
    assert charliecloud.writer() is None
    assert CONTAINER_CACHE in MOUNT_POINTS  # ch-run binds only onto a folder the image has
    plain = ContainerTarget(Host(), RUNTIMES["docker"], "img:1", "sha256:1", opts)
    assert plain.compile_cache is None


def test_the_report_counts_a_groups_compiled_runs_by_where_their_graphs_came_from() -> None:
    assert compiled_cell({"miss": 1, "hit": 2}) == "1 compiled, 2 from the cache"
    assert compiled_cell({"partial": 1}) == "1 partly cached"
    assert compiled_cell({}) == "—"


def test_a_real_h200_bench_stored_its_first_compiled_run_as_a_miss_and_its_second_as_a_hit() -> None:
    """tests/data/gpu/h200/compile-cache.sqlite: gpu-check's compile-cache step (ResNet-50, the gpu preset) and its
    compile-as-user bench, whose runs failed before Triton's cache moved into the folder (nobody has no home)."""
    from dltestbed.report.stats import summarise
    from dltestbed.results.store import Store

    store = Store.open(Path(__file__).parents[1] / "data/gpu/h200/compile-cache.sqlite", read_only=True)
    try:
        runs = store.runs()
    finally:
        store.close()
    ok = [r for r in runs if r.status == "ok"]
    assert [r.compile_cache for r in ok] == ["miss", "hit"] and ok[0].fingerprint["run_as_user"] == "root"
    (group,) = summarise(ok)
    assert compiled_cell(group.compile_cache) == "1 compiled, 1 from the cache"
    failed = [r for r in runs if r.status == "failed"]
    assert failed and all("Permission denied: '/nonexistent'" in (r.reason or "") for r in failed)


def test_a_second_bare_metal_arm_keeps_its_own_folder_inside_bare_metals() -> None:
    from dltestbed.runner import SECOND_ARM, RunContext, compile_cache

    target = LocalTarget(compile_cache="/var/tmp/dltestbed-compile.abcdefgh")
    assert compile_cache(target, RunContext("b", "single", 1)) == target.compile_cache
    assert compile_cache(target, RunContext("b", "single", 1, arm="A′")) == f"{target.compile_cache}/{SECOND_ARM}"
    assert compile_cache(LocalTarget(), RunContext("b", "single", 1, arm="A′")) is None


@pytest.mark.parametrize(
    ("printed", "took"),
    [("echo 'welcome to the node'; ", True), ("echo /home/someone; ", True), ("echo /home/someone #", False)],
)
def test_only_the_folder_mktemp_made_is_taken_and_removed(
    printed: str, took: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A login shell's banner before mktemp's answer is skipped; an answer that is not a folder mktemp makes is
    refused, so nothing else is ever chowned or removed."""

    class Chatty(LocalTarget):
        def run(self, argv, **options):  # type: ignore[no-untyped-def]
            if argv[0] == "sh":  # compilecache.MKTEMP
                argv = ["sh", "-c", printed + argv[2].removeprefix("exec ")]
            return super().run(argv, **options)

    monkeypatch.setattr(compilecache, "make", lambda kind, site: Chatty())
    said: list[str] = []
    with compilecache.shared([Site()], ["bm"], [_spec("pytorch", xla=True)], said.append) as sites:
        folder = sites[0].caches.get("bm")
    assert (folder is not None) is took, said
    if folder:
        assert compilecache.FOLDER_RE.fullmatch(folder) and not Path(folder).exists()
    else:
        assert "gave no folder ('/home/someone')" in said[0], said
