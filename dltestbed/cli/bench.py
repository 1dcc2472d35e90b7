"""`dltestbed bench`: run the workloads and store every step. Options and presentation only: the bench
itself is `dltestbed.orchestrate.run_bench`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from dltestbed.choices import AUTO_PRESET, ONE
from dltestbed.cli.bench_options import (
    AaOption,
    AccountOption,
    AccuracyOption,
    AsJsonOption,
    AsUserOption,
    BaselineOption,
    BatchSizeOption,
    ClassesOption,
    ContainerCpusetOption,
    ContainerMemoryOption,
    CotenantBatchOption,
    CotenantOption,
    DataDirOption,
    DataOption,
    DataSharedOption,
    DeterministicOption,
    DeviceOption,
    DryRunOption,
    FormatOption,
    FrameworkOption,
    GpuMemoryMibOption,
    GpusOption,
    ImageSizeOption,
    InventoryOption,
    IsolateOption,
    LauncherOption,
    LimitOption,
    MathOption,
    MaxRepeatOption,
    ModelOption,
    ModeOption,
    NodesOption,
    OrderOption,
    ParallelOption,
    PartitionOption,
    PrecisionOption,
    PresetOption,
    ProbeScaleOption,
    ProbesOption,
    RepeatOption,
    ReportOption,
    ResultsOption,
    RuntimeOption,
    RunTimeoutOption,
    ScenarioOption,
    ScreenTimeOption,
    SeedOption,
    SequentialOption,
    SlurmTimeOption,
    StepsOption,
    SuiteOption,
    TargetsOption,
    TimeLimitOption,
    TimeoutOption,
    VenvOption,
    VmCpusOption,
    VmDiskOption,
    VmGpusOption,
    VmImageOption,
    VmMemoryOption,
    VmNumaNodeOption,
    VmVcpusOption,
    VmVirtTypeOption,
    WarmupOption,
    WorkersOption,
    XlaOption,
)
from dltestbed.cli.options import (
    group_opt,
    influx_bucket_opt,
    influx_org_opt,
    influx_token_opt,
    influx_url_opt,
    listed,
    wants_json,
)

if TYPE_CHECKING:  # annotations only: the command imports these when it runs (CLI start-up)
    from dltestbed.orchestrate import BenchObserver, BenchOutcome, BenchRequest


EXAMPLES = """[bold]Examples[/]

  dltestbed bench --dry-run                        list the default bench
  dltestbed bench -m alexnet --targets bm,cbm --repeat 5
  dltestbed bench --suite micro --targets bm,vm    what a layer costs, and why
  dltestbed bench --inventory hosts.yml --scenario distributed
  dltestbed bench --device gpu --preset gpu --report gpu.html

Every option in full: docs/bench.md"""


def bench(
    ctx: typer.Context,
    model: ModelOption = None,
    preset: PresetOption = AUTO_PRESET,
    suite: SuiteOption = "study",
    data: DataOption = "synthetic",
    data_dir: DataDirOption = None,
    framework: FrameworkOption = None,
    mode: ModeOption = "train",
    batch_size: BatchSizeOption = None,
    image_size: ImageSizeOption = None,
    warmup: WarmupOption = None,
    steps: StepsOption = None,
    classes: ClassesOption = 1000,
    probes: ProbesOption = None,
    probe_scale: ProbeScaleOption = None,
    screen_time: ScreenTimeOption = 60.0,
    deterministic: DeterministicOption = False,
    gpus: GpusOption = ONE,
    accuracy: AccuracyOption = False,
    targets_opt: TargetsOption = "auto",
    device: DeviceOption = "auto",
    inventory: InventoryOption = None,
    limit: LimitOption = None,
    group: list[str] | None = group_opt("Where", short=True),
    data_shared: DataSharedOption = False,
    parallel: ParallelOption = True,
    run_timeout: RunTimeoutOption = None,
    repeat: RepeatOption = "3",
    precision: PrecisionOption = 2.0,
    max_repeat: MaxRepeatOption = 20,
    aa: AaOption = False,
    order: OrderOption = "interleaved",
    seed: SeedOption = 0,
    scenario: ScenarioOption = "single",
    workers: WorkersOption = None,
    baseline: BaselineOption = True,
    cotenant: CotenantOption = "alexnet",
    cotenant_batch: CotenantBatchOption = None,
    isolate: IsolateOption = False,
    math: MathOption = None,
    xla: XlaOption = None,
    gpu_memory_mib: GpuMemoryMibOption = None,
    vm_vcpus: VmVcpusOption = None,
    vm_memory: VmMemoryOption = None,
    vm_gpus: VmGpusOption = None,
    vm_cpus: VmCpusOption = None,
    vm_numa_node: VmNumaNodeOption = None,
    vm_virt_type: VmVirtTypeOption = None,
    vm_image: VmImageOption = None,
    vm_disk: VmDiskOption = None,
    runtime: RuntimeOption = None,
    container_cpuset: ContainerCpusetOption = None,
    container_memory: ContainerMemoryOption = None,
    as_user: AsUserOption = None,
    launcher: LauncherOption = "direct",
    partition: PartitionOption = None,
    nodes: NodesOption = None,
    account: AccountOption = None,
    slurm_time: SlurmTimeOption = None,
    venv: VenvOption = None,
    results: ResultsOption = None,
    report: ReportOption = None,
    fmt: FormatOption = "table",
    dry_run: DryRunOption = False,
    influx_url: str | None = influx_url_opt(),
    influx_org: str | None = influx_org_opt(),
    influx_bucket: str | None = influx_bucket_opt(),
    influx_token_file: Path | None = influx_token_opt(),
    timeout: TimeoutOption = None,
    time_limit: TimeLimitOption = None,
    sequential: SequentialOption = False,
    as_json: AsJsonOption = False,
) -> None:
    """Run workloads on this machine's targets, or on an inventory's hosts, and store every step.

    Bare, it runs the quick preset 3 times on bm and a container (or bm twice: A/A).

    Exits 1 when a run failed: it is stored, with its reason.
    """
    outcome = run(request_of(ctx.params))
    as_json = wants_json(ctx.params["fmt"], ctx.params["as_json"])
    present(outcome, ctx.params["report"], ctx.params["results"], as_json)


def request_of(o: dict[str, Any]) -> BenchRequest:
    """The bench the options ask for (their names: `bench`'s parameters)."""
    from dltestbed import orchestrate as orch
    from dltestbed.cli.runs import check_out
    from dltestbed.orchestrate.request import SlurmOptions
    from dltestbed.orchestrate.scenarios import Options
    from dltestbed.results import influx

    stream = influx.settings(o["influx_url"], o["influx_org"], o["influx_bucket"], o["influx_token_file"])
    if o["report"] is not None:
        check_out(o["report"])
    workloads = orch.Workloads(
        models=tuple(o["model"] or ()),
        frameworks=listed(o["framework"], "--framework") or (),
        preset=o["preset"],
        suite=o["suite"],
        probes=listed(o["probes"], "--probes"),
        probe_scale=o["probe_scale"],
        data=o["data"],
        data_dir=o["data_dir"],
        data_shared=o["data_shared"],
        mode=o["mode"],
        device=o["device"],
        math=o["math"],
        xla=o["xla"],
        gpu_memory_mib=o["gpu_memory_mib"],
        batch_size=o["batch_size"],
        image_size=o["image_size"],
        warmup=o["warmup"],
        steps=o["steps"],
        classes=o["classes"],
        deterministic=o["deterministic"],
        gpus=o["gpus"],
        screen_seconds=o["screen_time"],
        accuracy=o["accuracy"],
    )
    reps = orch.Repetitions(
        repeat=o["repeat"],
        precision=o["precision"],
        max_repeat=o["max_repeat"],
        aa=o["aa"],
        order=o["order"],
        seed=o["seed"],
    )
    scenario = Options(
        scenario=o["scenario"],
        workers=o["workers"],
        baseline=o["baseline"],
        cotenant=o["cotenant"],
        cotenant_batch=o["cotenant_batch"],
        isolate=o["isolate"],
        parallel=o["parallel"] and not o["sequential"],
        timeout=o["run_timeout"] if o["run_timeout"] is not None else o["timeout"],
    )
    vm = {
        "vcpus": o["vm_vcpus"],
        "memory_mib": _vm_memory(o["vm_memory"]),
        "gpus": o["vm_gpus"],
        "cpus": o["vm_cpus"],
        "numa_node": o["vm_numa_node"],
        "virt_type": o["vm_virt_type"],
        "image": o["vm_image"],
        "disk_gib": o["vm_disk"],
    }
    machines = orch.Machines(
        targets=listed(o["targets_opt"], "--targets") or (),
        inventory=o["inventory"],
        limit=o["limit"],
        groups=tuple(o["group"] or ()),
        launcher=o["launcher"],
        slurm=SlurmOptions(o["partition"], o["nodes"], o["account"], o["slurm_time"] or o["time_limit"], o["venv"]),
        runtime=o["runtime"],
        container_cpuset=o["container_cpuset"],
        container_memory=o["container_memory"],
        as_user=o["as_user"],
        vm=vm,
    )
    return orch.BenchRequest(workloads, reps, scenario, machines, o["results"], stream, o["dry_run"])


def run(request: BenchRequest) -> BenchOutcome:
    """Run the bench with progress bars on stderr; Ctrl-C is exit 130, said in one line."""
    from dltestbed import orchestrate as orch

    return run_observed(lambda observer: orch.run_bench(request, observer))


T = TypeVar("T")


def run_observed(call: Callable[[BenchObserver], T]) -> T:
    """A library call with progress bars on stderr; Ctrl-C (BenchInterrupted) is exit 130, said in one line."""
    from rich.console import Console

    from dltestbed import orchestrate as orch
    from dltestbed.cli.progress import RichObserver

    with RichObserver(Console(stderr=True, soft_wrap=True, highlight=False)) as observer:
        try:
            return call(observer)
        except orch.BenchInterrupted as exc:
            observer.say(str(exc))
            raise typer.Exit(130) from None


def present(outcome: BenchOutcome, report: Path | None, results: Path | None, as_json: bool) -> None:
    """--dry-run's list on stdout; else the bench's closing notes, its summary and report line on stderr,
    its runs as JSON on stdout (--format json); exit 1 naming the first failed run."""
    from dltestbed.errors import WorkloadError

    if outcome.planned:
        print("\n".join(outcome.planned))
        return
    for note in outcome.notes:
        typer.echo(note, err=True)
    if report is not None:
        typer.echo(_report(outcome.bench_id, report, results), err=True)
    typer.echo(summary(outcome, results), err=True)
    if as_json:
        print(json.dumps([r.to_dict() for r in outcome.records], indent=2))
    if outcome.failed:
        first = outcome.failed[0]
        raise WorkloadError(
            f"{len(outcome.failed)} of {len(outcome.records)} run(s) failed; first: {first.model} rep "
            f"{first.repetition}: {first.reason} (log: {first.log_path})"
        )


def summary(outcome: BenchOutcome, results: Path | None) -> str:
    """The bench's last line: its runs, how they ended, how long they took, and what to run next."""
    from dltestbed.cli.progress import duration
    from dltestbed.results.ids import short

    runs = [r for r in outcome.records if r.measured]
    ok = sum(r.status == "ok" for r in runs)
    took = sum(r.elapsed_seconds or 0.0 for r in runs)
    where = f" --results {results}" if results is not None else ""
    return (
        f"bench {short(outcome.bench_id)}: {len(runs)} run(s), {ok} ok, {len(runs) - ok} failed, "
        f"{duration(took)} of runs; next: dltestbed report --bench {short(outcome.bench_id)}{where}"
    )


def _vm_memory(text: str | None) -> int | None:
    """--vm-memory in MiB: a size with its unit; a bare number (the old MiB) still works, with a warning."""
    from dltestbed.cli import deprecated
    from dltestbed.sizes import mib

    if text is None:
        return None
    if text.strip().isdigit():
        deprecated.warn(f"--vm-memory {text} (MiB without a unit)", f"--vm-memory {text}m")
    return mib(text, "--vm-memory")


def _report(bench_id: str, out: Path, results: Path | None) -> str:
    """Write this bench's report to `out` (the format its suffix names); the line that says where."""
    from dltestbed.cli.runs import format_for, write_report
    from dltestbed.report.compose import Options
    from dltestbed.results.store import Store

    store = Store.open(results, read_only=True)
    try:
        records = store.runs(bench_id=bench_id)
        return write_report(store, records, f"bench {bench_id}", Options(format_for(out, None)), out, "--report")[1]
    finally:
        store.close()
