"""PyTorch: a model's run on one device (the CPU, or the one GPU the process sees), alone or as a worker of a
DDP job (one process per GPU), its models those of pytorch/models.py (Keras's, layer for layer). The math as
for TensorFlow: float32 with TF32 off, TF32, autocast bfloat16, autocast float16 with a gradient scaler;
`--xla` compiles the step with torch.compile (PyTorch's counterpart), Inductor's caches in the bench's folder
($DLTESTBED_COMPILE_CACHE) where it gave one; --deterministic asks for deterministic algorithms, cuBLAS's fixed
workspace and the seed. PyTorch loads inside `run_model` only."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import importlib.metadata as md
import os
import tempfile
import time
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from datetime import timedelta
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING, Any

from dltestbed import hints
from dltestbed.errors import ConfigError
from dltestbed.workload.distributed import COLLECTIVE_TIMEOUT, Cluster
from dltestbed.workload.events import AccuracyEvent, StartEvent
from dltestbed.workload.frameworks.base import (
    COMPILE_CACHE_ENV,
    Framework,
    ModelRun,
    ProbeFramework,
    ProbeSetup,
    register,
)

if TYPE_CHECKING:
    from dltestbed.config import WorkloadSpec
    from dltestbed.workload.emit import Emitter

RENDEZVOUS = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK")  # torch.distributed's env://
# cuBLAS's fixed workspace, which deterministic GEMMs need (CUDA's documentation, "Results reproducibility")
CUBLAS_WORKSPACE = ":4096:8"


@register
class PyTorch(Framework):
    """PyTorch (the CPU build, or the CUDA build where the host has a GPU)."""

    name = "pytorch"
    label = "PyTorch"
    version_key = "pytorch"
    node_jobs = False  # one process per GPU: a DDP job
    packages = MappingProxyType({"cpu": "torch", "gpu": "torch"})
    distributions = ("torch",)
    extra = "pytorch"
    package_fact = "torch"
    stack_facts = ("pytorch", "pytorch_cuda", "torch_threads")  # it splits a reduction over its intra-op threads
    build_facts = ("pytorch", "pytorch_cuda", "pytorch_cudnn")
    imports = ("torch", "PIL")
    requires = ("pillow",)  # real data's JPEGs (TensorFlow decodes its own)
    # 2: the padding computed in the convolutions and pools, not copied before them (the same numbers, faster);
    # 3 (resnet50): each conv's bias folded into the batch norm after it (ConvNorm: the same numbers, faster)
    model_revisions = MappingProxyType({"alexnet": 2, "resnet50": 3, "inception3": 2})
    compile_cache = True  # Inductor's FX graph, AOTAutograd and autotuning caches (and Triton's kernels)

    @classmethod
    def pinned(cls, flavor: str, version: str) -> str:
        """torch's CPU build carries the local label `+cpu` (PyTorch's CPU index, or a pip that finds it on disk);
        PyPI's build of the same release, CUDA's, has none."""
        release = version.split("+", 1)[0]
        return f"{cls.packages[flavor]}=={release}" + ("+cpu" if flavor == "cpu" else "")

    @classmethod
    def installed(cls) -> tuple[str, bool] | None:
        """torch, its version's local label saying the CPU build ("2.13.0+cpu"); any other build has CUDA."""
        try:
            version = md.version("torch")
        except md.PackageNotFoundError:
            return None
        return f"torch {version}", "+cpu" not in version

    def worker_env(self, workers: Sequence[str], index: int) -> dict[str, str]:
        """torch.distributed's env:// rendezvous: the first worker's host:port holds the store."""
        host, _, port = workers[0].rpartition(":")
        return dict(zip(RENDEZVOUS, (host, port, str(index), str(len(workers)), "0"), strict=True))

    def cluster(self, environ: Mapping[str, str]) -> Cluster:
        """The job of the rendezvous variables (the workers' addresses beyond the first are not known to a
        worker: the store is the first's)."""
        missing = [k for k in RENDEZVOUS if not environ.get(k)]
        if missing:
            raise ConfigError(f"--distributed with PyTorch needs {', '.join(missing)} in the environment")
        try:
            rank, size = int(environ["RANK"]), int(environ["WORLD_SIZE"])
        except ValueError:
            raise ConfigError("RANK and WORLD_SIZE must be integers") from None
        if size < 2 or not 0 <= rank < size:
            raise ConfigError(f"RANK {rank} of WORLD_SIZE {size}: at least 2 workers, the rank one of them")
        first = f"{environ['MASTER_ADDR']}:{environ['MASTER_PORT']}"
        return Cluster((first, *(f"rank {i}" for i in range(1, size))), rank)

    def for_probes(self, setup: ProbeSetup) -> ProbeFramework:
        """PyTorch, its GPU's memory sliced as asked, a job's process group joined (left when the process ends),
        its own gemm, conv, all-reduce and net probes (pytorch/probes.py) and checks (pytorch/checks.py). One
        process over every GPU (`node`) is not PyTorch's way: planning refuses it before anything runs."""
        cluster, fingerprint = setup.cluster, setup.fingerprint
        torch = _import(fingerprint["host"])
        # lazy: the probes import nothing of PyTorch themselves, but are PyTorch's only
        from dltestbed.workload.frameworks.pytorch import checks as torchchecked
        from dltestbed.workload.frameworks.pytorch import probes as torchprobes

        gpu = torch.cuda.is_available()
        if gpu:
            _memory_slice(torch, setup.memory_mib)
            torch.backends.cudnn.benchmark = True  # the convolutions' algorithms tuned, as TensorFlow's are
        dist, agree = None, None
        if cluster is not None:  # before any other op: it waits here for every worker
            _join(torch, cluster, gpu, torch.device("cuda:0" if gpu else "cpu"), fingerprint)
            atexit.register(torch.distributed.destroy_process_group)
            dist = torch.distributed
            agree = torchprobes.agreeing(torch, dist, "cuda:0" if gpu else "cpu")
        fingerprint.update(facts(torch, setup.gpus, gpu))
        visible = torch.cuda.device_count() if gpu else 0
        return ProbeFramework(torch, visible, dist, agree, torchprobes.PROBES, torchchecked)

    def build(self, fingerprint: Mapping[str, Any]) -> str:
        """Its version and the CUDA it was built with, if any."""
        cuda = fingerprint.get("pytorch_cuda")
        return f"{self.label} {fingerprint.get(self.version_key)} ({f'CUDA {cuda}' if cuda else 'CPU'} build)"

    def run_model(self, run: ModelRun, emitter: Emitter) -> None:
        """Pick the device, join the job (a DDP worker), resolve the math, emit the start, then run the steps
        with the sampler and the GPU health watch around them."""
        spec = run.spec
        _before_import(spec)
        torch = _import(run.fingerprint["host"])
        # lazy: PyTorch, NVML and the CUDA runtime load only in the modes that use them
        from dltestbed.workload import fingerprint, loop, mathmode
        from dltestbed.workload.frameworks.pytorch import steps as torchsteps
        from dltestbed.workload.sampler import Sampler, watched

        gpu = spec.device != "cpu" and torch.cuda.is_available()
        if spec.device == "gpu" and not gpu:
            raise ConfigError(f"--device gpu: no GPU is visible to PyTorch on {run.fingerprint['host']}")
        device = torch.device("cuda:0" if gpu else "cpu")
        if gpu:
            _memory_slice(torch, spec.gpu_memory_mib)
        caps = [torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())] if gpu else []
        math = mathmode.resolve(spec.math, caps)
        run.fingerprint.update(facts(torch, run.gpus, gpu))
        with contextlib.ExitStack() as running:  # unwinds in reverse: sampler, health after, NVML closed, job left
            workers, agree = 1, None
            if run.cluster is not None:  # before any other op: it waits here for every worker
                workers, agree = _join(torch, run.cluster, gpu, device, run.fingerprint)
                running.callback(torch.distributed.destroy_process_group)
            used = {"math": math, "device_used": "gpu" if gpu else "cpu", "revision": self.model_revision(spec.model)}
            resolved = spec.model_dump() | {"image_size": spec.size, "classes": run.classes, **used}
            emitter.emit(StartEvent(spec=resolved, fingerprint=run.fingerprint, t=time.time()))
            held = (lambda: [int(torch.cuda.memory_allocated(device))]) if gpu else None
            sampler = Sampler(emitter.emit, spec.sample_interval, run.nvml, held)
            if run.nvml:
                running.callback(run.nvml.close)
            running.enter_context(watched(run.nvml, emitter.emit, sampler))
            running.enter_context(sampler.running())
            _arithmetic(torch, math, spec.deterministic, spec.seed)
            model, step, batches = _model(torch, run, math, device, workers)
            startup = time.time() - run.process_start()
            summary = loop.run(
                step,
                batches,
                spec.batch_size,
                spec.warmup,
                spec.steps,
                emitter.emit,
                require_gpu=spec.device == "gpu",
                libraries=fingerprint.loaded_cuda if gpu else None,
                warmed=(lambda: torch.cuda.reset_peak_memory_stats(device)) if gpu else None,
                agree=agree,
            )
            peak = int(torch.cuda.max_memory_allocated(device)) if gpu else None
            cached = cache_outcome(_dynamo_counters()) if spec.xla else None
            summary = dataclasses.replace(
                summary, startup_seconds=startup, gpu_memory_peak_bytes=peak, compile_cache=cached
            )
            if run.held is not None:
                got = torchsteps.evaluate(torch, model, run.held, spec.batch_size, spec.size, math, device)
                emitter.emit(AccuracyEvent(images=got[0], correct=got[1], loss=got[2], t=time.time()))
        emitter.emit(summary)


def _before_import(spec: WorkloadSpec) -> None:
    """The environment PyTorch reads once, set before it loads: cuBLAS's workspace, Inductor's caches."""
    if spec.deterministic:  # before CUDA starts: cuBLAS reads it once
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    if spec.xla:  # before Inductor reads its configuration
        tmp = inductor_caches(os.environ)
        if tmp is not None:
            os.makedirs(tmp, exist_ok=True)
            tempfile.tempdir = None  # read again from TMPDIR


def inductor_caches(environ: MutableMapping[str, str]) -> str | None:
    """Inductor's caches in the bench's folder, when it gave one: TORCHINDUCTOR_CACHE_DIR holds the FX graph,
    AOTAutograd and autotuning caches, TRITON_CACHE_DIR Triton's kernels (unless the user set it), TMPDIR (its
    tmp/) the precompiled headers; the FX graph and AOTAutograd caches on, unless the user turned them off.
    Without the folder: PyTorch's own default (/tmp/torchinductor_<user>, which a container's fresh /tmp loses at
    each run). The temp folder it set (None: no folder given)."""
    folder = environ.get(COMPILE_CACHE_ENV)
    if not folder:
        return None
    environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    # Inductor's precompiled headers (on a CPU) go to <temp folder>/torchinductor_<user>, whatever the cache dir
    environ["TMPDIR"] = tmp = os.path.join(folder, "tmp")
    # Triton's own kernels and launcher: else under ~/.triton, which a user without a home (nobody) cannot write
    environ.setdefault("TRITON_CACHE_DIR", os.path.join(folder, "triton"))
    environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "1")
    environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "1")
    return tmp


def _dynamo_counters() -> Mapping[str, Mapping[str, int]]:
    """Dynamo's counters of this process (Inductor's and AOTAutograd's caches count there)."""
    from torch._dynamo.utils import counters  # lazy: Dynamo's, loaded by torch.compile

    return counters


def cache_outcome(counters: Mapping[str, Mapping[str, int]]) -> str | None:
    """Where a compiled step's graphs came from, by Inductor's own counters: `hit` (every graph from the compile
    cache), `miss` (every graph compiled afresh, and stored), `partial` (some of each); None when no cache was
    consulted (bypassed, or turned off). AOTAutograd's cache holds a training step's forward and backward graphs,
    the FX graph cache an inference step's (and the graphs behind AOTAutograd's)."""
    aot, fx = counters.get("aot_autograd", {}), counters.get("inductor", {})
    hits = aot.get("autograd_cache_hit", 0) + fx.get("fxgraph_cache_hit", 0)
    misses = aot.get("autograd_cache_miss", 0) + fx.get("fxgraph_cache_miss", 0)
    if hits and misses:
        return "partial"
    return "hit" if hits else "miss" if misses else None


def _model(torch: ModuleType, run: ModelRun, math: str, device: Any, workers: int) -> tuple[Any, Any, Any]:
    """The model on its device (channels last on a GPU: what tensor cores' convolutions read), its step (the model
    wrapped in DDP in a job) and its batches (each worker its own data)."""
    # lazy: these import PyTorch
    from dltestbed.workload.frameworks.pytorch import models as torchmodels
    from dltestbed.workload.frameworks.pytorch import steps as torchsteps

    spec = run.spec
    model: Any = torchmodels.build(spec.model, spec.size, run.classes).to(device)
    if device.type == "cuda":
        model = model.to(memory_format=torch.channels_last)
    trained = model
    if workers > 1:
        trained = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0] if device.type == "cuda" else None)
    step = torchsteps.make_step(torch, trained, spec.mode, math, spec.xla, device, workers)
    seed = spec.seed + (run.cluster.index if run.cluster else 0)
    batches = (
        torchsteps.real_batches(torch, run.trained, spec.batch_size, spec.size, seed, device)
        if run.trained is not None
        else torchsteps.synthetic(torch, spec.batch_size, spec.size, run.classes, seed, device)
    )
    return model, step, batches


def _memory_slice(torch: ModuleType, mib: int | None) -> None:
    """--gpu-memory-mib: a fixed slice of GPU 0 for the caching allocator, as TensorFlow's logical device takes."""
    if mib is not None:
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, mib * 2**20 / total), 0)


def _import(host: str) -> ModuleType:
    """PyTorch, or one line that says it is not installed here."""
    try:
        import torch  # lazy: PyTorch loads in a PyTorch run only (seconds to import)
    except ImportError:
        raise ConfigError(
            f"--framework pytorch: PyTorch is not installed on {host} "
            f"(`{hints.provision(extra=['pytorch'])}`, or pip install 'dltestbed[pytorch]' there)"
        ) from None
    return torch


def _join(
    torch: ModuleType, cluster: Cluster, gpu: bool, device: Any, fp: dict[str, Any]
) -> tuple[int, Callable[[bool], bool]]:
    """Join the job (torch.distributed's env:// rendezvous: NCCL on GPUs, gloo on CPUs, collectives bounded
    by COLLECTIVE_TIMEOUT), the fingerprint given its facts; the workers, and whether a condition holds on
    every worker (a collective: every worker asks it at the same step)."""
    backend = "nccl" if gpu else "gloo"
    timeout = timedelta(seconds=COLLECTIVE_TIMEOUT)
    if not gpu and "GLOO_SOCKET_IFNAME" not in os.environ:  # the user's choice stands
        found = route_interface(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
        if found:
            os.environ["GLOO_SOCKET_IFNAME"] = found
    torch.distributed.init_process_group(backend, init_method="env://", timeout=timeout)
    size = torch.distributed.get_world_size()
    fp.update(
        {"worker_index": cluster.index, "workers": size, "replicas": size, "local_replicas": 1, "collective": backend}
    )

    def agree(flag: bool) -> bool:
        held = torch.tensor([1 if flag else 0], device=device)
        torch.distributed.all_reduce(held, op=torch.distributed.ReduceOp.MIN)
        return bool(held.item())

    return size, agree


def route_interface(address: str, port: int) -> str | None:
    """The network interface this machine reaches `address` through (None: no route, or none matched). gloo
    otherwise takes the address its host name resolves to, which on a host of several networks (a cluster's
    management and data networks, a lab's namespaces) may be one the other workers cannot reach."""
    import socket  # lazy: a distributed job's only

    import psutil  # lazy: as above

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((address, port))  # UDP: nothing is sent, the kernel picks the route
            local = probe.getsockname()[0]
    except OSError:
        return None
    for name, addrs in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and a.address == local for a in addrs):
            return name
    return None


def facts(torch: ModuleType, gpus: list[dict[str, Any]], gpu: bool) -> dict[str, Any]:
    """The PyTorch build and the GPUs it sees (NVML's details of each, by index)."""
    cudnn = torch.backends.cudnn.version() if gpu else None
    return {
        "pytorch": torch.__version__,
        "pytorch_cuda": torch.version.cuda,
        "pytorch_cudnn": cudnn,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "gpus_visible": torch.cuda.device_count() if gpu else 0,
        "torch_threads": torch.get_num_threads(),
        "gpus": gpus,
    }


def _arithmetic(torch: ModuleType, math: str, deterministic: bool, seed: int) -> None:
    """TF32 only for `tf32` (PyTorch's matmuls default to it off, its convolutions to on), cuDNN's autotuner
    on unless the run is deterministic, and the seed (every worker's and target's initial weights the same)."""
    tf32 = math == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = not deterministic
    torch.use_deterministic_algorithms(deterministic)
    torch.manual_seed(seed)
