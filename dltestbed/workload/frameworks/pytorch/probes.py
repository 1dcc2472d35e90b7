"""The framework-specific probes in PyTorch, the counterparts of compute.py's and collective.py's: chained GEMMs
per math and the models' heaviest convolutions, each checked against float64 on the same device, and between a
job's workers (torch.distributed) an all-reduce over sizes, checked exactly, and the network as an all-gather.
Same cases, same work counts, same names: a report compares them case for case."""

from __future__ import annotations

import math as math_lib
from collections.abc import Callable
from types import ModuleType
from typing import Any

from dltestbed.workload.checked import CHECK_N
from dltestbed.workload.frameworks.pytorch.checks import (
    allreduce_check,
    conv_check,
    convolve,
    dtype,
    gemm_check,
    normal,
    set_math,
)
from dltestbed.workload.probes.base import (
    GATHER_BYTES,
    Case,
    Skip,
    Where,
    allreduce_cases,
    size_words,
)
from dltestbed.workload.probes.compute import at_size, conv_shapes, gemm_case, gemm_plan


def device(w: Where) -> str:
    """Where gemm and conv run: the first GPU PyTorch sees, else the CPU."""
    return "cuda:0" if w.gpu_names else "cpu"


# Revision 2 (was 1: the chain x <- x @ b with a fresh output each product, ended by a read of x on the host): the
# same product again into one output, ended by a synchronize, as a bare loop of it runs (docs/reference.md,
# "What the GEMM probe reads").
GEMM_REVISION = 2


def gemm(w: Where) -> list[Case | Skip]:
    """n x n matmuls (c <- a @ b, the same inputs each time, as a bare loop): 2 n^3 FLOP each, per math: float32
    with TF32 off, TF32, bfloat16, float16, each against its own dense peak (on a CPU: float32)."""
    return gemm_plan(w, lambda n, math: _gemm_case(w.framework, w, n, math), "its tensor cores' rate")


def gemm_inputs(torch: ModuleType, w: Where, n: int, math: str) -> tuple[Any, Any]:
    """The probe's a and b (b scaled by 1/sqrt(n): |a @ b| stays near |a|), of the seed, in the math's dtype."""
    where, dt = device(w), dtype(torch, math)
    a = normal(torch, (n, n), w.seed, where).to(dt)
    b = (normal(torch, (n, n), w.seed + 1, where) / math_lib.sqrt(n)).to(dt)
    return a, b


def synchronize(torch: ModuleType, where: str) -> None:
    """Wait until every kernel queued on the device is done (a CPU's products are done when they return)."""
    if where.startswith("cuda"):
        torch.cuda.synchronize(where)


def _gemm_case(torch: ModuleType, w: Where, n: int, math: str) -> Case:
    where = device(w)
    a, b = gemm_inputs(torch, w, n, math)
    c = torch.empty_like(a)

    def call(reps: int) -> None:
        set_math(torch, math)
        with torch.no_grad():
            for _ in range(reps):
                torch.matmul(a, b, out=c)
        synchronize(torch, where)

    check = gemm_check(torch, where, w.gpu, CHECK_N[w.scale], math) if at_size(w, n) else None
    return gemm_case(w, n, math, call, check, GEMM_REVISION)


def conv(w: Where) -> list[Case | Skip]:
    """Forward convolutions at the models' heaviest layers' shapes: 2 H' W' k^2 Cin Cout FLOP each (float32,
    TF32 off), NCHW as PyTorch lays them out."""
    torch, where = w.framework, device(w)
    cases: list[Case | Skip] = []
    for i, (name, h, wd, cin, cout, k, stride) in enumerate(conv_shapes(w.scale)):
        x = normal(torch, (1, cin, h, wd), w.seed, where)
        f = normal(torch, (cout, cin, k, k), w.seed + 1, where) / math_lib.sqrt(k * k * cin)

        def call(reps: int, x: Any = x, f: Any = f, stride: int = stride) -> None:
            set_math(torch, "float32")
            acc: Any = None
            with torch.no_grad():
                for _ in range(reps):
                    acc = convolve(torch, x, f, stride)[0, 0, 0, 0]
            float(acc)  # on the host: every convolution is done

        ho, wo = -(-h // stride), -(-wd // stride)
        cases.append(
            Case(
                "conv",
                f"{name} at {h}x{wd}",
                "FLOP/s",
                2.0 * ho * wo * k * k * cin * cout,
                call,
                headline=(i == 0),
                math="float32",
                note="float32, TF32 off",
                check=conv_check(torch, where, w.gpu, (h, wd, cin, cout, k, stride)),
            )
        )
    return cases


def job(w: Where) -> Any:
    """torch.distributed, joined by the framework; Skip outside a job."""
    if w.strategy is None:
        raise Skip("runs between the workers of a job: --scenario distributed")
    return w.strategy


def _blocking(torch: ModuleType, where: str, reps: int, once: Callable[[], Any]) -> None:
    """`reps` collectives, then wait for the last (NCCL's are asynchronous on the GPU)."""
    for _ in range(reps):
        once()
    if where.startswith("cuda"):
        torch.cuda.synchronize()


def allreduce(w: Where) -> list[Case | Skip]:
    """All-reduce (sum) of float32 tensors over message sizes, a rank per worker, as nccl-tests reports it:
    algorithm bandwidth = bytes ÷ time, bus bandwidth = algbw × 2(n−1)/n."""
    dist, torch = job(w), w.framework
    n, where = dist.get_world_size(), device(w)

    def call(size: int) -> Callable[[int], None]:
        x = torch.ones(size // 4, dtype=torch.float32, device=where)

        def reduce(reps: int) -> None:
            _blocking(torch, where, reps, lambda: dist.all_reduce(x))  # x grows: the time is the same
            x.fill_(1.0)

        return reduce

    def check(size: int) -> Any:
        return allreduce_check(torch, dist, where, w.gpu, size)

    return allreduce_cases(w.scale, n, call, check, f"{n} ranks on {w.workers} workers ({dist.get_backend()})")


def net(w: Where) -> list[Case | Skip]:
    """Between the workers, through the job's backend (gloo over TCP, NCCL over its transport): the latency of a
    4-byte all-reduce, and the bytes each worker receives per second in an all-gather."""
    dist, torch = job(w), w.framework
    n, where = dist.get_world_size(), device(w)
    one = torch.ones(1, dtype=torch.float32, device=where)
    size = GATHER_BYTES[w.scale]
    part = torch.ones(size // 4, dtype=torch.float32, device=where)
    gathered = torch.empty(n * (size // 4), dtype=torch.float32, device=where)
    via = f"{n} workers, torch.distributed {dist.get_backend()}"

    def latency(reps: int) -> None:
        _blocking(torch, where, reps, lambda: dist.all_reduce(one))
        one.fill_(1.0)

    def gather(reps: int) -> None:
        _blocking(torch, where, reps, lambda: dist.all_gather_into_tensor(gathered, part))

    return [
        Case("net", "latency: 4 B all-reduce", "s", 1.0, latency, note=via),
        Case("net", f"all-gather {size_words(size)} a worker: received", "B/s", float(size * (n - 1)), gather,
             headline=True, note=via),
    ]  # fmt: skip


def agreeing(torch: ModuleType, dist: Any, where: str) -> Callable[[float], float]:
    """The largest of a value over the job's workers: an all-reduce (max) of it."""

    def agree(value: float) -> float:
        held = torch.tensor([value], dtype=torch.float64, device=where)
        dist.all_reduce(held, op=dist.ReduceOp.MAX)
        return float(held.item())

    return agree


PROBES = {"gemm": gemm, "conv": conv, "net": net, "allreduce": allreduce}  # config.FRAMEWORK_PROBES, in its order
