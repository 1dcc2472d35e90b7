"""Containers as targets: a container target wraps the target it runs on (bare metal here or over
SSH; a VM later), so "container on VM" is composition, not another code path.

The command lines are the runtime's (`dltestbed.runtimes`: docker, podman); they run through the
wrapped target, on the host's own CLI.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Unpack

from dltestbed.config import missing_cpu, parse_cpu_list
from dltestbed.errors import ConfigError, TargetError
from dltestbed.owner import BENCH_LABEL, OWNER_LABEL, RUN_LABEL, installation_id
from dltestbed.results.records import new_id
from dltestbed.runtimes import CONTAINER_CACHE, CONTAINER_DATA, CONTAINER_USER, ContainerOptions, Runtime
from dltestbed.shield import shielded
from dltestbed.sizes import SIZE_RE
from dltestbed.targets.base import INTERRUPT, Abort, CommandResult, RunOptions, Target

VENV_PYTHON = "/opt/dltestbed/venv/bin/python"


def limits(opts: ContainerOptions) -> str:
    """The container's resource limits in words ("" when none): part of what a run's result depends on."""
    parts = [
        f"cpuset {opts.cpuset}" if opts.cpuset else "",
        f"memory {opts.memory}" if opts.memory else "",
        f"NUMA node {opts.numa_node}" if opts.numa_node is not None else "",
    ]
    return ", ".join(p for p in parts if p)


def check_limits(
    cpuset: str | None,
    memory: str | None,
    cpus: set[int] | None = None,
    names: tuple[str, str] = ("--container-cpuset", "--container-memory"),
) -> None:
    """A ConfigError line for a CPU set or memory limit the runtimes would refuse; `cpus`: the CPUs the
    machine has, when known (this machine); `names`: the option or variable each came from."""
    if cpuset is not None:
        try:
            wanted = parse_cpu_list(cpuset)
        except ValueError as exc:
            raise ConfigError(f"{names[0]}: {exc}") from None
        why = missing_cpu(wanted, cpus) if cpus is not None else None
        if why:
            raise ConfigError(f"{names[0]} {cpuset}: {why}")
    if memory is not None and not SIZE_RE.match(memory):
        raise ConfigError(f"{names[1]}: a size like 4g or 512m (got {memory!r})")


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}
GPUS_RE = re.compile(r"^(auto|none|all|\d+(,\d+)*|GPU-[0-9a-fA-F-]+(,GPU-[0-9a-fA-F-]+)*)$")


def options_from_vars(v: Mapping[str, object]) -> ContainerOptions:
    """Container options from inventory variables (dltestbed_container_*); see inventory/README."""

    def text(key: str) -> str | None:
        value = v.get(f"dltestbed_container_{key}")
        return None if value is None or value == "" else str(value)

    def items(key: str) -> tuple[str, ...]:
        value = v.get(f"dltestbed_container_{key}") or ()
        if isinstance(value, str):
            return (value,)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"dltestbed_container_{key} must be a list (got {value!r})")
        return tuple(str(x) for x in value)

    gpus = text("gpus") or "auto"
    if not GPUS_RE.match(gpus):
        raise ConfigError(f"dltestbed_container_gpus: auto, none, all, indices like 0,1 or GPU UUIDs (got {gpus!r})")
    numa = text("numa_node")
    if numa is not None and not numa.isdigit():
        raise ConfigError(f"dltestbed_container_numa_node must be a node number (got {numa!r})")
    privileged = str(v.get("dltestbed_container_privileged", "")).lower()
    if privileged not in _TRUE | _FALSE:
        raise ConfigError(f"dltestbed_container_privileged: true or false (got {privileged!r})")
    check_limits(text("cpuset"), text("memory"), names=("dltestbed_container_cpuset", "dltestbed_container_memory"))
    return ContainerOptions(
        gpus=None if gpus == "none" else gpus,
        cpuset=text("cpuset"),
        memory=text("memory"),
        network=text("network") or "host",
        numa_node=int(numa) if numa is not None else None,
        privileged=privileged in _TRUE,
        cap_add=items("cap_add"),
        volumes=items("volumes"),
        extra=items("args"),
    )


class ContainerTarget:
    """A container on the machine of `inner` (kind cbm on bare metal, cvm in a VM)."""

    def __init__(
        self,
        inner: Target,
        runtime: Runtime,
        image: str,
        digest: str,
        opts: ContainerOptions | None = None,
        kind: str = "cbm",
        runtime_env: Mapping[str, str] | None = None,
        data_source: str | None = None,
        as_user: str | None = None,
        cache_source: str | None = None,
    ) -> None:
        self.inner = inner
        self.runtime = runtime
        self.image = image
        self.digest = digest
        self.opts = opts or ContainerOptions(gpus="auto")
        self.kind = kind
        self.runtime_env = dict(runtime_env or {})  # for the runtime's CLI on the host (e.g. CONTAINERS_CONF)
        self.name = f"{inner.name}/{runtime.name}"
        self.host = inner.host
        self.machine = inner.machine
        self.remote = inner.remote
        self.peer_address = inner.peer_address  # host networking
        self.python = VENV_PYTHON
        self.data_source = data_source  # the dataset on the inner machine, mounted read-only at data_dir
        self.data_dir = CONTAINER_DATA if data_source else None
        self.cache_source = cache_source  # the bench's compile caches on the inner machine, mounted at compile_cache
        self.compile_cache = CONTAINER_CACHE if cache_source else None
        # --as-user: a rootless runtime's CLI runs as that user (inner drops to it); a rootful one's container
        # takes its uid and gid (resolved on the host)
        self.as_user = as_user

    def fingerprint(self) -> Mapping[str, str]:
        """The layer facts: which runtime, which image (by digest), its limits, on which machine."""
        lim = limits(self.opts)
        return {
            **self.inner.fingerprint(),
            "target_kind": self.kind,
            "container_runtime": self.runtime.name,
            "container_image_tag": self.image,
            "container_image_digest": self.digest,
            **({"container_limits": lim} if lim else {}),
            **({"run_as_user": self.as_user} if self.as_user else {}),
        }

    def abort(self, why: Abort = INTERRUPT) -> None:
        """Stop the run in progress (its inner command); `run` then removes the container by name."""
        self.inner.abort(why)

    def confine(self, gpu: str, cpus: str | None) -> None:
        """--gpus per-gpu: the container is given this GPU alone (by UUID) and, unless the layout pins its CPUs
        itself (a cpuset, or a NUMA node: the layout's pin is kept), that GPU's NUMA node's CPUs. A layout that
        limited the containers to some GPUs, or to none, is one ConfigError (all, or auto, narrows to the GPU)."""
        opts = self.opts
        if opts.gpus == gpu:
            return  # confined already
        if opts.gpus not in ("auto", "all"):
            chose = "no GPU" if opts.gpus is None else f"GPUs {opts.gpus}"
            raise ConfigError(
                f"{self.host}: --gpus per-gpu gives each container its GPU, but the layout gives them {chose} "
                "(dltestbed_container_gpus): leave that at auto, or bench without --gpus per-gpu"
            )
        pinned = opts.cpuset is not None or opts.numa_node is not None
        self.opts = replace(opts, gpus=gpu, cpuset=opts.cpuset if pinned else cpus)

    def _probe(self, argv: list[str]) -> tuple[int, list[str]]:
        lines: list[str] = []
        try:
            res = self.inner.run(argv, timeout=60, on_line=lines.append)
        except TargetError:
            return 127, []
        return res.returncode, lines

    def _resolve(self) -> ContainerOptions:
        """Fill in what only the host knows: its GPUs for gpus=auto, a NUMA node's CPUs."""
        opts = self.opts
        changes: dict[str, object] = {}
        if opts.gpus == "auto":
            rc, lines = self._probe(["nvidia-smi", "-L"])
            changes["gpus"] = "all" if rc == 0 and any(line.startswith("GPU ") for line in lines) else None
        if opts.numa_node is not None and not (opts.numa_cpus or opts.cpuset):
            rc, lines = self._probe(["cat", f"/sys/devices/system/node/node{opts.numa_node}/cpulist"])
            if rc != 0 or not lines:
                raise TargetError(f"{self.host}: NUMA node {opts.numa_node} does not exist there")
            changes["numa_cpus"] = lines[0].strip()
        if self.as_user and opts.user is None:  # the container runs as the user's uid and gid (Charliecloud: always)
            ids = [self._probe(["id", flag, self.as_user]) for flag in ("-u", "-g")]
            if any(rc != 0 or not lines for rc, lines in ids):
                raise TargetError(f"{self.host}: user {self.as_user} does not exist there")
            changes["user"] = ":".join(lines[0].strip() for _, lines in ids)
        if changes:
            self.opts = ContainerOptions(**{**opts.__dict__, **changes})
        return self.opts

    def writer(self) -> str | None:
        """The uid:gid the workload writes a mounted folder as, where that is not the user the runtime's CLI runs
        as (a rootful runtime: the image's user, or --as-user's); None where it is (Charliecloud; rootless Podman
        with --as-user, whose uid keep-id keeps). A TargetError where the folder cannot be given to it: rootless
        Podman's image user is a subordinate uid of the CLI's user."""
        if self.runtime.runs_as_cli_user:
            return None
        user = self._resolve().user or CONTAINER_USER
        if not self.runtime.rootless:
            return user
        if self.as_user:
            return None
        raise TargetError(
            f"{self.runtime.name} runs the container as {user}, a subordinate uid of the user its CLI runs as"
        )

    def run(self, argv: Sequence[str], **options: Unpack[RunOptions]) -> CommandResult:
        """Run argv in a fresh container; the container is removed afterwards, whatever happened."""
        env = options.get("env")
        name = f"dltestbed-{new_id('c').split('-', 1)[1]}"
        opts = self._resolve()
        extra_env = (("DLTESTBED_IMAGE_DIGEST", self.digest), *((env or {}).items()))
        mounts = (
            *([f"{self.data_source}:{CONTAINER_DATA}:ro"] if self.data_source else []),
            *([f"{self.cache_source}:{CONTAINER_CACHE}"] if self.cache_source else []),
        )
        ids = {k: v for k, v in (env or {}).items() if k in ("DLTESTBED_BENCH_ID", "DLTESTBED_RUN_ID")}
        labels = (
            (OWNER_LABEL, installation_id()),
            (BENCH_LABEL, ids.get("DLTESTBED_BENCH_ID", "-")),
            (RUN_LABEL, ids.get("DLTESTBED_RUN_ID", "-")),
        )
        opts = ContainerOptions(
            **{
                **opts.__dict__,
                "env": (*opts.env, *extra_env),
                "labels": (*opts.labels, *labels),
                "volumes": (*opts.volumes, *mounts),
            }
        )
        command = self.runtime.run_argv(self.image, name, argv, opts)
        try:
            on_host: RunOptions = {**options, "env": self.runtime_env}  # the workload's env went into the container
            return self.inner.run(command, **on_host)
        finally:
            # a second Ctrl-C waits for the removal; a host that is gone: nothing more to do
            with shielded(), contextlib.suppress(TargetError):
                for after in (self.runtime.remove_argv(name), self.runtime.after_argv()):
                    if after:
                        self.inner.run(after, env=self.runtime_env, timeout=60)
