"""Harness fidelity and model efficiency, interleaved in pairs, in the same math (--math: float32 with TF32 off,
or mixed_bfloat16: Keras's mixed policy, PyTorch's autocast) and compiled alike (--xla: jit_compile,
torch.compile). `--math mixed_bfloat16 --xla` is the gpu preset's.

- Harness fidelity: images/sec through `dltestbed bench` (its library call, `orchestrate.run_bench`) ÷ a bare
  training loop of the same model builder (--framework tensorflow: a tf.function step; pytorch: a plain loop).
  The bare loop is the least a benchmark can do: the same synthetic batch, a train step, warm-up, then the timed
  steps with the result synced once per step. No events, no sampler, no controller. Goal: >= 0.99.
- Model efficiency: the same bare loop with dltestbed's model ÷ with a model written outside the project
  (torchvision's where it imports, on the GPU machines; else, for ResNet-50, transformers'
  ResNetForImageClassification with its default config but 1000 classes: ResNet-50, random weights, nothing
  downloaded; TensorFlow: keras.applications), in images/sec, and FLOP-normalised: each side's images/sec × its
  own FLOPs per image (counted by torch.utils.flop_counter on one image's forward pass), so that two models of
  different size compare fairly.
  Goal: FLOP-normalised >= 0.95. The outside models are in the test extra only; the workload never imports them.

Each ratio's interval: paired t on the log ratios of the pairs (report/inference.py), 95 %.

With the harness and an outside model, each pair's outside loop is stored beside the harness's run, in its bench
(role `reference`): `--results PATH` keeps that store, and `dltestbed report --all --results PATH` shows each group
against the reference loop with its interval (`--all`: each pair is a bench of its own).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dltestbed.orchestrate import BenchRequest, Compute, Repetitions, Silent, Where, Workloads, run_bench
from dltestbed.report.inference import paired, ratio_interval
from dltestbed.results.records import REFERENCE, RunRecord, new_id
from dltestbed.results.store import Store

BARE = r"""
import sys, time
import keras, tensorflow as tf
from dltestbed.workload.frameworks.tensorflow import models
model_name = sys.argv[1]
size, batch, warmup, steps = (int(v) for v in sys.argv[2:6])
math, xla, source = sys.argv[6], sys.argv[7] == "1", sys.argv[8]
keras.utils.set_random_seed(0)
tf.config.experimental.enable_tensor_float_32_execution(False)  # float32 as the harness asks it: TF32 off
if math != "float32":
    keras.mixed_precision.set_global_policy(math)
APPS = {"resnet50": keras.applications.ResNet50, "inception3": keras.applications.InceptionV3}
if source == "outside" and model_name not in APPS:
    print(f"nan nan no outside {model_name}: keras.applications has none")
    sys.exit(0)
if source == "outside":
    model = APPS[model_name](weights=None, input_shape=(size, size, 3), classes=1000, classifier_activation=None)
    who = f"keras.applications {keras.__version__}"
else:
    model, who = models.build(model_name, size, 1000), "dltestbed"
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
print(batch * steps / (time.perf_counter() - t0), "nan", who)  # FLOPs are counted in PyTorch only
"""

BARE_TORCH = r"""
import sys, time
import torch
from dltestbed.workload.frameworks.pytorch import models as torchmodels
model_name = sys.argv[1]
size, batch, warmup, steps = (int(v) for v in sys.argv[2:6])
math, xla, source = sys.argv[6], sys.argv[7] == "1", sys.argv[8]
half = torch.bfloat16 if math == "mixed_bfloat16" else None
torch.manual_seed(0)
device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")  # where the harness's auto runs
torch.backends.cudnn.allow_tf32 = False  # float32 as the harness asks it: TF32 off
torch.backends.cudnn.benchmark = True
fmt = torch.channels_last if device.type == "cuda" else torch.contiguous_format
class Logits(torch.nn.Module):  # transformers' model answers an object: its logits, as every loop here reads them
    def __init__(self, inner):
        super().__init__()
        self.inner = inner
    def forward(self, x):
        return self.inner(pixel_values=x).logits
def outside(name):  # a model written outside dltestbed: torchvision's, else transformers' ResNet-50; (model, who)
    try:
        import torchvision
        tv = torchvision.models
        build = {"resnet50": tv.resnet50, "alexnet": tv.alexnet,
                 "inception3": lambda **k: tv.inception_v3(aux_logits=False, init_weights=True, **k)}
        return build[name](num_classes=1000), f"torchvision {torchvision.__version__}"
    except (ImportError, RuntimeError):  # its CPU wheel does not import beside the CPU build of torch
        if name != "resnet50":
            return None, f"no outside {name}: torchvision does not import here"
        import transformers
        from transformers import ResNetConfig, ResNetForImageClassification
        who = f"transformers {transformers.__version__} ResNet"
        return Logits(ResNetForImageClassification(ResNetConfig(num_labels=1000))), who
if source == "outside":
    model, who = outside(model_name)
    if model is None:
        print(f"nan nan {who}")
        sys.exit(0)
else:
    model, who = torchmodels.build(model_name, size, 1000), "dltestbed"
from torch.utils.flop_counter import FlopCounterMode
with FlopCounterMode(display=False) as count:  # one image's forward pass, before the model moves or compiles
    model.eval()(torch.rand(1, 3, size, size))
flops = count.get_total_flops()
model = model.to(device, memory_format=fmt).train()
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
print(batch * steps / (time.perf_counter() - t0), flops, who)
"""
LOOPS = {"tensorflow": BARE, "pytorch": BARE_TORCH}


@dataclass(frozen=True)
class Loop:
    """One bare loop's result: its images/sec, its model's FLOPs per image (nan: not counted) and whose model."""

    ips: float
    flops: float
    who: str


def bare(a: argparse.Namespace, source: str = "dltestbed") -> Loop:
    """The bare loop with dltestbed's model, or with the outside one (`source` "outside")."""
    argv = [sys.executable, "-c", LOOPS[a.framework], a.model]
    argv += [*map(str, (a.image_size, a.batch_size, a.warmup, a.steps)), a.math, "1" if a.xla else "0", source]
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"the bare loop ({source}) failed: {out.stderr.strip().splitlines()[-1:]}")
    ips, flops, who = out.stdout.strip().splitlines()[-1].split(" ", 2)
    return Loop(float(ips), float(flops), who)


def harness(a: argparse.Namespace, results: Path) -> RunRecord:
    """One bare-metal run through the library call under `dltestbed bench`: its stored record."""
    request = BenchRequest(
        workloads=Workloads(
            models=(a.model,),
            frameworks=(a.framework,),
            image_size=a.image_size,
            batch_size=a.batch_size,
            warmup=a.warmup,
            steps=a.steps,
        ),
        compute=Compute(math=a.math, xla=a.xla),  # as the bare loop computes, whatever the preset
        repetitions=Repetitions(repeat="1"),
        where=Where(targets=("bm",)),
        results=results,
    )
    (run,) = run_bench(request, Silent()).records
    if run.status != "ok" or run.images_per_sec is None:
        sys.exit(f"the harness run failed: {run.reason} (log: {run.log_path})")
    return run


def keep_reference(results: Path, run: RunRecord, loop: Loop) -> None:
    """The outside loop's images/sec stored beside the harness's run, in its bench and repetition, with its spec
    and key (role REFERENCE, `reference` naming whose model): the report sets the group against it."""
    ref = dataclasses.replace(
        run,
        id=new_id("r"),
        role=REFERENCE,
        images_per_sec=loop.ips,
        mean_images_per_sec=loop.ips,
        spec={**run.spec, "reference": loop.who},
        steps_done=0,
        log_path=None,
        # the loop's images/sec alone: none of the harness run's own times, memory or accuracy
        timed_seconds=None,
        elapsed_seconds=None,
        first_step_seconds=None,
        startup_seconds=None,
        wall_seconds=None,
        gpu_memory_peak_bytes=None,
        eval_images=None,
        eval_correct=None,
        eval_loss=None,
        compile_cache=None,
    )
    store = Store.open(results)
    try:
        store.save_run(ref)
    finally:
        store.close()


def ratio_line(name: str, base: Sequence[float], over: Sequence[float], goal: float) -> str:
    """`over` ÷ `base`: the ratio of the means, the pairs' geometric mean with its paired-t interval, the goal."""
    mean = statistics.fmean(over) / statistics.fmean(base)
    line = f"{name}: {mean:.3f} (per pair: {', '.join(f'{o / b:.3f}' for b, o in zip(base, over, strict=True))})"
    if len(base) > 1:
        e = paired(base, over)  # over against base
        mid, lo, hi = ratio_interval(e)
        line += f"; pairs' geometric mean {mid:.3f} [{lo:.3f}, {hi:.3f}] ({e.method}, 95 %)"
    return f"{line}; goal >= {goal} {'MET' if mean >= goal else 'NOT MET'}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--framework", choices=tuple(LOOPS), default="tensorflow")
    p.add_argument("--model", default="alexnet")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--pairs", type=int, default=4)
    p.add_argument("--math", choices=("float32", "mixed_bfloat16"), default="float32")  # no loss scaling here
    p.add_argument("--xla", action="store_true", help="compile the step (jit_compile, torch.compile) on both sides")
    p.add_argument("--no-harness", action="store_true", help="model efficiency only: no run through the harness")
    p.add_argument("--no-outside", action="store_true", help="harness fidelity only: no outside model")
    p.add_argument("--results", type=Path, help="keep the harness's store here (its runs, the outside loops beside)")
    a = p.parse_args()
    sides: dict[str, list[Loop]] = {"bare": [], "outside": [], "harness": []}
    named = [n for n in sides if not (n == "harness" and a.no_harness) and not (n == "outside" and a.no_outside)]
    with tempfile.TemporaryDirectory() as tmp:
        results = a.results or Path(tmp) / "r.sqlite"
        for i in range(a.pairs):
            # rotate which goes first, so a drift does not favour one side
            run = None
            for name in named[i % len(named) :] + named[: i % len(named)]:
                if name == "harness":
                    run = harness(a, results)
                    got = Loop(run.images_per_sec or math.nan, math.nan, "dltestbed bench")
                else:
                    got = bare(a, "outside" if name == "outside" else "dltestbed")
                sides[name].append(got)
                print(f"pair {i + 1}: {name:8} {got.ips:8.1f} img/s ({got.who})", flush=True)
            if sides["outside"] and math.isnan(sides["outside"][-1].ips):
                named.remove("outside")  # none here: said once
            elif run is not None and "outside" in named:
                keep_reference(results, run, sides["outside"][-1])
    if a.results and "harness" in named and "outside" in named:
        print(f"\nstored in {a.results}: `dltestbed report --all --results {a.results}` sets it against the outside")
    what = f"{a.framework} {a.model} {a.image_size}px batch {a.batch_size} {a.math}{' compiled' if a.xla else ''}"
    print(f"\n{what}, {a.warmup}+{a.steps} steps, {a.pairs} pairs")
    for name in named:
        ips = [r.ips for r in sides[name]]
        sd = statistics.pstdev(ips)
        print(f"{name:8} mean {statistics.fmean(ips):.1f} img/s (sd {sd:.1f}), {sides[name][0].who}")
    base = [r.ips for r in sides["bare"]]
    if "harness" in named:
        print(ratio_line("harness fidelity (harness ÷ bare)", base, [r.ips for r in sides["harness"]], 0.99))
    if "outside" in named:
        out = sides["outside"]
        print(ratio_line("model efficiency (dltestbed ÷ outside, img/s)", [r.ips for r in out], base, 0.95))
        ours, theirs = sides["bare"][0].flops, out[0].flops
        if math.isnan(ours) or math.isnan(theirs):
            print("FLOP-normalised efficiency: not counted (FLOPs are counted in PyTorch only)")
        else:
            print(f"FLOPs per image (forward): dltestbed {ours / 1e9:.3f} G, outside {theirs / 1e9:.3f} G")
            what = "FLOP-normalised efficiency (dltestbed ÷ outside, FLOP/s)"
            print(ratio_line(what, [r.ips * theirs for r in out], [v * ours for v in base], 0.95))
    elif sides["outside"]:
        print(sides["outside"][0].who)


if __name__ == "__main__":
    main()
