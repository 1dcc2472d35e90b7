"""A results store that holds every section of the report, written through the real Store API with
known numbers: bm, cbm and bm A′ over 3 repetitions of two models (cbm 10 % slower), a run that drifts,
a failed run, a distributed job of 2 workers plus one alone, a shared pair with its co-tenant, four
machines of which one is half as fast, and GPU samples on the cbm runs."""

from __future__ import annotations

import random
from pathlib import Path

from dltestbed.results.records import RunRecord
from dltestbed.results.store import Store
from dltestbed.workload.events import ResourceEvent, StepEvent
from tests.conftest import make_run

BENCH = "b-20260101-000000-report"
BASE = {"alexnet": 100.0, "resnet50": 60.0}  # bare metal's images/sec
SLOW = {"cbm": 0.9, "bm": 1.0}  # what each kind gets of bare metal's throughput
WARMUP, STEPS = 2, 12
FP = {
    "tensorflow": "2.21.0",
    "tensorflow_cuda_build": False,
    "kernel": "6.1.0",
    "os": "Debian 12",
    "cpu_model": "Test CPU",
    "python": "3.11.7",
    "gpus_visible_to_tf": 0,
}


def _run(
    store: Store, rng: random.Random, ips: float, drift: float = 0.0, gpu: bool = False, **fields: object
) -> RunRecord:
    """A run with its steps and samples stored; images/sec from the stored timed steps, as the runner does."""
    fp = {**FP, **({"container_image_digest": "sha256:abc"} if fields.get("target_kind") == "cbm" else {})}
    r = make_run(bench_id=BENCH, warmup=WARMUP, steps=STEPS, status="ok", fingerprint=fp, **fields)
    store.save_run(r)
    t, timed = 1_000.0, []
    for i in range(WARMUP + STEPS):
        rate = ips * (0.05 if i == 0 else 1.0) * rng.uniform(0.97, 1.03) * (1 + drift * max(0, i - WARMUP) / STEPS)
        dt = r.batch_size / rate
        t += dt
        ev = StepEvent(
            index=i,
            phase="warmup" if i < WARMUP else "timed",
            images=r.batch_size,
            seconds=dt,
            images_per_sec=rate,
            t=t,
        )
        store.add_step(r.id, ev)
        timed += [ev] if ev.phase == "timed" else []
    for j in range(int((t - 999.0) / 0.25) + 1):
        gpus = [{"memory_used_bytes": (2 + j * 0.01) * 2**30, "util_percent": 90.0}] if gpu else []
        store.add_resource(
            r.id,
            ResourceEvent(t=999.0 + 0.25 * j, rss_bytes=int((1.0 + 0.02 * j) * 2**30), cpu_percent=150.0, gpus=gpus),
        )
    r.images_per_sec = sum(s.images for s in timed) / sum(s.seconds for s in timed)
    r.elapsed_seconds = t - 1_000.0
    r.steps_done = WARMUP + STEPS
    store.save_run(r)
    return r


def write(path: Path, seed: int = 1) -> list[RunRecord]:
    """The store at `path` (made or added to) with every kind of run the report draws; the runs."""
    rng = random.Random(seed)
    store = Store.open(path)
    runs = []
    try:
        for rep in (1, 2, 3):
            for model, base in BASE.items():
                for kind, arm in (("bm", ""), ("cbm", ""), ("bm", "A′")):
                    drift = -0.3 if (rep, model, kind, arm) == (2, "alexnet", "cbm", "") else 0.0
                    runs.append(
                        _run(
                            store,
                            rng,
                            base * SLOW[kind],
                            drift,
                            gpu=kind == "cbm",
                            target_kind=kind,
                            arm=arm,
                            model=model,
                            repetition=rep,
                            machine="node1",
                        )
                    )
        failed = make_run(
            bench_id=BENCH,
            target_kind="cbm",
            model="alexnet",
            repetition=4,
            status="failed",
            warmup=WARMUP,
            steps=STEPS,
            reason="exit code 137 (killed)",
            machine="node1",
        )
        store.save_run(failed)
        for host, speed in (("node2", 1.0), ("node3", 1.02), ("node4", 0.5)):
            for rep in (1, 2):
                runs.append(
                    _run(
                        store,
                        rng,
                        100.0 * speed,
                        target_kind="bm",
                        model="alexnet",
                        repetition=rep,
                        host=host,
                        machine=host,
                        image_size=32,
                    )
                )
        job = "job-dist-1"
        for idx, host in ((0, "node2"), (1, "node3")):
            runs.append(
                _run(
                    store,
                    rng,
                    80.0,
                    scenario="distributed",
                    target_kind="bm",
                    job_id=job,
                    workers=2,
                    worker_index=idx,
                    host=host,
                    machine=host,
                )
            )
        runs.append(
            _run(
                store,
                rng,
                95.0,
                scenario="distributed",
                target_kind="bm",
                job_id=job,
                workers=2,
                host="node2",
                machine="node2",
            )
        )
        pair = "job-shared-1"
        runs.append(_run(store, rng, 100.0, scenario="shared", target_kind="bm", job_id=pair, contention="none"))
        runs.append(_run(store, rng, 70.0, scenario="shared", target_kind="bm", job_id=pair, contention="alexnet b64"))
        runs.append(
            _run(
                store,
                rng,
                30.0,
                scenario="shared",
                target_kind="bm",
                job_id=pair,
                contention="alexnet b64",
                role="cotenant",
                batch_size=64,
            )
        )
    finally:
        store.close()
    return runs
