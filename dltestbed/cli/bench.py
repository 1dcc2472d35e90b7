"""`dltestbed bench`: run the workloads and store every step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from dltestbed.cli.options import (
    RESULTS_HELP,
    CotenantOpt,
    DataOpt,
    DeviceOpt,
    LauncherOpt,
    MathOpt,
    ModeOpt,
    OrderOpt,
    PresetOpt,
    ScenarioOpt,
    group_opt,
    influx_bucket_opt,
    influx_org_opt,
    influx_token_opt,
    influx_url_opt,
)

if TYPE_CHECKING:  # annotations only: the command imports these when it runs (CLI start-up)
    from rich.console import Console

    from dltestbed.bench import Plan
    from dltestbed.cli.slurmlaunch import SlurmOptions
    from dltestbed.inventory import Host, Inventory
    from dltestbed.results.influx import Settings as InfluxSettings
    from dltestbed.results.records import RunRecord
    from dltestbed.results.store import Store
    from dltestbed.scenarios import Options
    from dltestbed.slurm import Allocation
    from dltestbed.targets import ContainerImage, Site, Target


def bench(
    model: list[str] | None = typer.Option(
        None,
        "--model",
        "-m",
        help="Model: alexnet, resnet50 or inception3. Repeatable. Default: the preset's.",
    ),
    preset: PresetOpt = typer.Option(
        PresetOpt.auto,
        help="Defaults for what is not given: quick (alexnet and resnet50, small sizes, 2+20 steps), study "
        "(the published protocol: native sizes, batch 32, float32, 10+100 steps) or gpu (native sizes, batch 256 "
        "(alexnet 512), mixed precision with XLA, 50+200 steps). auto: gpu where this machine's TensorFlow has a "
        "GPU (said on the first line), else quick.",
    ),
    data: DataOpt = typer.Option(
        DataOpt.synthetic, help="synthetic (in memory, no I/O) or real (JPEGs from --data-dir)."
    ),
    data_dir: Path | None = typer.Option(
        None,
        help="ImageNet-style folder DIR/<class>/*.jpg (see `dltestbed data make`). Digested once (files, "
        "bytes, content; cached while no file changes); bm reads it, cbm gets it mounted read-only, VMs and "
        "inventory hosts get a copy named by the digest, made once and kept (cvm mounts the VM's). Every run "
        "records the digest; the report never compares runs on different data.",
    ),
    data_shared: bool = typer.Option(
        False,
        "--data-shared",
        help="With --inventory: --data-dir is the same folder on every host (NFS): read "
        "there, checked to hold the same files and bytes, not copied (VMs still get a copy).",
    ),
    suite: str = typer.Option(
        "study",
        help="study: the models (the preset's, or --model). micro: the "
        "microbenchmarks (--probes), one run per target and repetition (with --scenario "
        "distributed: one job, net and allreduce between its workers), to explain a layer's "
        "cost (compute, memory, disk, host↔device, network). full: both; the report puts the "
        "probes' changes beside the models' overheads.",
    ),
    probes: str | None = typer.Option(
        None,
        help="With --suite micro or full: comma-separated. On each target "
        "(--scenario single): gemm (matmul FLOP/s), conv (the models' heaviest "
        "convolutions), membw (memory copy), h2d and d2h (GPU copies; skipped without a "
        "GPU), disk (reads of --data-dir, or a scratch file). Between the workers of a "
        "job (--scenario distributed): net (latency, bandwidth through TensorFlow's "
        "gRPC collectives), allreduce (algorithm and bus bandwidth over message sizes). "
        "Default: all of the scenario's.",
    ),
    probe_scale: str = typer.Option(
        "small",
        help="With --suite micro or full: small (seconds a probe) or full (the models' native shapes, larger copies).",
    ),
    mode: ModeOpt = typer.Option(ModeOpt.train, help="train or infer."),
    device: DeviceOpt = typer.Option(DeviceOpt.auto, help="auto, cpu (hides the GPUs) or gpu (fails without one)."),
    math: MathOpt | None = typer.Option(
        None,
        help="The models' arithmetic: float32 (TF32 off), tf32 (float32 "
        "matmuls and convolutions on Ampere-or-later tensor cores: TensorFlow's own "
        "default there), mixed_bfloat16, mixed_float16 (loss-scaled), or mixed "
        "(bfloat16 where the device has it, else float16). Recorded with every run; "
        "the report never compares runs of different math. Default: the preset's "
        "(float32; gpu: mixed).",
        rich_help_panel="GPU",
    ),
    xla: bool | None = typer.Option(
        None,
        "--xla/--no-xla",
        help="Compile the models' step with XLA. Default: the preset's (gpu: on).",
        rich_help_panel="GPU",
    ),
    gpu_memory_mib: int | None = typer.Option(
        None,
        help="A fixed GPU memory limit per process in MiB (a slice "
        "of the GPU). Default: each run's memory grows as it needs (never the "
        "whole GPU at start, so a co-tenant or a second worker fits).",
        rich_help_panel="GPU",
    ),
    batch_size: int | None = typer.Option(None, help="Images per step. Default: the preset's."),
    image_size: int | None = typer.Option(None, help="Input size in px, for every model. Default: the preset's."),
    warmup: int | None = typer.Option(None, help="Untimed steps before the timed ones. Default: the preset's."),
    steps: int | None = typer.Option(None, help="Timed steps. Default: the preset's."),
    classes: int = typer.Option(1000, help="Classes of the model's output (real data: the folder's)."),
    repeat: str = typer.Option(
        "3",
        help="Repetitions of every run (rep 1 of every model and kind, then rep 2 ...; "
        "3 is the fewest that gives an overhead a useful interval), "
        "or auto: add repetitions until every overhead's 95 % interval is within "
        "±--precision % (at most --max-repeat).",
    ),
    precision: float = typer.Option(2.0, help="With --repeat auto: the overheads' 95 % half-width to reach, in %."),
    max_repeat: int = typer.Option(20, help="With --repeat auto: stop here even if the precision is not reached."),
    aa: bool = typer.Option(
        False,
        "--aa",
        help="Run bare metal twice per repetition, as A and A′: the report's "
        "A/A interval (it must contain 0) is the noise floor, with the run-to-run variation "
        "and the smallest effect these repetitions detect.",
    ),
    order: OrderOpt = typer.Option(
        OrderOpt.interleaved,
        help="Within a repetition: interleaved (every model on every kind in turn) or random (shuffled, --seed).",
    ),
    seed: int = typer.Option(0, help="Seed for --order random (each repetition shuffled from it)."),
    scenario: ScenarioOpt = typer.Option(
        ScenarioOpt.single,
        help="single: each target alone. distributed: one training job over several workers per kind "
        "(MultiWorkerMirroredStrategy; total throughput = sum of the workers'). shared: the foreground alone, "
        "then with a co-tenant on the same host.",
    ),
    workers: int | None = typer.Option(
        None, help="distributed: workers per job (default: one per inventory host; on this machine: 2)."
    ),
    baseline: bool = typer.Option(
        True, "--baseline/--no-baseline", help="distributed: also run one worker alone per job (scaling efficiency)."
    ),
    cotenant: CotenantOpt = typer.Option(
        CotenantOpt.alexnet,
        help="shared: the co-tenant — alexnet (training, large batch), cpu (GPUs hidden), io (real data from "
        "--data-dir) or gpu.",
    ),
    cotenant_batch: int | None = typer.Option(
        None, help="shared: the co-tenant's batch (default: 512 on a host with a GPU, as in the study; else 64)."
    ),
    isolate: bool = typer.Option(
        False, help="shared: pin the foreground and the co-tenant to disjoint halves of the host's CPUs."
    ),
    timeout: float | None = typer.Option(None, help="Seconds after which a run is stopped and stored as failed."),
    targets_opt: str = typer.Option(
        "auto",
        "--targets",
        help="Target kinds, comma-separated: auto (default: on this machine, bm and cbm when "
        "Docker or Podman holds this build's image, else bm twice as A/A; with --inventory or another scenario, "
        "bm), bm (bare metal), cbm (a container on it), vm (a "
        "libvirt VM on the host — this machine, or with --inventory each host also in libvirt_hosts — started "
        "when needed and kept for the next bench; `dltestbed teardown` removes it), cvm (a container in that VM).",
    ),
    vm_vcpus: int | None = typer.Option(
        None, help="vm/cvm: the VM's vCPUs (default 2, or the host's dltestbed_vm_vcpus).", rich_help_panel="VM"
    ),
    vm_memory: int | None = typer.Option(
        None, help="vm/cvm: the VM's memory in MiB (default 3072, or dltestbed_vm_memory_mib).", rich_help_panel="VM"
    ),
    vm_gpus: str | None = typer.Option(
        None,
        help="vm/cvm: GPUs to pass through: all, a count, or PCI addresses (checked before anything is "
        "created: IOMMU, vfio-pci, NUMA).",
        rich_help_panel="VM",
    ),
    vm_cpus: str | None = typer.Option(
        None,
        help="vm/cvm: host CPUs to pin the vCPUs to, e.g. 0-3 (one each when the counts match).",
        rich_help_panel="VM",
    ),
    vm_numa_node: int | None = typer.Option(
        None,
        help="vm/cvm: take the VM's memory from this host NUMA node only (put the GPU's node here).",
        rich_help_panel="VM",
    ),
    vm_virt_type: str | None = typer.Option(
        None, help="vm/cvm: kvm or qemu (default: detected; qemu = TCG emulation).", rich_help_panel="VM"
    ),
    vm_image: str | None = typer.Option(
        None,
        help="vm: boot your own qcow2 or raw cloud image instead of dltestbed's guest image (cloud-init "
        "gets the VM's key, host key and address; the workload is installed in it when missing; no cvm).",
        rich_help_panel="VM",
    ),
    vm_disk: int | None = typer.Option(
        None,
        help="vm/cvm: the VM's disk in GiB, at least (default: the image's size; 20 for your own image).",
        rich_help_panel="VM",
    ),
    influx_url: str | None = influx_url_opt(),
    influx_org: str | None = influx_org_opt(),
    influx_bucket: str | None = influx_bucket_opt(),
    influx_token_file: Path | None = influx_token_opt(),
    runtime: str | None = typer.Option(
        None,
        help="Container runtime for cbm: docker or podman (default: docker if its daemon answers, else podman).",
        rich_help_panel="Container",
    ),
    container_cpuset: str | None = typer.Option(
        None,
        help="cbm: run the container on these CPUs only, e.g. 0 or 0-3 (over the inventory's "
        "dltestbed_container_cpuset); the report lists it beside the overhead.",
        rich_help_panel="Container",
    ),
    container_memory: str | None = typer.Option(
        None,
        help="cbm: the container's memory limit, e.g. 4g (over dltestbed_container_memory).",
        rich_help_panel="Container",
    ),
    inventory: Path | None = typer.Option(
        None, help="Ansible inventory: run on its bare_metal hosts over SSH (after `dltestbed provision`)."
    ),
    limit: str | None = typer.Option(None, help="With --inventory: only these hosts or groups (Ansible pattern)."),
    group: list[str] | None = group_opt(),
    launcher: LauncherOpt = typer.Option(
        LauncherOpt.direct,
        help="direct: this machine, or the inventory's hosts over SSH. slurm: this machine is a "
        "Slurm submit host; the bench holds one allocation of whole nodes (salloc --exclusive, given back when it "
        "ends, Ctrl-C or kill included) and runs each workload as an srun step on a node, stored under the node's "
        "name (bm; the workload installed on the nodes, see --venv).",
        rich_help_panel="Slurm",
    ),
    partition: str | None = typer.Option(
        None,
        help="slurm: the partition (default: the --inventory's "
        "dltestbed_slurm_partition, else Slurm's, or $SALLOC_PARTITION).",
        rich_help_panel="Slurm",
    ),
    nodes: int | None = typer.Option(
        None,
        help="slurm: nodes to allocate (default: --workers or 2 with --scenario "
        "distributed, else 1); the runs of --scenario single go to every node at once.",
        rich_help_panel="Slurm",
    ),
    account: str | None = typer.Option(
        None,
        help="slurm: the account to charge (default: the --inventory's dltestbed_slurm_account).",
        rich_help_panel="Slurm",
    ),
    time_limit: str | None = typer.Option(
        None,
        "--time",
        help="slurm: the allocation's time limit, in Slurm's "
        "format (30, 1:30:00; default: the --inventory's dltestbed_slurm_time); a "
        "run the limit ends is stored failed, with its steps and Slurm's reason.",
        rich_help_panel="Slurm",
    ),
    venv: str | None = typer.Option(
        None,
        help="slurm: dltestbed's venv on the nodes, e.g. on a shared filesystem "
        "(default: the --inventory host's dltestbed_venv of that name, else "
        "/opt/dltestbed/venv, where `provision` installs it).",
        rich_help_panel="Slurm",
    ),
    parallel: bool = typer.Option(
        True, "--parallel/--sequential", help="With several hosts: run them at once (default) or one by one."
    ),
    results: Path | None = typer.Option(None, help=RESULTS_HELP),
    report: Path | None = typer.Option(
        None,
        "--report",
        help="When the bench ends (failed runs included), write "
        "its report here and say where: .html (one page with the figures), .json, "
        "or Markdown (its figures in NAME_files/ beside it).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the runs' summaries as JSON on stdout."),
) -> None:
    """Run workloads on this machine's targets, or over SSH on an inventory's hosts, and store every step.

    Run bare, it runs the quick preset, 3 repetitions, on --targets auto (bare metal and a container, or
    bare metal twice as A/A), and says so.

    Progress goes to stderr; with --json, stdout holds only the JSON array of runs.

    Exits 1 when any run failed (the run is stored as failed, with its reason and its steps).
    """
    from rich.console import Console

    from dltestbed import bench as bench_mod
    from dltestbed import prepare, scenarios
    from dltestbed.cli import slurmlaunch
    from dltestbed.cli.runs import check_out
    from dltestbed.errors import ConfigError, WorkloadError
    from dltestbed.results.store import Store
    from dltestbed.targets import KINDS, make

    _raise_fd_limit()
    # 1. cheap: options, inventory, scenario, images present, the time-series server and its token
    preset_name = preset.value
    if preset_name == bench_mod.AUTO_PRESET:
        here = inventory is None and launcher == LauncherOpt.direct
        gpus = ([] if device == DeviceOpt.cpu else _local_tf_gpus()) if here else None
        preset_name, why = bench_mod.auto_preset(gpus)
        typer.echo(why, err=True)
    plan = bench_mod.plan(
        models=model,
        preset_name=preset_name,
        repeat=repeat,
        math=math.value if math else None,
        xla=xla,
        gpu_memory_mib=gpu_memory_mib,
        image_size=image_size,
        batch_size=batch_size,
        warmup=warmup,
        steps=steps,
        data_dir=str(data_dir) if data_dir else None,
        data=data.value,
        mode=mode.value,
        device=device.value,
        classes=classes,
        order=order.value,
        seed=seed,
        precision=precision,
        max_repeat=max_repeat,
        aa=aa,
        suite=suite,
        probe_scale=probe_scale,
        scenario=scenario.value,
        probes=[p.strip() for p in probes.split(",") if p.strip()] if probes is not None else None,
    )
    options = scenarios.Options(
        scenario=scenario.value,
        workers=workers,
        baseline=baseline,
        cotenant=cotenant.value,
        cotenant_batch=cotenant_batch,
        isolate=isolate,
        parallel=parallel,
        timeout=timeout,
    )
    stream = _stream_settings(influx_url, influx_org, influx_bucket, influx_token_file)
    if report is not None:
        check_out(report)
    kinds = [k.strip() for k in targets_opt.split(",") if k.strip()]
    slurm_opts = slurmlaunch.SlurmOptions(partition, nodes, account, time_limit, venv)
    slurm_nodes = slurmlaunch.check(
        slurm_opts,
        launcher == LauncherOpt.slurm,
        scenario.value,
        workers,
        kinds,
        data.value == "real",
        data_shared,
        limit,
        inventory,
    )
    hosts = _hosts(inventory, limit, group or []) if slurm_nodes is None else [None] * slurm_nodes
    if kinds == ["auto"] and slurm_nodes is not None:
        kinds = ["bm"]
        typer.echo("--launcher slurm: bare metal (bm) on the nodes Slurm gives", err=True)
    elif kinds == ["auto"]:
        auto = prepare.auto_kinds(scenario.value, hosts, runtime)
        kinds, plan.aa, runtime = list(auto.kinds), plan.aa or auto.aa, runtime or auto.runtime
        typer.echo(auto.why, err=True)
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise ConfigError(f"--targets: unknown kind {(unknown or [''])[0]!r}; known: auto, {', '.join(KINDS)}")
    if plan.aa:
        kinds = ["bm", *[k for k in kinds if k != "bm"], "bm"]  # A first, its A′ last in every repetition
    scenarios.check(options, hosts, plan, kinds)
    vm_overrides = dict(
        vcpus=vm_vcpus,
        memory_mib=vm_memory,
        gpus=vm_gpus,
        cpus=vm_cpus,
        numa_node=vm_numa_node,
        virt_type=vm_virt_type,
        image=vm_image,
        disk_gib=vm_disk,
    )
    from dltestbed.dataplace import Dataset

    if data_shared and data.value != "real":
        raise ConfigError("--data-shared goes with --data real --data-dir DIR")
    limits = {"cpuset": container_cpuset, "memory": container_memory}
    setup = prepare.Setup(
        tuple(kinds), tuple(hosts), runtime, vm_overrides, limits, Dataset.of(plan.specs[0], data_shared), inventory
    )
    checked = prepare.check(setup) if slurm_nodes is None else None
    nodes_inv = slurmlaunch.load(inventory, group or []) if slurm_nodes is not None else None
    if nodes_inv is not None:
        slurm_opts = slurmlaunch.from_inventory(slurm_opts, nodes_inv)
    images: dict[str, ContainerImage | None] = {}  # Slurm's cbm: each container host's image, by name
    if nodes_inv is not None and "cbm" in kinds:
        ready = prepare.check(
            prepare.Setup(("cbm",), tuple(slurmlaunch.container_hosts(nodes_inv)), runtime, {}, limits, None, inventory)
        )
        images = {s.host.name: s.container for s in ready.sites if s.host is not None}
    if stream is not None:
        from dltestbed.results import influx

        influx.check(stream)
    Store.open(results).close()  # a store that cannot be written: one line before any VM starts or run begins
    # 2. expensive: VMs made or reused, with this build's workload in them
    if setup.uses_vms:
        where = "each host's" if inventory is not None else "this machine's"
        typer.echo(f"vm/cvm: using {where} benchmark VM (started if needed: under TCG, ~30 s to SSH)", err=True)
    alloc: Allocation | None = None
    try:
        if checked is not None:
            sites = prepare.ready(checked, lambda line: typer.echo(f"notice: {line}", err=True))
        else:
            alloc, sites = _allocate(plan.bench_id, slurm_nodes or 1, slurm_opts, nodes_inv, images)
    except KeyboardInterrupt:
        what = (
            "waiting for Slurm's allocation: the request was revoked"
            if checked is None
            else "preparing the targets: nothing was run; a VM being created was removed"
        )
        typer.echo(f"interrupted while {what}", err=True)
        raise typer.Exit(130) from None
    try:
        # 3. the runs: a target per site and kind, made once (more per job or co-tenant in those scenarios)
        machines = [[make(k, s) for k in kinds] for s in sites]
        console = Console(stderr=True, soft_wrap=True, highlight=False)
        p = bench_mod.PRESETS[preset_name]
        if suite != "micro" and not model and image_size is None and steps is None:
            console.print(
                f"No models given: running the [bold]{p.name}[/] preset — {p.summary}. "
                "See `dltestbed bench --help` for the options."
            )
        records = _runs(plan, options, sites, kinds, machines, Store.open(results), stream, console)
    finally:
        if alloc is not None:
            from dltestbed.shield import shielded

            with shielded():  # a second Ctrl-C does not keep the nodes
                alloc.release()
    for note in plan.notes:
        typer.echo(note, err=True)
    if report is not None:
        typer.echo(_report(plan.bench_id, report, results), err=True)
    if as_json:
        print(json.dumps([r.to_dict() for r in records], indent=2))
    failed = [r for r in records if r.status != "ok"]
    if failed:
        first = failed[0]
        raise WorkloadError(
            f"{len(failed)} of {len(records)} run(s) failed; first: {first.model} rep {first.repetition}: "
            f"{first.reason} (log: {first.log_path})"
        )


def _allocate(
    bench_id: str, count: int, opts: SlurmOptions, inv: Inventory | None, images: dict[str, ContainerImage | None]
) -> tuple[Allocation, list[Site]]:
    """Hold the bench's Slurm allocation (salloc's own lines are echoed as it waits); a site per node,
    with its container image when cbm runs (`images`: by container host; a node that is none is one line)."""
    from dltestbed import slurm
    from dltestbed.cli import slurmlaunch
    from dltestbed.errors import ConfigError
    from dltestbed.owner import installation_id
    from dltestbed.targets import Site, SlurmPlace

    python = slurmlaunch.interpreters(opts, inv)
    cluster = slurm.check_cluster()
    req = slurm.Request(
        count,
        opts.partition,
        opts.account,
        opts.time,
        job_name=f"dltestbed-{bench_id}",
        comment=f"dltestbed bench {bench_id} of installation {installation_id()}",
    )
    slurm.check_request(req)
    alloc = slurm.Allocation.get(req, lambda line: typer.echo(line, err=True))
    typer.echo(
        f"Slurm job {alloc.job_id} on cluster {cluster or '?'}, partition {alloc.partition or '?'}: "
        f"{', '.join(n.name for n in alloc.nodes)} (given back when the bench ends)",
        err=True,
    )
    missing = [n.name for n in alloc.nodes if images and images.get(n.name) is None]
    if missing:
        alloc.release()
        raise ConfigError(
            f"cbm on Slurm node {missing[0]}: not a container host of --inventory (container_hosts, "
            "where `provision` loads the image)"
        )
    return alloc, [Site(slurm=SlurmPlace(alloc, n, python(n.name)), container=images.get(n.name)) for n in alloc.nodes]


def _local_tf_gpus() -> list[str]:
    """The GPUs this machine's TensorFlow would use: what NVIDIA's driver lists, where TensorFlow is its CUDA
    build (not tensorflow-cpu); [] otherwise. Reads nvidia-smi, not TensorFlow (seconds to import)."""
    import importlib.metadata as md

    from dltestbed.provision import facts, localfacts

    try:
        md.version("tensorflow")
    except md.PackageNotFoundError:
        return []
    found = localfacts.gpu_facts()
    return [g.name for g in facts.parse_nvidia_smi(found["nvidia_smi"])] if found["nvidia_smi_rc"] == 0 else []


def _raise_fd_limit() -> None:
    """Open files up to the hard limit: a bench holds a few per host at once (its connection, the run's
    log), and the usual soft limit of 1024 would cap a fleet at a few hundred hosts."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


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


def _hosts(inventory: Path | None, limit: str | None, group: list[str]) -> list[Host | None]:
    """The inventory's bare_metal hosts (--limit and --group applied), or [None]: this machine."""
    from dltestbed.errors import ConfigError

    if inventory is None:
        if limit or group:
            raise ConfigError(f"{'--limit' if limit else '--group'} needs --inventory")
        return [None]
    from dltestbed import inventory as inventory_mod

    inv = inventory_mod.load(inventory, limit, inventory_mod.parse_group_options(group))
    hosts = inv.in_role("bare_metal")
    if not hosts:
        raise ConfigError(
            f"inventory {str(inventory)!r} has no hosts in {inv.role_help('bare_metal')}"
            + (f" matching --limit {limit!r}" if limit else "")
            + ("" if group else "; --group bare_metal=GROUP names yours")
        )
    return list(hosts)


def _runs(
    plan: Plan,
    options: Options,
    sites: list[Site],
    kinds: list[str],
    machines: list[list[Target]],
    store: Store,
    stream: InfluxSettings | None,
    console: Console,
) -> list[RunRecord]:
    """Announce, then run the scenario with progress bars and the stream; Ctrl-C is exit 130 with the
    current run stored as failed; the stream is flushed and the store closed whatever happens."""
    from dltestbed import scenarios
    from dltestbed.cli.progress import RichObserver

    console.print(
        _announce(plan, options, machines, sites)
        + f"; results → {store.path}"
        + (f"; streaming to InfluxDB at {stream.describe()}" if stream else "")
    )
    sinks = []
    try:
        if stream is not None:
            from dltestbed.results.influx import InfluxSink

            sinks.append(InfluxSink(store, stream))
        with RichObserver(console) as observer:
            return scenarios.run(plan, sites, kinds, store, observer, options, sinks, machines)
    except KeyboardInterrupt:
        console.print(
            f"[red]interrupted[/]: the current run is stored as failed with its steps; see "
            f"`dltestbed runs --bench {plan.bench_id}`"
        )
        raise typer.Exit(130) from None
    finally:
        from dltestbed.shield import shielded

        with shielded():  # a second Ctrl-C does not cut the stream's last send or the store's close short
            for sink in sinks:
                _close_stream(sink, console)
            store.close()


def _stream_settings(
    url: str | None, org: str | None, bucket: str | None, token_file: Path | None
) -> InfluxSettings | None:
    """InfluxDB settings from options and environment, or None (no streaming); imports nothing heavy."""
    from dltestbed.results import influx

    return influx.settings(url, org, bucket, token_file)


def _announce(plan: Plan, options: Options, machines: list[list[Target]], sites: list[Site]) -> str:
    """One line: what the bench will run, where, how."""
    from dltestbed import scenarios

    assert isinstance(options, scenarios.Options)
    targets = [t for m in machines for t in m]
    where = ", ".join(f"{t.kind}:{t.name}" + ("" if t.name == t.host else f" ({t.host})") for t in targets)
    head = f"bench {plan.bench_id} ({options.scenario}, {plan.order}): {len(plan.specs)} workload(s) × "
    reps = f"up to {plan.repeat} (auto, ±{plan.precision:g} %)" if plan.precision else str(plan.repeat)
    aa = " (bm twice: A and A′)" if plan.aa else ""
    head += f"{reps} repetition(s) × {len(machines[0])} kind(s){aa}"
    if options.scenario == "distributed":
        n = scenarios.worker_count(options, [s.host for s in sites])
        extra = " + 1 worker alone" if options.baseline else ""
        return head + f", each a job of {n} workers{extra}, on {where}"
    if options.scenario == "shared":
        iso = ", isolated CPUs" if options.isolate else ""
        return head + f", each alone and with a {options.cotenant} co-tenant{iso}, on {where}"
    mode = ("hosts at once" if options.parallel else "hosts one after another") if len(sites) > 1 else ""
    total = len(plan.runs()) * len(targets)
    return (head + f" = {total} run(s) on {where} {mode}").rstrip()


def _close_stream(sink: object, console: Console) -> None:
    """Flush the stream and say what reached the server, and what waits for `dltestbed results push`."""
    from dltestbed.results import influx

    assert isinstance(sink, influx.InfluxSink)
    left = sink.close()
    s = sink.settings
    if sink.in_doubt:
        console.print(f"[yellow]InfluxDB[/]: {influx.doubt_note(sink.in_doubt)}")
    if left:
        why = f" ({sink.errors[-1]})" if sink.errors else ""
        console.print(
            f"[yellow]InfluxDB[/]: {sink.sent} point(s) sent to {s.url}; {left} not sent{why} — kept in "
            f"the results store; `dltestbed results push` sends them"
        )
    else:
        console.print(f"InfluxDB: {sink.sent} point(s) sent to {s.describe()}, none waiting")
