"""Harness fidelity: images/sec through `dltestbed bench` (its library call, `orchestrate.run_bench`) ÷ a
bare training loop in the same framework, interleaved (--framework tensorflow: a tf.function step;
pytorch: a plain PyTorch loop), in the same math (--math: float32 with TF32 off, or mixed_bfloat16:
Keras's mixed policy, PyTorch's autocast) and compiled alike (--xla: jit_compile, torch.compile).
`--math mixed_bfloat16 --xla` is the gpu preset's.

The bare loop is the least a benchmark can do: same model builder, same synthetic batch, a train step,
warm-up, then the timed steps with the result synced once per step. No events, no sampler, no
controller. The ratio's interval: paired t on the log ratios of the pairs (report/inference.py).
Goal: ratio >= 0.99.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from dltestbed.orchestrate import BenchRequest, Machines, Repetitions, Silent, Workloads, run_bench
from dltestbed.report.inference import paired

BARE = r"""
import sys, time
import keras, tensorflow as tf
from dltestbed.workload import models
model_name = sys.argv[1]
size, batch, warmup, steps = (int(v) for v in sys.argv[2:6])
math, xla = sys.argv[6], sys.argv[7] == "1"
keras.utils.set_random_seed(0)
tf.config.experimental.enable_tensor_float_32_execution(False)  # float32 as the harness asks it: TF32 off
if math != "float32":
    keras.mixed_precision.set_global_policy(math)
model = models.build(model_name, size, 1000)
x = tf.random.uniform((batch, size, size, 3))
y = tf.random.uniform((batch,), 0, 1000, dtype=tf.int32)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
opt = keras.optimizers.SGD(learning_rate=0.01, momentum=0.9)
@tf.function(jit_compile=xla)
def step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return loss
for _ in range(warmup):
    float(step(x, y))
t0 = time.perf_counter()
for _ in range(steps):
    float(step(x, y))
print(batch * steps / (time.perf_counter() - t0))
"""

BARE_TORCH = r"""
import sys, time
import torch
from dltestbed.workload.frameworks import torchmodels
model_name = sys.argv[1]
size, batch, warmup, steps = (int(v) for v in sys.argv[2:6])
math, xla = sys.argv[6], sys.argv[7] == "1"
half = torch.bfloat16 if math == "mixed_bfloat16" else None
torch.manual_seed(0)
device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")  # where the harness's auto runs
torch.backends.cudnn.allow_tf32 = False  # float32 as the harness asks it: TF32 off
torch.backends.cudnn.benchmark = True
fmt = torch.channels_last if device.type == "cuda" else torch.contiguous_format
model = torchmodels.build(model_name, size, 1000).to(device, memory_format=fmt).train()
x = torch.rand(batch, 3, size, size, device=device).contiguous(memory_format=fmt)
y = torch.randint(0, 1000, (batch,), device=device)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()
forward = torch.compile(model) if xla else model
def step():
    opt.zero_grad()
    with torch.autocast(device.type, dtype=half or torch.float32, enabled=half is not None):
        loss = loss_fn(forward(x), y)
    loss.backward()
    opt.step()
    return loss
for _ in range(warmup):
    float(step())
t0 = time.perf_counter()
for _ in range(steps):
    float(step())
print(batch * steps / (time.perf_counter() - t0))
"""
LOOPS = {"tensorflow": BARE, "pytorch": BARE_TORCH}


def bare(a: argparse.Namespace) -> float:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            LOOPS[a.framework],
            a.model,
            *map(str, (a.image_size, a.batch_size, a.warmup, a.steps)),
            a.math,
            "1" if a.xla else "0",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def harness(a: argparse.Namespace, results: Path) -> float:
    """One bare-metal run through the library call under `dltestbed bench`: its images/sec."""
    request = BenchRequest(
        workloads=Workloads(
            models=(a.model,),
            frameworks=(a.framework,),
            math=a.math,  # as the bare loop computes, whatever the preset
            xla=a.xla,
            image_size=a.image_size,
            batch_size=a.batch_size,
            warmup=a.warmup,
            steps=a.steps,
        ),
        repetitions=Repetitions(repeat="1"),
        machines=Machines(targets=("bm",)),
        results=results,
    )
    (run,) = run_bench(request, Silent()).records
    if run.status != "ok" or run.images_per_sec is None:
        sys.exit(f"the harness run failed: {run.reason} (log: {run.log_path})")
    return run.images_per_sec


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--framework", choices=tuple(LOOPS), default="tensorflow")
    p.add_argument("--model", default="alexnet")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--pairs", type=int, default=4)
    p.add_argument("--math", choices=("float32", "mixed_bfloat16"), default="float32")  # no loss scaling here
    p.add_argument("--xla", action="store_true", help="compile the step (jit_compile, torch.compile) on both sides")
    a = p.parse_args()
    bares, harnesses = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.pairs):
            # alternate which goes first, so a drift does not favour one side
            order = (bare, harness) if i % 2 == 0 else (harness, bare)
            for fn in order:
                v = bare(a) if fn is bare else harness(a, Path(tmp) / "r.sqlite")
                (bares if fn is bare else harnesses).append(v)
                print(f"pair {i + 1}: {'bare   ' if fn is bare else 'harness'} {v:8.1f} img/s", flush=True)
    ratio = statistics.fmean(harnesses) / statistics.fmean(bares)
    pair_ratios = [h / b for h, b in zip(harnesses, bares, strict=True)]
    what = f"{a.framework} {a.model} {a.image_size}px batch {a.batch_size} {a.math}{' compiled' if a.xla else ''}"
    print(f"\n{what}, {a.warmup}+{a.steps} steps, {a.pairs} pairs")
    print(f"bare    mean {statistics.fmean(bares):.1f} img/s (sd {statistics.pstdev(bares):.1f})")
    print(f"harness mean {statistics.fmean(harnesses):.1f} img/s (sd {statistics.pstdev(harnesses):.1f})")
    print(f"per-pair ratios: {', '.join(f'{r:.3f}' for r in pair_ratios)}")
    if len(pair_ratios) > 1:
        e = paired(bares, harnesses)  # harness against bare: 1 - ratio, in %
        lo, hi = 1 - e.hi_pct / 100, 1 - e.lo_pct / 100
        mid = 1 - e.overhead_pct / 100
        print(f"ratio of the pairs (geometric mean) {mid:.3f} [{lo:.3f}, {hi:.3f}] ({e.method}, 95 %)")
    print(f"harness fidelity ratio: {ratio:.3f} (goal >= 0.99) {'MET' if ratio >= 0.99 else 'NOT MET'}")


if __name__ == "__main__":
    main()
