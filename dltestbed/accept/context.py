"""What every stage of an acceptance reads (its request, level, nodes, progress and the stages before it) and
how it runs a bench: through `run_bench`, on bare metal, into the acceptance's store."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol, TypeVar

import yaml

from dltestbed import hints
from dltestbed.accept.found import Facts, Found, Rejoined, decode
from dltestbed.accept.levels import Level
from dltestbed.accept.state import State
from dltestbed.choices import Device
from dltestbed.config import DEFAULT_FRAMEWORK
from dltestbed.errors import ConfigError
from dltestbed.orchestrate import (
    BenchObserver,
    BenchRequest,
    Options,
    Repetitions,
    Where,
    Workloads,
    run_bench,
)
from dltestbed.requests.accept import AcceptRequest
from dltestbed.results.records import RunRecord
from dltestbed.results.store import Store
from dltestbed.workload.frameworks import REGISTRY as FRAMEWORKS

F = TypeVar("F", bound=Found, covariant=True)
G = TypeVar("G", bound=Found)


class Finding(Protocol[F]):
    """A stage (its class) as what it found is read back: its name and the type of its finding (stages.Stage)."""

    @property
    def name(self) -> str: ...

    @property
    def found(self) -> type[F]: ...


BARE_METAL = ("bm",)  # acceptance measures the nodes themselves
PREFLIGHT = "preflight"  # the stage whose facts say whether the nodes have GPUs
REJOIN = "rejoin"  # the stage that measures the nodes left out again, once mended (--resume)


@dataclass
class Ctx:
    """What every stage reads: the request, its level, the nodes, the progress, and the stages before it."""

    request: AcceptRequest
    level: Level
    nodes: tuple[str, ...]
    inventory_digest: str
    observer: BenchObserver
    state: State
    init: bool = False  # accept --init: only what becomes an expected value is measured (no screen)

    def found(self, stage: Finding[F]) -> F:
        """What a finished stage found (its type's defaults when it did not run)."""
        return self._found(stage.name, stage.found)

    def _found(self, name: str, kind: type[G]) -> G:
        rec = self.state.stages.get(name)
        return decode(kind, rec.data) if rec is not None else kind()

    @property
    def out(self) -> dict[str, tuple[str, str]]:
        """The nodes left out of the stages after the one that could not reach, provision or measure them:
        node → (that stage, why), from the finished stages' data ("out")."""
        found: dict[str, tuple[str, str]] = {}
        for name, rec in self.state.stages.items():
            if name == REJOIN:
                continue
            for node, why in decode(Found, rec.data).out.items():
                found.setdefault(node, (name, why))
        back = self._found(REJOIN, Rejoined)  # a resume that tried them again: those that came back, those still out
        for node in back.rejoined:
            found.pop(node, None)
        for node, why in back.out.items():
            found[node] = (REJOIN, why)
        return found

    @property
    def live(self) -> tuple[str, ...]:
        """The nodes the stages still measure: every node not left out."""
        out = self.out
        return tuple(n for n in self.nodes if n not in out)

    @property
    def resume(self) -> str:
        """The command that goes on with this acceptance, as a hint says it."""
        command = hints.accept_resume(self.request.nodes.inventory, self.request.pack.out, self.init)
        return f"`{command}` {hints.SAME_OPTIONS}"

    def where(self, nodes: Sequence[str], device: Device, parallel: bool | None) -> Where:
        """A bench's nodes (on bare metal) as the acceptance runs them: at once (at most --parallel N), or one by one
        (--parallel 1); `parallel` given: all at once, or one by one, whatever --parallel says."""
        cap = self.request.nodes.parallel
        at_once = (cap != 1, cap if cap not in (None, 1) else None) if parallel is None else (parallel, None)
        return Where(
            targets=BARE_METAL,
            device=device,
            inventory=self.request.nodes.inventory,
            limit=",".join(nodes),
            parallel=at_once[0],
            hosts_at_once=at_once[1],
        )

    def data_benches(self, stage: str) -> list[str]:
        """The benches a finished stage stored ([] when it did not run)."""
        rec = self.state.stages.get(stage)
        return list(rec.benches) if rec is not None else []

    @property
    def framework(self) -> str:
        """What the models and probes compute with: the request's, else the one preflight found on every node,
        else (preflight's own bench, which loads none) the one installed here."""
        return self.request.nodes.framework or self._found(PREFLIGHT, Facts).framework or installed_here()

    @property
    def gpu(self) -> bool:
        """Whether the nodes have GPUs (as preflight saw them): the GPU checks, else the CPU's."""
        return bool(self._found(PREFLIGHT, Facts).gpus)

    def bench(
        self,
        workloads: Workloads,
        *,
        limit: Sequence[str] | None = None,
        scenario: Options | None = None,
        repeat: int = 1,
        device: Device = "auto",
        parallel: bool | None = None,
    ) -> str:
        """Run one bench on the nodes still measured (or `limit`'s) on `device`, and return its id; the nodes at
        once as `where` says."""
        w = replace(workloads, frameworks=(self.framework,))
        where = self.where(self.live if limit is None else limit, device, parallel)
        req = BenchRequest(
            w, where, Repetitions(repeat=str(repeat)), scenario or Options(), results=self.request.pack.results
        )
        return run_bench(req, self.observer).bench_id

    def runs(self, benches: Sequence[str]) -> list[RunRecord]:
        """The foreground runs of `benches` in the acceptance's store, in order (read_runs, the store opened for it)."""
        store = Store.open(self.request.pack.results, read_only=True)
        try:
            return read_runs(store, benches)
        finally:
            store.close()


def installed_here() -> str:
    """The framework installed on this machine, the default first (package metadata, nothing imported)."""
    found = [name for name, fw in FRAMEWORKS.items() if fw.installed() is not None]
    return DEFAULT_FRAMEWORK if DEFAULT_FRAMEWORK in found or not found else found[0]


def frameworks_in(packages: Mapping[str, str]) -> set[str]:
    """The frameworks a node has, from its fingerprint's packages (their distributions' versions)."""
    return {n for n, fw in FRAMEWORKS.items() if set(fw.distributions) & set(packages)}


def on_every_node(packages: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The frameworks whose distribution every node has (its fingerprint's packages), the default first."""
    have = [frameworks_in(p) for p in packages.values()]
    common = set.intersection(*have) if have else set()
    return sorted(common, key=lambda n: (n != DEFAULT_FRAMEWORK, n))


def golden_spec(path: Path | None) -> dict[str, str] | None:
    """The golden spec: a YAML mapping of fact → value (drift.FACTS' names), or one line."""
    if path is None:
        return None
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"--golden {str(path)!r}: cannot read ({exc.strerror})") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--golden {str(path)!r}: not YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(doc, dict) or not doc:
        raise ConfigError(f"--golden {str(path)!r}: give a mapping of fact to value, e.g. 'driver: 570.133.20'")
    return {str(k): str(v) for k, v in doc.items()}


def read_runs(store: Store, benches: Sequence[str]) -> list[RunRecord]:
    """The foreground runs of `benches`, in order."""
    return [r for b in benches for r in store.runs(bench_id=b) if r.role == "foreground"]
