"""`dltestbed bench`: run the workloads and store every step."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path

import typer


class DataOpt(StrEnum):
    synthetic = "synthetic"
    real = "real"


class ModeOpt(StrEnum):
    train = "train"
    infer = "infer"


class DeviceOpt(StrEnum):
    auto = "auto"
    cpu = "cpu"
    gpu = "gpu"


class LayoutOpt(StrEnum):
    single = "single"
    distributed = "distributed"
    shared = "shared"


class PresetOpt(StrEnum):
    quick = "quick"
    study = "study"


RESULTS_HELP = "Results store (SQLite). Default: $DLTESTBED_RESULTS, else ~/.local/share/dltestbed/results.sqlite."


def bench(
    model: list[str] | None = typer.Option(
        None,
        "--model",
        "-m",
        help="Model: alexnet, resnet50 or inception3. Repeatable. Default: the preset's.",
    ),
    preset: PresetOpt = typer.Option(
        PresetOpt.quick,
        help="Defaults for what is not given: quick (small sizes, 3+30 steps) "
        "or study (native sizes, batch 32, 10+100 steps).",
    ),
    data: DataOpt = typer.Option(
        DataOpt.synthetic, help="synthetic (in memory, no I/O) or real (JPEGs from --data-dir)."
    ),
    data_dir: Path | None = typer.Option(
        None, help="ImageNet-style folder DIR/<class>/*.jpg (see `dltestbed data make`)."
    ),
    mode: ModeOpt = typer.Option(ModeOpt.train, help="train or infer."),
    device: DeviceOpt = typer.Option(DeviceOpt.auto, help="auto, cpu (hides the GPUs) or gpu (fails without one)."),
    batch_size: int | None = typer.Option(None, help="Images per step. Default: the preset's."),
    image_size: int | None = typer.Option(None, help="Input size in px, for every model. Default: the preset's."),
    warmup: int | None = typer.Option(None, help="Untimed steps before the timed ones. Default: the preset's."),
    steps: int | None = typer.Option(None, help="Timed steps. Default: the preset's."),
    classes: int = typer.Option(1000, help="Classes of the model's output (real data: the folder's)."),
    repeat: int = typer.Option(1, help="Repetitions of every run (interleaved: rep 1 of all models, then rep 2 ...)."),
    timeout: float | None = typer.Option(None, help="Seconds after which a run is stopped and stored as failed."),
    targets_opt: str = typer.Option(
        "bm", "--targets", help="Target kinds, comma-separated: bm (bare metal), cbm (a container on it)."
    ),
    runtime: str | None = typer.Option(
        None, help="Container runtime for cbm: docker or podman (default: docker if its daemon answers, else podman)."
    ),
    inventory: Path | None = typer.Option(
        None, help="Ansible inventory: run on its bare_metal hosts over SSH (after `dltestbed provision`)."
    ),
    limit: str | None = typer.Option(None, help="With --inventory: only these hosts or groups (Ansible pattern)."),
    parallel: bool = typer.Option(
        True, "--parallel/--sequential", help="With several hosts: run them at once (default) or one by one."
    ),
    results: Path | None = typer.Option(None, help=RESULTS_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the runs' summaries as JSON on stdout."),
) -> None:
    """Run workloads on this machine (target bm), or over SSH on an inventory's hosts, and store every step.

    Run bare, it runs the quick preset and says so.

    Progress goes to stderr; with --json, stdout holds only the JSON array of runs.

    Exits 1 when any run failed (the run is stored as failed, with its reason and its steps).
    """
    from rich.console import Console

    from dltestbed import bench as bench_mod
    from dltestbed.cli.progress import RichObserver
    from dltestbed.errors import ConfigError, WorkloadError
    from dltestbed.results.store import Store
    from dltestbed.targets import KINDS, make

    plan = bench_mod.plan(
        models=model, preset_name=preset.value, repeat=repeat, image_size=image_size,
        batch_size=batch_size, warmup=warmup, steps=steps, data_dir=str(data_dir) if data_dir else None,
        data=data.value, mode=mode.value, device=device.value, classes=classes,
    )  # fmt: skip
    kinds = [k.strip() for k in targets_opt.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise ConfigError(f"--targets: unknown kind {(unknown or [''])[0]!r}; known: {', '.join(KINDS)}")
    if inventory is not None:
        from dltestbed import inventory as inventory_mod

        hosts = inventory_mod.load(inventory, limit).in_group("bare_metal")
        if not hosts:
            raise ConfigError(f"inventory {str(inventory)!r} has no hosts in group bare_metal" +
                              (f" matching --limit {limit!r}" if limit else ""))  # fmt: skip
        machines = [[make(k, h, runtime=runtime) for k in kinds] for h in hosts]
    elif limit:
        raise ConfigError("--limit needs --inventory")
    else:
        machines = [[make(k, runtime=runtime) for k in kinds]]
    targets = [t for m in machines for t in m]
    store = Store.open(results)
    console = Console(stderr=True, soft_wrap=True, highlight=False)
    p = bench_mod.PRESETS[preset.value]
    if not model and image_size is None and steps is None:
        console.print(f"No models given: running the [bold]{p.name}[/] preset — {p.summary}. "
                      "See `dltestbed bench --help` for the options.")  # fmt: skip
    runs = plan.runs()
    where = ", ".join(f"{t.kind}:{t.name}" + ("" if t.name == t.host else f" ({t.host})") for t in targets)
    mode_ = ("hosts at once" if parallel else "hosts one after another") if len(machines) > 1 else ""
    console.print(
        f"bench {plan.bench_id}: {len(plan.specs)} workload(s) × {plan.repeat} repetition(s) × {len(targets)} "
        f"target(s) = {len(runs) * len(targets)} "
        f"run(s) on {where} {mode_}".rstrip()
        + f"; results → {store.path}"
    )
    records = []
    try:
        with RichObserver(console) as observer:
            records = bench_mod.run_all(plan, machines, store, observer, timeout=timeout, parallel=parallel)
    except KeyboardInterrupt:
        console.print(f"[red]interrupted[/]: the current run is stored as failed with its steps; see "
                      f"`dltestbed runs --bench {plan.bench_id}`")  # fmt: skip
        raise typer.Exit(130) from None
    finally:
        store.close()
    if as_json:
        print(json.dumps([r.to_dict() for r in records], indent=2))
    failed = [r for r in records if r.status != "ok"]
    if failed:
        first = failed[0]
        raise WorkloadError(
            f"{len(failed)} of {len(records)} run(s) failed; first: {first.model} rep {first.repetition}: "
            f"{first.reason} (log: {first.log_path})"
        )
