"""TensorFlow's distributed job, as a worker sees it: its cluster, parsed from TF_CONFIG (pure), its strategy
(MultiWorkerMirroredStrategy between workers, MirroredStrategy over one machine's GPUs) and what the run's
fingerprint says of it."""

from __future__ import annotations

import json
from collections.abc import Callable
from types import ModuleType
from typing import Any

from dltestbed.errors import ConfigError
from dltestbed.workload.distributed import COLLECTIVE_TIMEOUT, Cluster


def collective(gpus: int) -> str:
    """The collective implementation a job asks for: NCCL where the worker has GPUs (TensorFlow's AUTO
    may pick its own ring on GPUs too), else TensorFlow's ring (NCCL runs on GPUs only)."""
    return "NCCL" if gpus else "RING"


def strategy(tf: ModuleType, gpus: int = 0) -> Any:
    """The job's MultiWorkerMirroredStrategy with its collective implementation named (`collective`), its
    collectives bounded by COLLECTIVE_TIMEOUT: a peer that is gone fails the run instead of hanging it.
    Made before any other TensorFlow op; it waits here for every worker."""
    implementation = getattr(tf.distribute.experimental.CommunicationImplementation, collective(gpus))
    options = tf.distribute.experimental.CommunicationOptions(
        timeout_seconds=COLLECTIVE_TIMEOUT, implementation=implementation
    )
    return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)


def every_worker(tf: ModuleType, strategy: Any) -> Callable[[bool], bool]:
    """Whether a condition holds on every worker of the job (a sum over its replicas, each worker's flag
    counted once per replica): a collective, so every worker asks it at the same step."""
    holder = tf.Variable([0.0], dtype=tf.float32, trainable=False)

    @tf.function
    def total() -> Any:  # the variable is captured: MultiWorkerMirroredStrategy places it per replica
        ctx = tf.distribute.get_replica_context
        return strategy.run(lambda: ctx().all_reduce(tf.distribute.ReduceOp.SUM, holder + 0.0))

    def agree(flag: bool) -> bool:
        holder.assign([1.0 if flag else 0.0])
        got = strategy.experimental_local_results(total())[0]
        return float(tf.reshape(got, [-1])[0]) >= float(strategy.num_replicas_in_sync) - 0.5

    return agree


def local_replicas(strategy: Any, workers: int) -> int:
    """The replicas (devices) each worker runs: the strategy's replicas in sync over its workers
    (MultiWorkerMirroredStrategy needs the same number of local devices on every worker)."""
    total = int(strategy.num_replicas_in_sync)
    if total % workers:
        raise ConfigError(f"{total} replicas do not divide among {workers} workers: every worker needs as many GPUs")
    return total // workers


def node(tf: ModuleType, gpus: int) -> tuple[Any, str]:
    """Every GPU of this machine in one data-parallel job (MirroredStrategy), NCCL's all-reduce between them;
    without a GPU, every logical CPU device (workload --cpu-devices), reduced on one of them. With the name
    of its all-reduce."""
    if gpus:
        devices = [f"/gpu:{i}" for i in range(gpus)]
        return tf.distribute.MirroredStrategy(devices, cross_device_ops=tf.distribute.NcclAllReduce()), "NCCL"
    devices = [d.name for d in tf.config.list_logical_devices("CPU")]
    reduce = tf.distribute.ReductionToOneDevice(reduce_to_device=devices[0])
    return tf.distribute.MirroredStrategy(devices, cross_device_ops=reduce), "ReductionToOneDevice"


def job_facts(strategy: Any, cluster: Cluster | None, collective: str) -> dict[str, int | str]:
    """What a run's fingerprint says of its job: this worker among the workers (one, without a cluster), the
    replicas (a replica per device: a worker with L GPUs runs L of them, each on its own batch) and the
    all-reduce between them."""
    workers, index = (cluster.size, cluster.index) if cluster else (1, 0)
    local = local_replicas(strategy, workers)
    return {
        "worker_index": index,
        "workers": workers,
        "replicas": local * workers,
        "local_replicas": local,
        "collective": collective,
    }


def cluster_from_env(tf_config: str | None) -> Cluster:
    """The cluster of a TF_CONFIG value, or a ConfigError saying what is wrong with it."""
    if not tf_config:
        raise ConfigError("--distributed needs TF_CONFIG in the environment (the controller sets it)")
    try:
        cfg = json.loads(tf_config)
        workers = cfg["cluster"]["worker"]
        task = cfg["task"]
        index = task["index"]
    except (ValueError, KeyError, TypeError):
        shape = "{'cluster': {'worker': [...]}, 'task': {'type': 'worker', 'index': N}}"
        raise ConfigError(f"TF_CONFIG is not {shape}") from None
    if task.get("type") != "worker":
        raise ConfigError(f"TF_CONFIG task type {task.get('type')!r}: only 'worker' is supported")
    if not isinstance(workers, list) or len(workers) < 2 or not all(isinstance(w, str) for w in workers):
        raise ConfigError("TF_CONFIG must list at least 2 workers as host:port strings")
    if not isinstance(index, int) or not 0 <= index < len(workers):
        raise ConfigError(f"TF_CONFIG task index {index!r} is not one of the {len(workers)} workers")
    return Cluster(tuple(workers), index)


def tf_config(workers: list[str], index: int) -> str:
    """The TF_CONFIG value for worker `index` of a cluster."""
    return json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})
