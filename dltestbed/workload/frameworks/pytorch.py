"""PyTorch: a model's run on one device (the CPU, or the one GPU the process sees), its models those of
torchmodels.py (Keras's, layer for layer). The math as for TensorFlow: float32 with TF32 off, TF32, autocast
bfloat16, autocast float16 with a gradient scaler; `--xla` compiles the step with torch.compile (PyTorch's
counterpart); --deterministic asks for deterministic algorithms, cuBLAS's fixed workspace and the seed.
PyTorch loads inside `run_model` only."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata as md
import os
import time
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from dltestbed.errors import ConfigError
from dltestbed.workload.distributed import Cluster
from dltestbed.workload.events import AccuracyEvent, StartEvent
from dltestbed.workload.frameworks.base import Framework, ModelRun, ProbeFramework, register

if TYPE_CHECKING:
    from dltestbed.workload.emit import Emitter

RENDEZVOUS = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK")  # torch.distributed's env://
# cuBLAS's fixed workspace, which deterministic GEMMs need (CUDA's documentation, "Results reproducibility")
CUBLAS_WORKSPACE = ":4096:8"
AUTOCAST = {"mixed_bfloat16": "bfloat16", "mixed_float16": "float16"}  # math → autocast's dtype


@register
class PyTorch(Framework):
    """PyTorch (the CPU build, or the CUDA build where the host has a GPU)."""

    name = "pytorch"
    label = "PyTorch"
    version_key = "pytorch"
    in_images = False

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

    def for_probes(
        self, memory_mib: int | None, cluster: Cluster | None, gpus: list[dict[str, Any]], fingerprint: dict[str, Any]
    ) -> ProbeFramework:
        """Not yet: gemm, conv and all-reduce are TensorFlow's (the copies, launch, memory and disk need none)."""
        raise ConfigError(
            "--framework pytorch: the gemm, conv and all-reduce probes run with TensorFlow for now; "
            "membw, h2d, d2h, launch and disk need no framework (--probes membw,h2d,d2h,launch,disk)"
        )

    def build(self, fingerprint: Mapping[str, Any]) -> str:
        """Its version and the CUDA it was built with, if any."""
        cuda = fingerprint.get("pytorch_cuda")
        return f"{self.label} {fingerprint.get(self.version_key)} ({f'CUDA {cuda}' if cuda else 'CPU'} build)"

    def run_model(self, run: ModelRun, emitter: Emitter) -> None:
        """Pick the device, resolve the math, emit the start, then run the steps with the sampler and the GPU
        health watch around them."""
        spec = run.spec
        if run.cluster is not None:
            raise ConfigError("--framework pytorch runs one process for now: a distributed job is TensorFlow's")
        if spec.gpus == "node":
            raise ConfigError("--framework pytorch: --gpus node (one job over a node's GPUs) is TensorFlow's for now")
        if spec.deterministic:  # before CUDA starts: cuBLAS reads it once
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
        try:
            import torch
        except ImportError:
            raise ConfigError(
                f"--framework pytorch: PyTorch is not installed on {run.fingerprint['host']} "
                "(pip install 'dltestbed[pytorch]' there; provisioning installs TensorFlow only for now)"
            ) from None

        # lazy: PyTorch, NVML and the CUDA runtime load only in the modes that use them
        from dltestbed.workload import fingerprint, loop, mathmode
        from dltestbed.workload.frameworks import torchmodels
        from dltestbed.workload.sampler import Sampler, watched

        gpu = spec.device != "cpu" and torch.cuda.is_available()
        if spec.device == "gpu" and not gpu:
            raise ConfigError(f"--device gpu: no GPU is visible to PyTorch on {run.fingerprint['host']}")
        device = torch.device("cuda:0" if gpu else "cpu")
        caps = [torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())] if gpu else []
        math = mathmode.resolve(spec.math, caps)
        run.fingerprint.update(facts(torch, run.gpus, gpu))
        used = {"math": math, "device_used": "gpu" if gpu else "cpu"}
        resolved = spec.model_dump() | {"image_size": spec.size, "classes": run.classes, **used}
        emitter.emit(StartEvent(spec=resolved, fingerprint=run.fingerprint, t=time.time()))

        held = (lambda: [int(torch.cuda.memory_allocated(device))]) if gpu else None
        sampler = Sampler(emitter.emit, spec.sample_interval, run.nvml, held)
        with contextlib.ExitStack() as running:  # unwinds in reverse: sampler, health after, NVML closed
            if run.nvml:
                running.callback(run.nvml.close)
            running.enter_context(watched(run.nvml, emitter.emit, sampler))
            running.enter_context(sampler.running())
            _arithmetic(torch, math, spec.deterministic, spec.seed)
            model: Any = torchmodels.build(spec.model, spec.size, run.classes).to(device)
            if gpu:
                model = model.to(memory_format=torch.channels_last)  # NHWC: what tensor cores' convolutions read
            step = make_step(torch, model, spec.mode, math, spec.xla, device)
            batches: Any = (
                real_batches(torch, run.trained, spec.batch_size, spec.size, spec.seed, device)
                if run.trained is not None
                else synthetic(torch, spec.batch_size, spec.size, run.classes, spec.seed, device)
            )
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
            )
            peak = int(torch.cuda.max_memory_allocated(device)) if gpu else None
            summary = dataclasses.replace(summary, startup_seconds=startup, gpu_memory_peak_bytes=peak)
            if run.held is not None:
                images, correct, loss = evaluate(torch, model, run.held, spec.batch_size, spec.size, math, device)
                emitter.emit(AccuracyEvent(images=images, correct=correct, loss=loss, t=time.time()))
        emitter.emit(summary)


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


def make_step(torch: ModuleType, model: Any, mode: str, math: str, compile_: bool, device: Any) -> Any:
    """A step returning a float32 scalar tensor that depends on the whole computation: the loss of a training
    step (SGD, learning rate 0.01, momentum 0.9, as TensorFlow's), the sum of the logits in inference. Under
    autocast the model computes in 16 bit, the loss in float32; float16 scales the loss (GradScaler)."""
    dtype = getattr(torch, AUTOCAST[math]) if math in AUTOCAST else None
    forward = torch.compile(model) if compile_ else model

    def cast() -> Any:
        if dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=device.type, dtype=dtype)

    if mode == "infer":
        model.eval()

        def infer(images: Any, labels: Any) -> Any:
            with torch.no_grad(), cast():
                return forward(images).float().sum()

        return infer
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler(device.type, enabled=math == "mixed_float16")
    loss_fn = torch.nn.CrossEntropyLoss()

    def train(images: Any, labels: Any) -> Any:
        optimizer.zero_grad(set_to_none=True)
        with cast():
            logits = forward(images)
        loss = loss_fn(logits.float(), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss.detach()

    return train


def synthetic(torch: ModuleType, batch: int, size: int, classes: int, seed: int, device: Any) -> Any:
    """The same batch forever, on the device: the benchmark sees no input pipeline at all."""
    gen = torch.Generator().manual_seed(seed)
    images = torch.rand((batch, 3, size, size), generator=gen).to(device)
    labels = torch.randint(0, classes, (batch,), generator=gen).to(device)
    if device.type == "cuda":
        images = images.contiguous(memory_format=torch.channels_last)
    while True:
        yield images, labels


def _load(path: str, size: int) -> Any:
    """A JPEG decoded, resized to (size, size) bilinear, as float32 CHW in [0, 1] (Pillow, not torchvision)."""
    import numpy as np
    from PIL import Image

    with Image.open(path) as img:
        rgb = img.convert("RGB").resize((size, size), Image.Resampling.BILINEAR)
    return np.asarray(rgb, dtype=np.float32).transpose(2, 0, 1) / 255.0


def real_batches(torch: ModuleType, index: Any, batch: int, size: int, seed: int, device: Any) -> Any:
    """The files read from disk every step, shuffled each pass (seeded), decoded in worker processes, in
    batches of `batch` (the last short one dropped), forever."""
    from torch.utils.data import DataLoader, Dataset

    files, labels = list(index.files), list(index.labels)

    class Files(Dataset):
        def __len__(self) -> int:
            return len(files)

        def __getitem__(self, i: int) -> tuple[Any, int]:
            return torch.from_numpy(_load(files[i], size)), labels[i]

    gen = torch.Generator().manual_seed(seed)
    workers = min(4, len(os.sched_getaffinity(0)))
    loader = DataLoader(
        Files(),
        batch_size=batch,
        shuffle=True,
        drop_last=True,
        num_workers=workers,
        generator=gen,
        persistent_workers=workers > 0,
        pin_memory=device.type == "cuda",
    )
    while True:
        for images, y in loader:
            yield images.to(device, non_blocking=True), y.to(device, non_blocking=True)


def evaluate(
    torch: ModuleType, model: Any, index: Any, batch: int, size: int, math: str, device: Any
) -> tuple[int, int, float]:
    """(images, right at top-1, mean cross-entropy loss) of the model in inference on the held-out images,
    in file order."""
    model.eval()
    dtype = getattr(torch, AUTOCAST[math]) if math in AUTOCAST else None
    images = correct = 0
    total = 0.0
    files, labels = list(index.files), list(index.labels)
    with torch.no_grad():
        for start in range(0, len(files), batch):
            x = torch.stack([torch.from_numpy(_load(f, size)) for f in files[start : start + batch]]).to(device)
            y = torch.tensor(labels[start : start + batch], device=device)
            with torch.autocast(device.type, dtype=dtype) if dtype else contextlib.nullcontext():
                logits = model(x).float()
            correct += int((logits.argmax(dim=1) == y).sum())
            total += float(torch.nn.functional.cross_entropy(logits, y, reduction="sum"))
            images += len(y)
    return images, correct, total / images if images else float("nan")
