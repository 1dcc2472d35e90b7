"""What an acceptance runs on the nodes, as `bench` requests: the measures of a node (with GPUs: the screen,
the probes and ResNet-50 on every GPU at once; without: AlexNet and the CPU's probes), all of a node's GPUs
together, and a pair of nodes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dltestbed.accept.context import Ctx
from dltestbed.choices import NODE, PER_GPU, Device
from dltestbed.orchestrate import Options, Workloads


@dataclass(frozen=True)
class Measures:
    """One bench of a node's measures: what it runs, how often, and whether a node's GPUs take it in turn."""

    workloads: Workloads
    repeat: int = 1
    in_turn: bool = False  # a host's GPUs one after another: what they share is measured by one at a time
    device: Device = "auto"


def workloads(ctx: Ctx) -> dict[str, Measures]:
    """What measures a node: with GPUs, the screen, the probes and ResNet-50 in the gpu preset on every GPU of a
    node at once, and the host copies one GPU at a time (GPUs share a PCIe switch's uplink: at once, each would
    see a share of it); without, AlexNet and the CPU's probes."""
    lv = ctx.level
    if ctx.gpu:

        def probes(*names: str) -> Workloads:
            return Workloads(
                suite="micro",
                preset="gpu",
                probes=names,
                probe_scale="full",
                gpus=PER_GPU,
                warmup=2,
                steps=lv.probe_steps,
            )

        return {
            "screen": Measures(
                Workloads(suite="screen", preset="gpu", gpus=PER_GPU, screen_seconds=lv.screen_seconds), device="gpu"
            ),
            "probes": Measures(probes("gemm", "membw", "d2d", "launch"), device="gpu"),
            "copies": Measures(probes("h2d", "d2h"), in_turn=True, device="gpu"),
            "model": Measures(
                Workloads(models=("resnet50",), preset="gpu", gpus=PER_GPU, steps=lv.steps), lv.repeat, device="gpu"
            ),
        }
    model = Workloads(models=("alexnet",), preset="quick", image_size=64, batch_size=8, warmup=3, steps=lv.steps)
    return {
        "model": Measures(model, lv.repeat, device="cpu"),
        "probes": Measures(
            Workloads(
                suite="micro",
                preset="quick",
                probes=("gemm", "membw"),
                probe_scale="small",
                warmup=1,
                steps=lv.probe_steps,
            )
        ),
    }


def measure_benches(
    ctx: Ctx, limit: Sequence[str] | None, only: Sequence[str] = (), skip: Sequence[str] = ()
) -> list[str]:
    """The benches of `workloads` (those named in `only`, else all but `skip`) on every node (or `limit`'s)."""
    out = []
    for name, m in workloads(ctx).items():
        if (not only or name in only) and name not in skip:
            turn = Options(gpus_in_turn=True) if m.in_turn else None
            out.append(ctx.bench(m.workloads, limit=limit, repeat=m.repeat, scenario=turn, device=m.device))
    return out


def node_bench(ctx: Ctx, limit: Sequence[str] | None) -> str:
    """Every GPU of each node (or `limit`'s) in one process: all-reduce over them, NCCL's (its bus bandwidth is
    judged against the other nodes')."""
    allreduce = Workloads(
        suite="micro",
        preset="gpu",
        probes=("allreduce",),
        gpus=NODE,
        warmup=2,
        steps=ctx.level.probe_steps,
    )
    return ctx.bench(allreduce, limit=limit, device="gpu")


def pairs_of(nodes: Sequence[str]) -> list[tuple[str, str]]:
    """Nodes two by two in order; an odd one out goes with the first."""
    out = [(nodes[i], nodes[i + 1]) for i in range(0, len(nodes) - 1, 2)]
    if len(nodes) % 2 and len(nodes) > 1:
        out.append((nodes[-1], nodes[0]))
    return out


def pair_bench(ctx: Ctx, pairs: Sequence[tuple[str, str]]) -> str:
    """The network and all-reduce between nodes two by two: a distributed job of a worker on each node of a pair,
    in one bench, the pairs that share no node at once, in one round (short probes, and the fabric measured as
    loaded as a job over the rack would load it: --parallel N does not cap them; --no-parallel runs one at a
    time)."""
    preset = "gpu" if ctx.gpu else "quick"
    probes = Workloads(suite="micro", preset=preset, probes=("net", "allreduce"), warmup=1, steps=ctx.level.probe_steps)
    jobs = tuple(tuple(p) for p in pairs)
    nodes = list(dict.fromkeys(n for p in pairs for n in p))
    job = Options(scenario="distributed", baseline=False, jobs=jobs)
    return ctx.bench(probes, limit=nodes, scenario=job, parallel=ctx.request.nodes.parallel != 1)
