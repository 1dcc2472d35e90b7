"""A prepared bench's runs: a target per site and kind, made once (with the bench's compile caches where its runs
compile); the scenario run with the stream's sink;
Ctrl-C stops the run under way (stored failed, with its steps); the stream flushed whatever happens."""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import replace

from dltestbed.choices import PER_GPU
from dltestbed.orchestrate import compilecache, pergpu, planning, presets, scenarios
from dltestbed.orchestrate.launchers import Launcher
from dltestbed.orchestrate.pergpu import GpuSlot
from dltestbed.orchestrate.planning import Plan
from dltestbed.orchestrate.request import BenchInterrupted, BenchObserver
from dltestbed.orchestrate.scenarios.common import CPUS, probe
from dltestbed.requests.bench import BenchRequest
from dltestbed.results import influx
from dltestbed.results.records import RunRecord
from dltestbed.results.store import Store
from dltestbed.shield import shielded
from dltestbed.targets import Site, make
from dltestbed.targets.base import Target


def run_on(
    launcher: Launcher, plan: Plan, kinds: list[str], store: Store, request: BenchRequest, observer: BenchObserver
) -> tuple[list[RunRecord], list[str]]:
    """Prepare the launcher's sites and run the plan on them: the records and the notes the bench ends with."""
    with ExitStack() as held:
        try:
            sites = held.enter_context(launcher.sites(plan.bench_id, observer.say))
        except KeyboardInterrupt:
            raise BenchInterrupted(f"interrupted while {launcher.waiting_for}") from None
        try:
            sites = held.enter_context(compilecache.shared(sites, kinds, plan.specs, observer.say))
        except KeyboardInterrupt:
            raise BenchInterrupted("interrupted while the compile caches' folders were made") from None
        return _runs(plan, kinds, sites, store, request, observer)


def _runs(
    plan: Plan, kinds: list[str], sites: list[Site], store: Store, request: BenchRequest, observer: BenchObserver
) -> tuple[list[RunRecord], list[str]]:
    for s in sites:
        if s.down is not None:
            observer.say(f"{s.label} does not answer ({s.down}): its runs are stored failed with that reason")
    machines: list[list[Target]] = [[make(k, s) for k in kinds] for s in sites]
    gpus: list[GpuSlot | None] | None = None
    if pergpu.wanted(plan) and scenarios.scenario(request.scenario.scenario).alone_per_target:
        machines, gpus = [], []
        for s in sites:  # a set of targets per GPU of each host: its GPUs' runs go at once
            for slot in _slots(s, observer) if s.down is None else [None]:  # a host down: its runs fail, stored
                machines.append([make(k, s) for k in kinds])
                if slot is not None:
                    for t in machines[-1]:  # cbm: the container is given its GPU alone
                        t.confine(slot.uuid, slot.cpus)
                gpus.append(slot)
        observer.expect(len(plan.runs()) * len(kinds) * len(machines), plan.precision is not None)  # per GPU
    w = request.workloads
    if w.suite != "micro" and not w.models and w.image_size is None and w.steps is None:
        p = presets.PRESETS[plan.preset]
        observer.say(
            f"No models given: running the {p.name} preset — {p.summary}. See `dltestbed bench --help` for the options."
        )
    stream = request.stream
    observer.say(
        announce(plan, request.scenario, machines, sites)
        + f"; results → {store.path}"
        + (f"; streaming to InfluxDB at {stream.describe()}" if stream else "")
    )
    sinks: list[influx.InfluxSink] = []
    notes: list[str] = []
    try:
        if stream is not None:
            sinks.append(influx.InfluxSink(store, stream))
        env = scenarios.RunEnv(
            plan, sites, kinds, store, observer, request.scenario, sinks, machines, notes.append, gpus
        )
        records = scenarios.run(env)
    except KeyboardInterrupt:
        raise BenchInterrupted(
            "interrupted: the current run is stored as failed with its steps; see "
            f"`dltestbed runs --bench {plan.bench_id}`"
        ) from None
    finally:
        with shielded():  # a second Ctrl-C does not cut the stream's last send short
            for sink in sinks:
                observer.say(stream_closed(sink))
    return records, notes


def _slots(site: Site, observer: BenchObserver) -> list[GpuSlot]:
    """The GPUs of a site's host (pergpu.SLOTS), each bound to the CPUs of its NUMA node that runs there may
    use; one line says them. Before any run: a host without GPUs is one ConfigError."""
    bm = make("bm", site)
    slots = pergpu.parse_slots(probe(bm, pergpu.SLOTS), bm.host)
    allowed = [int(c) for c in probe(bm, CPUS).split(",") if c.strip()]
    slots = [replace(g, cpus=g.cpus and (pergpu.usable(g.cpus, allowed) or None)) for g in slots]
    observer.say(
        f"--gpus {PER_GPU}: {len(slots)} GPU(s) on {bm.host} at once: "
        + ", ".join(f"{g.label} {g.uuid[:12]} (CPUs {g.cpus or 'not pinned'})" for g in slots)
    )
    return slots


def announce(plan: Plan, options: scenarios.Options, machines: list[list[Target]], sites: list[Site]) -> str:
    """One line: what the bench will run, where, how."""
    targets = [t for m in machines for t in m]
    # a machine's targets in order (bm twice with --aa); a host's GPUs (--gpus per-gpu) share one listing
    sets = dict.fromkeys(
        tuple(f"{t.kind}:{t.name}" + ("" if t.name == t.host else f" ({t.host})") for t in m) for m in machines
    )
    where = ", ".join(name for names in sets for name in names)
    if len(machines) > len(sites):  # --gpus per-gpu: a set of targets per GPU
        where += f" ({len(machines)} GPUs, each with its own runs)"
    head = f"bench {plan.bench_id} ({options.scenario}, {plan.order}): {len(plan.specs)} workload(s) × "
    reps = f"up to {plan.repeat} (auto, ±{plan.precision:g} %)" if plan.precision else str(plan.repeat)
    aa = " (bm twice: A and A′)" if plan.aa else ""
    once = " (the screen in repetition 1 only)" if any(planning.is_screen(s) for s in plan.specs) else ""
    head += f"{reps} repetition(s){once} × {len(machines[0])} kind(s){aa}"
    total = len(plan.runs()) * len(targets)
    return head + scenarios.scenario(options.scenario).announce(options, [s.host for s in sites], where, total)


def stream_closed(sink: influx.InfluxSink) -> str:
    """Flush the stream; the line that says what reached the server, and what waits for `push`."""
    left = sink.close()
    s = sink.settings
    lines = [f"InfluxDB: {influx.doubt_note(sink.in_doubt)}"] if sink.in_doubt else []
    if left:
        why = f" ({sink.errors[-1]})" if sink.errors else ""
        lines.append(
            f"InfluxDB: {sink.sent} point(s) sent to {s.url}; {left} not sent{why} — kept in "
            f"the results store; `dltestbed push` sends them"
        )
    else:
        lines.append(f"InfluxDB: {sink.sent} point(s) sent to {s.describe()}, none waiting")
    return "\n".join(lines)
