"""TensorFlow with Keras 3: a model's run as MultiWorkerMirroredStrategy (a distributed job, its cluster in
TF_CONFIG), MirroredStrategy (--gpus node) or one device. TensorFlow loads inside `run_model` only, after
the environment (CUDA_VISIBLE_DEVICES, TF_CPP_MIN_LOG_LEVEL) is set."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.metadata as md
import os
import time
from collections.abc import Mapping, Sequence
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING, Any

from dltestbed.choices import NODE
from dltestbed.errors import ConfigError
from dltestbed.workload.events import AccuracyEvent, StartEvent
from dltestbed.workload.frameworks.base import Framework, ModelRun, ProbeFramework, ProbeSetup, register
from dltestbed.workload.frameworks.tensorflow import data, distributed, models, precision, steps
from dltestbed.workload.frameworks.tensorflow import gpu as tfgpu

if TYPE_CHECKING:
    from dltestbed.config import WorkloadSpec
    from dltestbed.workload.distributed import Cluster
    from dltestbed.workload.emit import Emitter


@register
class TensorFlow(Framework):
    """TensorFlow 2 with Keras 3 (tensorflow-cpu, or tensorflow[and-cuda])."""

    name = "tensorflow"
    label = "TensorFlow"
    version_key = "tensorflow"
    node_jobs = True
    packages = MappingProxyType({"cpu": "tensorflow-cpu", "gpu": "tensorflow[and-cuda]"})
    distributions = ("tensorflow-cpu", "tensorflow")
    extra = "cpu"
    package_fact = "tensorflow"  # either distribution
    stack_facts = ("tensorflow", "tensorflow_git", "keras", "onednn")  # "op determinism ... same hardware and software"
    build_facts = ("tensorflow", "tensorflow_cuda_build", "tensorflow_cuda", "tensorflow_cudnn")
    imports = ("tensorflow", "keras")

    @classmethod
    def installed(cls) -> tuple[str, bool] | None:
        """`tensorflow` (the CUDA build on Linux) or `tensorflow-cpu`."""
        for dist, cuda in (("tensorflow", True), ("tensorflow-cpu", False)):
            with contextlib.suppress(md.PackageNotFoundError):
                md.version(dist)
                return dist, cuda
        return None

    def worker_env(self, workers: Sequence[str], index: int) -> dict[str, str]:
        """TF_CONFIG: the cluster's workers and this one's index."""
        return {"TF_CONFIG": distributed.tf_config(list(workers), index)}

    def cluster(self, environ: Mapping[str, str]) -> Cluster:
        """The cluster of TF_CONFIG."""
        return distributed.cluster_from_env(environ.get("TF_CONFIG"))

    def for_probes(self, setup: ProbeSetup) -> ProbeFramework:
        """TensorFlow, its GPUs configured (growth or a slice), and MultiWorkerMirroredStrategy for a job, or
        MirroredStrategy over every GPU of this machine (`node`: NCCL's all-reduce; without a GPU, `cpu_devices`
        logical CPU devices)."""
        # lazy: its probes and checks, the probes' mode only (as TensorFlow itself)
        from dltestbed.workload.frameworks.tensorflow import checks, probes

        tf = importlib.import_module("tensorflow")
        cluster, fingerprint = setup.cluster, setup.fingerprint
        if setup.cpu_devices is not None:  # before the runtime starts, as GPU memory's settings
            tfgpu.split_cpu(tf, setup.cpu_devices)
        gpu_count = tfgpu.configure(tf, setup.memory_mib)  # before anything touches a GPU
        strategy, agree = None, None
        if cluster:  # before any other TensorFlow op; it waits here for every worker
            strategy = distributed.strategy(tf, gpu_count)
            fingerprint.update(distributed.job_facts(strategy, cluster, distributed.collective(gpu_count)))
            agree = probes.agreeing(tf, strategy)
        elif setup.node:
            strategy, collective = distributed.node(tf, gpu_count)
            fingerprint.update(distributed.job_facts(strategy, None, collective))
        visible = len(tf.config.list_physical_devices("GPU"))
        fingerprint.update(facts(tf, setup.gpus))
        return ProbeFramework(tf, visible, strategy, agree, probes.PROBES, checks)

    def build(self, fingerprint: Mapping[str, Any]) -> str:
        """Its version and whether it is the CUDA build."""
        cuda = "CUDA" if fingerprint.get("tensorflow_cuda_build") else "CPU"
        return f"{self.label} {fingerprint.get(self.version_key)} ({cuda} build)"

    def run_model(self, run: ModelRun, emitter: Emitter) -> None:
        """Configure the devices (and the strategy) before any op, resolve the math, emit the start, then run
        the steps with the sampler and the GPU health watch around them."""
        # Keras loads TensorFlow: only the modes that run a model load it
        import keras
        import tensorflow as tf

        # lazy: TensorFlow, NVML, the CUDA runtime load only in the modes that use them
        from dltestbed.workload import fingerprint, loop
        from dltestbed.workload.sampler import Sampler, watched

        spec, cluster = run.spec, run.cluster
        gpu_count, strategy, local, math = _devices(tf, run)
        used = {"math": math, "device_used": "gpu" if gpu_count else "cpu", "revision": self.model_revision(spec.model)}
        resolved = spec.model_dump() | {"image_size": spec.size, "classes": run.classes, **used}
        emitter.emit(StartEvent(spec=resolved, fingerprint=run.fingerprint, t=time.time()))

        tf.config.list_logical_devices()  # the runtime starts here, so the sampler may ask its allocator
        sampler = Sampler(emitter.emit, spec.sample_interval, run.nvml, lambda: tfgpu.in_use(tf, gpu_count))
        with contextlib.ExitStack() as running:  # unwinds in reverse: sampler, health after, NVML closed
            if run.nvml:
                running.callback(run.nvml.close)
            running.enter_context(watched(run.nvml, emitter.emit, sampler))
            running.enter_context(sampler.running())
            precision.apply(tf, keras, math)
            keras.utils.set_random_seed(spec.seed)  # the same initial weights on every worker (and every target)
            if spec.deterministic:  # after the seed: TensorFlow refuses op determinism without one
                tf.config.experimental.enable_op_determinism()
            model, step = _step(tf, keras, spec, run.classes, math, strategy)
            first = spec.seed + (cluster.index if cluster else 0) * local  # each replica its own data

            def batches_of(replica: int) -> Any:
                if run.trained is not None:
                    return data.real(tf, run.trained, spec.batch_size, spec.size, first + replica)
                return data.synthetic(tf, spec.batch_size, spec.size, run.classes, first + replica)

            batches = batches_of(0) if strategy is None else steps.per_replica(strategy, batches_of, local)
            startup = time.time() - run.process_start()
            summary = loop.run(
                step,
                batches,
                spec.batch_size * local,  # the images of one step on this worker: every local replica's batch
                spec.warmup,
                spec.steps,
                emitter.emit,
                require_gpu=spec.device == "gpu" and strategy is None,  # a strategy's result is reduced off the GPUs
                libraries=fingerprint.loaded_cuda if gpu_count else None,
                warmed=(lambda: tfgpu.reset_peak(tf, gpu_count)) if gpu_count else None,
                agree=distributed.every_worker(tf, strategy) if cluster else None,
            )
            peak = tfgpu.peak(tf, gpu_count) if gpu_count else None
            summary = dataclasses.replace(summary, startup_seconds=startup, gpu_memory_peak_bytes=peak)
            if run.held is not None:
                held = data.held_out(tf, run.held, spec.batch_size, spec.size)
                images, correct, loss = data.evaluate(tf, keras, model, held)
                emitter.emit(AccuracyEvent(images=images, correct=correct, loss=loss, t=time.time()))
        emitter.emit(summary)


def _devices(tf: ModuleType, run: ModelRun) -> tuple[int, Any, int, str]:
    """Before any other op: the CPU's logical devices, GPU memory's settings and the strategy (a distributed
    job's, or --gpus node's); then the math resolved, and the fingerprint given TensorFlow's facts and the job's.
    The GPUs TensorFlow sees, the strategy (None: one device), the replicas on this worker, and the math."""
    # lazy: TensorFlow loads only in the modes that run a model
    from dltestbed.workload import mathmode

    spec, cluster, fp = run.spec, run.cluster, run.fingerprint
    if spec.cpu_devices is not None:  # before the runtime starts, as GPU memory's settings
        tfgpu.split_cpu(tf, spec.cpu_devices)
    gpu_count = tfgpu.configure(tf, spec.gpu_memory_mib)  # before anything touches a GPU
    strategy, collective = None, ""
    if cluster:  # before any other TensorFlow op
        strategy, collective = distributed.strategy(tf, gpu_count), distributed.collective(gpu_count)
    elif spec.gpus == NODE:
        strategy, collective = distributed.node(tf, gpu_count)
    math = mathmode.resolve(spec.math, precision.capabilities(tf) if spec.device != "cpu" else [])
    if spec.device == "gpu" and not gpu_count:
        raise ConfigError(f"--device gpu: no GPU is visible to TensorFlow on {fp['host']}")
    fp.update(facts(tf, run.gpus))
    if strategy is not None:
        fp.update(distributed.job_facts(strategy, cluster, collective))
    return gpu_count, strategy, int(fp.get("local_replicas", 1)), math


def _step(
    tf: ModuleType, keras: ModuleType, spec: WorkloadSpec, classes: int, math: str, strategy: Any
) -> tuple[Any, Any]:
    """The model built and its step compiled, under the strategy's scope when the run is distributed."""
    # lazy: Keras and TensorFlow load only in the modes that run a model
    from dltestbed.workload import mathmode

    how = {"loss_scale": mathmode.loss_scaled(math), "xla": spec.xla}
    if strategy is None:
        model = models.build(spec.model, spec.size, classes)
        return model, steps.make_step(tf, keras, model, spec.mode, **how)
    with strategy.scope():
        model = models.build(spec.model, spec.size, classes)
        return model, steps.make_step(tf, keras, model, spec.mode, strategy, spec.batch_size, **how)


def facts(tf: ModuleType, gpus: list[dict[str, Any]]) -> dict[str, Any]:
    """The TensorFlow build and the GPUs it sees (NVML details merged in by index)."""
    build = dict(tf.sysconfig.get_build_info())
    visible = tf.config.list_physical_devices("GPU")
    # Keras loads TensorFlow: only the modes that run a model load it
    import keras

    return {
        "tensorflow": tf.version.VERSION,
        "tensorflow_git": tf.version.GIT_VERSION,
        "tensorflow_cuda_build": bool(build.get("is_cuda_build", False)),
        "tensorflow_cuda": build.get("cuda_version"),
        "tensorflow_cudnn": build.get("cudnn_version"),
        "keras": keras.__version__,
        "onednn": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default"),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "gpus_visible_to_tf": len(visible),
        "gpus": gpus,
    }
