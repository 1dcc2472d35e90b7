"""Group runs and summarise repetitions: mean, min, max, std, overhead % against bare metal. Pure."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from dltestbed.report.inference import (
    ROBUST_Z,
    Effect,
    cv,
    paired,
    robust_z,
    slow_outliers,
    steady_state,
    tost,
    verdict,
    welch,
)
from dltestbed.results.records import RunRecord

BASELINE_KIND = "bm"

# A group holds runs that measured the same thing on the same kind of target. Runs that differ in
# batch size, image size or device are never averaged together.
# vm_image: a VM booted from a user's own image is a layer of its own, beside dltestbed's guest image.
# arm: "A′", the baseline kind's second run per repetition (--aa), compared with the first: the noise floor.
GROUP_FIELDS = ("target_kind", "vm_image", "arm", "scenario", "workers", "model", "data", "mode", "device",
                "batch_size", "image_size", "warmup", "steps", "contention")  # fmt: skip
LAYER_FIELDS = ("target_kind", "vm_image", "arm")  # what is compared; the rest must match for an overhead
COMPARE_FIELDS = tuple(f for f in GROUP_FIELDS if f not in LAYER_FIELDS)


@dataclass(frozen=True)
class Spread:
    """mean, min, max and sample std (None below 2 values) of a list of numbers."""

    n: int
    mean: float
    min: float
    max: float
    std: float | None

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        """Summarise at least one value."""
        if not values:
            raise ValueError("no values")
        std = statistics.stdev(values) if len(values) > 1 else None
        return cls(len(values), statistics.fmean(values), min(values), max(values), std)


@dataclass(frozen=True)
class GroupStats:
    """One line of the report."""

    key: dict[str, Any]
    runs: int  # stored runs in the group, failed ones included
    failed: int
    images_per_sec: Spread | None  # over ok runs: total timed images / timed seconds
    elapsed_seconds: Spread | None  # over ok runs: warm-up + timed wall time
    overhead_percent: float | None  # images/sec lost against the bm group of the same key; bm: 0
    effect: Effect | None = None  # the overhead with its interval (inference.py); None for bm or too few runs
    verdict: str | None = None  # the effect in words
    equivalence: str | None = None  # with a margin: equivalent, not equivalent or undecided (TOST)
    cv: float | None = None  # run-to-run coefficient of variation of images/sec
    env: tuple[str, ...] = ()  # environment facts that differ from the baseline's runs, one line each

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def group_key(run: RunRecord, fields: tuple[str, ...] = GROUP_FIELDS) -> tuple[Any, ...]:
    """The values of the grouping fields for a run."""
    return tuple(getattr(run, f) for f in fields)


def pair_key(run: RunRecord, by_host: bool = False) -> tuple[Any, ...]:
    """Which baseline run a run is paired with: the same bench and repetition (interleaved, so they ran
    side by side), on the same machine when hosts are compared."""
    return (run.bench_id, run.repetition, run.machine) if by_host else (run.bench_id, run.repetition)


def samples(baseline: Sequence[RunRecord], layer: Sequence[RunRecord],
            by_host: bool = False) -> tuple[list[float], list[float], bool] | None:  # fmt: skip
    """The throughputs to compare and whether they are paired: paired when every layer run has exactly
    one baseline partner (and no partner serves twice), else the two groups as they are; None below
    2 runs a side."""
    base: dict[tuple[Any, ...], list[float]] = {}
    for r in baseline:
        base.setdefault(pair_key(r, by_host), []).append(r.images_per_sec)  # type: ignore[arg-type]
    pairs = [(base[pair_key(r, by_host)][0], r.images_per_sec) for r in layer
             if len(base.get(pair_key(r, by_host), [])) == 1]  # fmt: skip
    keys = [pair_key(r, by_host) for r in layer]
    if len(pairs) == len(layer) >= 2 and len(set(keys)) == len(keys):
        return [b for b, _ in pairs], [x for _, x in pairs], True  # type: ignore[misc]
    if len(baseline) >= 2 and len(layer) >= 2:
        return [r.images_per_sec for r in baseline], [r.images_per_sec for r in layer], False  # type: ignore[misc]
    return None


def effect(baseline: Sequence[RunRecord], layer: Sequence[RunRecord], by_host: bool = False) -> Effect | None:
    """The layer's overhead against the baseline's ok runs: paired t on log ratios when the runs pair up
    (see samples), else Welch; None below 2 runs a side."""
    s = samples(baseline, layer, by_host)
    if s is None:
        return None
    return paired(s[0], s[1]) if s[2] else welch(s[0], s[1])


def overhead_percent(baseline_ips: float, ips: float) -> float:
    """How much slower than the baseline, in % of the baseline's images/sec (negative: faster)."""
    return (baseline_ips - ips) / baseline_ips * 100.0


def summarise(runs: Iterable[RunRecord], by_host: bool = False, equivalence: float | None = None) -> list[GroupStats]:
    """Per group: counts, spreads over ok runs, overhead against the matching bm group.

    by_host: one group per host too (and overhead against bare metal on the same host), to find the
    node that is slower than its peers. The host is the physical machine (`machine`): a VM and its
    containers sit beside the host they run on.
    equivalence: a margin in %: each layer is also judged equivalent to bare metal within ±margin (TOST).
    """
    fields = (*GROUP_FIELDS, "machine") if by_host else GROUP_FIELDS
    names = tuple("host" if f == "machine" else f for f in fields)
    compare = tuple(f for f in names if f not in LAYER_FIELDS)
    groups: dict[tuple[Any, ...], list[RunRecord]] = {}
    for r in runs:
        if r.role == "cotenant":
            continue  # a co-tenant is the load, not a measurement: see `shared`
        groups.setdefault(group_key(r, fields), []).append(r)
    partial: list[tuple[dict[str, Any], list[RunRecord], Spread | None, Spread | None]] = []
    baselines: dict[tuple[Any, ...], float] = {}
    base_runs: dict[tuple[Any, ...], list[RunRecord]] = {}
    for key, members in groups.items():
        ok = [r for r in members if r.status == "ok" and r.images_per_sec is not None]
        ips = Spread.of([r.images_per_sec for r in ok]) if ok else None  # type: ignore[misc]
        elapsed = [r.elapsed_seconds for r in ok if r.elapsed_seconds is not None]
        el = Spread.of(elapsed) if elapsed else None
        k = dict(zip(names, key, strict=True))
        partial.append((k, members, ips, el))
        if k["target_kind"] == BASELINE_KIND and not k["arm"] and ips is not None:
            baselines[tuple(k[f] for f in compare)] = ips.mean
            base_runs[tuple(k[f] for f in compare)] = ok
    out = []
    for k, members, ips, el in partial:
        base = baselines.get(tuple(k[f] for f in compare))
        over = overhead_percent(base, ips.mean) if base and ips is not None else None
        failed = sum(1 for r in members if r.status != "ok")
        ok = [r for r in members if r.status == "ok" and r.images_per_sec is not None]
        eff, equiv, words, env = None, None, None, ()
        if k["target_kind"] != BASELINE_KIND or k["arm"]:
            base_ok = base_runs.get(tuple(k[f] for f in compare), [])
            env = tuple(env_diff(base_ok, ok, "bm", k["target_kind"])) if base_ok and ok else ()
            words = device_mismatch(base_ok, ok, "bm", k["target_kind"])
            s = samples(base_ok, ok, by_host) if words is None else None
            if words is not None:
                over = None  # a GPU run against a CPU run is no layer's overhead
            elif s is not None:
                eff = paired(s[0], s[1]) if s[2] else welch(s[0], s[1])
                equiv = tost(s[0], s[1], equivalence, s[2]) if equivalence is not None else None
                words = verdict(eff)
        spread = cv([r.images_per_sec for r in ok])  # type: ignore[misc]
        out.append(GroupStats(k, len(members), failed, ips, el, over, eff, words, equiv, spread, env))
    kinds = ["bm", "vm", "cbm", "cvm"]
    out.sort(key=lambda g: (
        tuple(g.key[f] for f in compare),
        kinds.index(g.key["target_kind"]) if g.key["target_kind"] in kinds else len(kinds),
    ))  # fmt: skip
    return out


SPEC_FIELDS = ("target_kind", "model", "data", "mode", "device", "batch_size", "image_size")


@dataclass(frozen=True)
class DistributedStats:
    """Distributed jobs of one kind and workload: total throughput and scaling efficiency."""

    key: dict[str, Any]
    workers: int
    jobs: int  # jobs whose every worker finished ok
    failed_jobs: int
    total_images_per_sec: Spread | None  # per job: the sum of its workers' measured images/sec
    worker_images_per_sec: Spread | None  # every ok worker of those jobs
    single_images_per_sec: Spread | None  # one worker of the same kind alone (the job's baseline run)
    efficiency_percent: Spread | None  # per job: total ÷ (workers × its baseline) × 100

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def distributed(runs: Iterable[RunRecord]) -> list[DistributedStats]:
    """Per kind, workload and worker count: jobs' total throughput (sum of workers, never one worker × N)
    and efficiency against a single worker of the same kind measured in the same job slot."""
    jobs: dict[str, list[RunRecord]] = {}
    for r in runs:
        if r.scenario == "distributed" and r.job_id:
            jobs.setdefault(r.job_id, []).append(r)
    groups: dict[tuple[Any, ...], list[tuple[list[RunRecord], RunRecord | None]]] = {}
    for members in jobs.values():
        workers = [r for r in members if r.worker_index is not None]
        alone = next((r for r in members if r.worker_index is None), None)
        if workers:
            key = (*group_key(workers[0], SPEC_FIELDS), workers[0].workers)
            groups.setdefault(key, []).append((workers, alone))
    out = []
    for key, items in groups.items():
        totals, each, singles, eff = [], [], [], []
        failed = 0
        for workers, alone in items:
            n = workers[0].workers
            if len(workers) != n or any(w.status != "ok" or w.images_per_sec is None for w in workers):
                failed += 1
                continue
            total = sum(w.images_per_sec for w in workers)  # type: ignore[misc]
            totals.append(total)
            each += [w.images_per_sec for w in workers]
            if alone is not None and alone.status == "ok" and alone.images_per_sec:
                singles.append(alone.images_per_sec)
                eff.append(total / (n * alone.images_per_sec) * 100.0)
        out.append(DistributedStats(
            dict(zip(SPEC_FIELDS, key[:-1], strict=True)), key[-1], len(totals), failed,
            Spread.of(totals) if totals else None, Spread.of(each) if each else None,  # type: ignore[arg-type]
            Spread.of(singles) if singles else None, Spread.of(eff) if eff else None,
        ))  # fmt: skip
    return sorted(out, key=lambda d: (tuple(str(v) for v in d.key.values()), d.workers))


@dataclass(frozen=True)
class SharedStats:
    """The foreground alone and with a co-tenant, paired by job: what the co-tenant cost it."""

    key: dict[str, Any]
    contention: str
    pairs: int  # pairs where both runs finished ok
    failed_pairs: int
    alone_images_per_sec: Spread | None
    shared_images_per_sec: Spread | None
    drop_percent: Spread | None  # per pair: (alone − shared) ÷ alone × 100
    cotenant_images_per_sec: Spread | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def shared(runs: Iterable[RunRecord]) -> list[SharedStats]:
    """Per kind, workload and contention: the foreground's drop under its co-tenant."""
    jobs: dict[str, list[RunRecord]] = {}
    for r in runs:
        if r.scenario == "shared" and r.job_id:
            jobs.setdefault(r.job_id, []).append(r)
    groups: dict[tuple[Any, ...], list[tuple[RunRecord | None, RunRecord | None, RunRecord | None]]] = {}
    for members in jobs.values():
        fg = [r for r in members if r.role != "cotenant"]
        alone = next((r for r in fg if r.contention.startswith("none")), None)
        under = next((r for r in fg if not r.contention.startswith("none")), None)
        co = next((r for r in members if r.role == "cotenant"), None)
        ref = under or alone
        if ref is None:
            continue
        key = (*group_key(ref, SPEC_FIELDS), under.contention if under else "?")
        groups.setdefault(key, []).append((alone, under, co))
    out = []
    for key, items in groups.items():
        a_list, s_list, drops, co_list = [], [], [], []
        failed = 0
        for alone, under, co in items:
            if co is not None and co.status == "ok" and co.images_per_sec:
                co_list.append(co.images_per_sec)
            if not (alone and under and alone.status == under.status == "ok" and alone.images_per_sec
                    and under.images_per_sec is not None):  # fmt: skip
                failed += 1
                continue
            a_list.append(alone.images_per_sec)
            s_list.append(under.images_per_sec)
            drops.append(overhead_percent(alone.images_per_sec, under.images_per_sec))
        out.append(SharedStats(
            dict(zip(SPEC_FIELDS, key[:-1], strict=True)), key[-1], len(drops), failed,
            Spread.of(a_list) if a_list else None, Spread.of(s_list) if s_list else None,
            Spread.of(drops) if drops else None, Spread.of(co_list) if co_list else None,
        ))  # fmt: skip
    return sorted(out, key=lambda d: (tuple(str(v) for v in d.key.values()), d.contention))


@dataclass(frozen=True)
class FleetFlag:
    """A host slower than its peers of the same kind and workload, beyond their spread (median and MAD)."""

    key: dict[str, Any]  # the group's fields, host excluded
    host: str
    images_per_sec: float
    peers_median: float
    robust_z: float  # 0.6745 · (host − median) / MAD
    hosts: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def fleet(groups: Sequence[GroupStats], threshold: float = ROBUST_Z) -> tuple[list[FleetFlag], int]:
    """From `summarise(..., by_host=True)`: per kind and workload, each host's mean images/sec against
    its peers' median and MAD; the hosts whose modified z-score is below −threshold (3 or more hosts
    needed). (flags, how many comparisons of 3+ hosts were made)."""
    peers: dict[tuple[Any, ...], dict[str, float]] = {}
    keys: dict[tuple[Any, ...], dict[str, Any]] = {}
    for g in groups:
        if "host" not in g.key or g.images_per_sec is None:
            continue
        rest = {f: v for f, v in g.key.items() if f != "host"}
        k = tuple(rest.values())
        peers.setdefault(k, {})[str(g.key["host"])] = g.images_per_sec.mean
        keys[k] = rest
    flags, compared = [], 0
    for k, hosts in peers.items():
        if len(hosts) < 3:
            continue
        compared += 1
        z = robust_z(hosts)
        med = float(statistics.median(hosts.values()))
        for host in slow_outliers(hosts, threshold):
            flags.append(FleetFlag(keys[k], host, hosts[host], med, z[host], len(hosts)))
    return flags, compared


def steady(runs: Iterable[RunRecord], timed: Mapping[str, Sequence[float]]) -> list[tuple[RunRecord, list[str]]]:
    """Runs whose timed steps are still trending or hold outlier steps, with what was seen (no number changes)."""
    out = []
    for r in runs:
        words = steady_state(timed.get(r.id, ())).flags() if r.status == "ok" else []
        if words:
            out.append((r, words))
    return out


ENV_FIELDS = ("tensorflow", "tensorflow_cuda_build", "tensorflow_cuda", "tensorflow_cudnn", "gpu_driver",
              "gpu_model", "effective_device", "kernel", "os", "cpu_model", "python", "container_image_digest",
              "vm_image")  # fmt: skip


def environment(run: RunRecord) -> dict[str, str]:
    """The facts of a run's environment that can change a result (fingerprint, GPUs, effective device)."""
    fp = run.fingerprint
    gpus = fp.get("gpus") or []
    out = {k: str(fp[k]) for k in ENV_FIELDS if fp.get(k) not in (None, "")}
    if gpus:
        out["gpu_model"] = ", ".join(sorted({str(g.get("name", "?")) for g in gpus}))
        out["gpu_driver"] = ", ".join(sorted({str(g.get("driver", "?")) for g in gpus}))
    if "tensorflow" in fp:
        out["effective_device"] = effective_device(run)
    return out


def effective_device(run: RunRecord) -> str:
    """Where TensorFlow ran the steps: gpu when it saw a GPU and the run did not hide them, else cpu."""
    seen = int(run.fingerprint.get("gpus_visible_to_tf") or 0)
    return "gpu" if seen > 0 and run.device != "cpu" else "cpu"


def env_diff(a: Sequence[RunRecord], b: Sequence[RunRecord], a_name: str = "A", b_name: str = "B") -> list[str]:
    """One line per environment fact whose values differ between two sets of runs."""
    lines = []
    for field in ENV_FIELDS:
        va = sorted({environment(r).get(field, "—") for r in a})
        vb = sorted({environment(r).get(field, "—") for r in b})
        if va != vb:
            lines.append(f"{field}: {', '.join(va)} ({a_name}) / {', '.join(vb)} ({b_name})")
    return lines


def device_mismatch(a: Sequence[RunRecord], b: Sequence[RunRecord], a_name: str, b_name: str) -> str | None:
    """Why two sets of runs cannot be compared: they ran on different effective devices; None when they can."""
    da = sorted({effective_device(r) for r in a if "tensorflow" in r.fingerprint})
    db = sorted({effective_device(r) for r in b if "tensorflow" in r.fingerprint})
    if da and db and da != db:
        return f"refused: {a_name} ran on {'/'.join(da)}, {b_name} on {'/'.join(db)}; no overhead across devices"
    return None


@dataclass(frozen=True)
class Change:
    """One group of runs in bench B against the same group in bench A (before/after)."""

    key: dict[str, Any]
    a_images_per_sec: Spread | None
    b_images_per_sec: Spread | None
    effect: Effect | None  # B against A: Welch t on log throughput (two benches are not paired)
    verdict: str
    env: list[str]  # environment facts that differ between A's and B's runs

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def compare(a_runs: Iterable[RunRecord], b_runs: Iterable[RunRecord]) -> list[Change]:
    """Per group present in both benches: B's throughput against A's, with its interval and verdict,
    and the environment facts that changed (e.g. a driver update). Across effective devices: refused."""
    def grouped(runs: Iterable[RunRecord]) -> dict[tuple[Any, ...], list[RunRecord]]:
        out: dict[tuple[Any, ...], list[RunRecord]] = {}
        for r in runs:
            if r.role != "cotenant" and r.status == "ok" and r.images_per_sec is not None:
                out.setdefault(group_key(r), []).append(r)
        return out

    ga, gb = grouped(a_runs), grouped(b_runs)
    out = []
    for key in [k for k in ga if k in gb]:
        a, b = ga[key], gb[key]
        refused = device_mismatch(a, b, "A", "B")
        eff = None
        if refused is None and len(a) >= 2 and len(b) >= 2:
            eff = welch([r.images_per_sec for r in a], [r.images_per_sec for r in b])  # type: ignore[misc]
        words = refused or (verdict(eff) if eff else "too few runs for an interval (2 per bench)")
        out.append(Change(dict(zip(GROUP_FIELDS, key, strict=True)), Spread.of([r.images_per_sec for r in a]),  # type: ignore[misc]
                          Spread.of([r.images_per_sec for r in b]), eff, words, env_diff(a, b)))  # type: ignore[misc]  # fmt: skip
    return out
