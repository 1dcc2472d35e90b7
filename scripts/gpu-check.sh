#!/usr/bin/env bash
# The GPU check: what a GPU must show that CPUs cannot, on a one-GPU machine that reaches no registry, once
# ../shared/gpu/bundle.sh has moved TensorFlow's CUDA build there (its `unbundle.sh env` sourced first).
# Every figure lands in OUT: summary.txt (each step's exit code and seconds, then the figures the issue asks
# for), report.html, report.json, validate.txt, sampler.txt, results.sqlite, logs.tgz (every step's output)
# and logs/ (the same, unpacked; leave it behind when a device call brings 8 files back).
#
#   bash scripts/gpu-check.sh OUT         # on the GPU machine
#   bash scripts/gpu-check.sh OUT --cpu   # the same steps at CPU sizes: tries the script where there is no GPU
#   FRAMEWORK=pytorch bash scripts/gpu-check.sh OUT   # with the machine's own PyTorch, no TensorFlow needed: the
#       benches, probes, screen and determinism in PyTorch, the gpu preset's ResNet-50 against a bare loop
#       (fidelity); --gpus node and the sampler's cost are TensorFlow's (said in the summary, not run)
#
# A step that fails is said in the summary and the others still run; the exit code is the number of failed
# steps (0: all passed); validate's own exit codes count too: 1 a check failed, 3 one cannot be judged (two
# runs of a noisy machine: validate.txt says which). ONLY="STEP ..." runs those steps alone, into the same
# OUT (its store and summary kept), so the check fits two device calls of at most 10 minutes each. On an
# H100 (2026-11-26), after 34 pieces in about 2 minutes (before the accept steps were added):
#   ONLY="facts bench validate-init validate full"                         415 s, the bundle's assembly included
#   ONLY="screen det-on-cpu det-on-gpu report-json sampler report-html"    222 s
# With TensorFlow, `efficiency-xla` holds the gpu preset's ResNet-50 to keras.applications' ResNet50 in a bare loop
# (mixed_bfloat16, jit_compile; 3 pairs; not yet run on a GPU): ONLY="efficiency-xla" after the bundle's assembly.
# With FRAMEWORK=pytorch, `fidelity` takes sampler's place (not yet timed on a GPU); `efficiency` (eager) and
# `efficiency-compiled` hold dltestbed's ResNet-50 to torchvision's, `compile-cache` and `compile-as-user` time a
# bench's second compiled run against its first. On the H200 (2026-11-28, its own PyTorch 2.11 in /opt/torch/.venv;
# PYTHON a venv of /usr/bin/python3 whose .pth names that venv's site-packages and the carried wheels, so that
# nobody reaches both): efficiency 100-111 s, compile-cache 86 s, efficiency-compiled 181 s (2 pairs);
# compile-as-user needs more than 90 s (its first run compiles Triton's launcher too). On an H200 with its own PyTorch
# (2026-11-28; each call starts with torch-wheels.sh's install line, 2 s):
#   ONLY="accept accept-init"   accept 184 s (exit 3: its board's GEMM values were of revision 1), accept-init 213 s
#   ONLY="accept-again"         the acceptance again with the values accept-init wrote (about 3 minutes; not yet run)
set -uo pipefail
out=${1:?usage: bash scripts/gpu-check.sh OUT_DIR [--cpu]}
cpu=${2:-}
cd "$(dirname "$0")/.."
mkdir -p "$out/logs"
out=$(cd "$out" && pwd)
py=${PYTHON:-$(command -v python3)}
[[ -x .venv/bin/python ]] && py=${PYTHON:-.venv/bin/python}
export PYTHONUNBUFFERED=1 DLTESTBED_RESULTS="$out/results.sqlite"
failed=0
framework=${FRAMEWORK:-tensorflow}
fw=(--framework "$framework")

wants() { [[ -z "${ONLY:-}" || " $ONLY " == *" $1 "* ]]; } # wants STEP: ONLY names it, or ONLY is unset
step() { # step NAME COMMAND...: output to logs/NAME.log; its exit code and seconds to the summary
    local name=$1 started rc
    shift
    wants "$name" || return 0
    started=$(date +%s)
    "$@" >"$out/logs/$name.log" 2>&1
    rc=$?
    [[ $rc -eq 0 ]] || failed=$((failed + 1))
    printf '%-16s rc=%-3s %4s s\n' "$name" "$rc" "$(($(date +%s) - started))" | tee -a "$out/summary.txt"
}
dlt() { "$py" -m dltestbed "$@"; }
skip() { # skip NAME WHY: a step this run does not make, said in the summary
    wants "$1" || return 0
    printf '%-16s not run: %s\n' "$1" "$2" | tee -a "$out/summary.txt"
}
into() { # into FILE COMMAND...: the command's output to FILE (for a step whose output is a figure)
    local file=$1
    shift
    "$@" >"$file"
}

if [[ "$cpu" == --cpu ]]; then # the steps' plumbing at CPU sizes: seconds each, no GPU needed
    device=cpu
    models=(-m alexnet --image-size 64 --batch-size 8 --steps 10)
    full=(-m alexnet --image-size 64 --batch-size 8 --steps 5 --probes gemm,conv,membw)
    det=(-m alexnet --image-size 64 --batch-size 4 --warmup 1 --steps 5 --math float32)
    screen=5
    sampler=(--model alexnet --image-size 64 --batch-size 8 --warmup 2 --steps 10 --pairs 3 --device cpu)
    node=(-m alexnet --image-size 64 --batch-size 8 --warmup 2 --steps 5)
    fidelity=(--model alexnet --image-size 64 --batch-size 8 --warmup 2 --steps 10 --pairs 2 --math mixed_bfloat16 --xla)
    eager=(--model resnet50 --image-size 64 --batch-size 8 --warmup 1 --steps 3 --pairs 3 --math float32 --no-harness)
    compiled=(--model resnet50 --image-size 64 --batch-size 8 --warmup 1 --steps 3 --pairs 2 --math float32 --xla --no-harness)
    cached=(-m alexnet --image-size 64 --batch-size 4 --warmup 1 --steps 3 --xla --repeat 2)
    tf_eff=(--model resnet50 --image-size 64 --batch-size 8 --warmup 1 --steps 3 --pairs 2 --math float32 --xla --no-harness)
else # one H100 or H200: the gpu preset (resnet50, alexnet twice; inception3 beside the probes), 50 timed steps
    device=gpu
    models=(--preset gpu -m resnet50 -m alexnet --steps 50)
    full=(--preset gpu -m inception3 --steps 50)
    det=(-m resnet50 --image-size 224 --batch-size 16 --warmup 2 --steps 10 --math float32)
    screen=20
    sampler=(--model resnet50 --image-size 224 --batch-size 128 --warmup 5 --steps 20 --pairs 2 --device gpu)
    node=(-m resnet50 --image-size 224 --batch-size 64 --steps 30)
    fidelity=(--model resnet50 --image-size 224 --batch-size 256 --warmup 10 --steps 50 --pairs 2 --math mixed_bfloat16 --xla)
    # eager, against torchvision's ResNet-50 alone (the harness's fidelity is the compiled step's): 3 pairs
    eager=(--model resnet50 --image-size 224 --batch-size 256 --warmup 10 --steps 50 --pairs 3 --math mixed_bfloat16 --no-harness)
    # compiled, against torchvision's alone: 2 pairs (the loops' own Inductor cache makes the second pair's start short)
    compiled=(--model resnet50 --image-size 224 --batch-size 256 --warmup 10 --steps 50 --pairs 2 --math mixed_bfloat16 --xla --no-harness)
    # a bench of two compiled runs: the first compiles, the second reads the bench's compile cache
    cached=(--preset gpu -m resnet50 --steps 20 --repeat 2)
    # TensorFlow: the gpu preset's ResNet-50 against keras.applications' ResNet50, both mixed_bfloat16 and XLA
    tf_eff=(--model resnet50 --image-size 224 --batch-size 256 --warmup 10 --steps 50 --pairs 3 --math mixed_bfloat16 --xla --no-harness)
fi

[[ -n "${ONLY:-}" ]] || : >"$out/summary.txt"
# First: accept this machine as a local node (Ansible's `ansible_connection: local`: no SSH, no sshd), at level
# quick, with FRAMEWORK or else the framework it has (accept's default); provisioning is skipped: dltestbed runs here already. Exit 0:
# its board holds every measure at today's revisions and each passed; 3: some cannot be judged (the summary names
# them), and on a GPU `accept --init` measures them (level standard, into its own store) and the acceptance is made
# again with the values it wrote.
inv="$out/logs/local.yml"
printf 'all:\n  children:\n    bare_metal:\n      hosts:\n        %s:\n          ansible_connection: local\n' \
    "$(hostname -s)" >"$inv"
accepted() { # accepted PACK: its outcome, exit code and the checks it could not judge or failed, into the summary
    "$py" - "$1/verdict.json" <<'EOF' | tee -a "$out/summary.txt"
import json, sys

try:
    v = json.load(open(sys.argv[1]))
except (OSError, ValueError) as exc:
    sys.exit(f"  no verdict.json: {exc}")
print(f"  {v['outcome']} ({v['framework']}), exit {v['exit_code']}; checks: {v['checks']}")
for n in v["nodes"]:
    for who, reasons in [(n["node"], n["reasons"])] + [(g["gpu"], g["reasons"]) for g in n["gpus"]]:
        for r in reasons:
            if r["verdict"] not in ("pass", "warn") and not r["check"].startswith("gpu "):
                print(f"  {who} {r['check']}: {r['verdict']}: {r['why']}")
EOF
}
as_asked=() # FRAMEWORK named: accept with it; else with the one the machine has (TensorFlow where it has both)
[[ -z "${FRAMEWORK:-}" ]] || as_asked=(--framework "$FRAMEWORK")
step accept dlt accept --inventory "$inv" --level quick --out "$out/accept" --skip provision "${as_asked[@]}"
if wants accept; then accepted "$out/accept"; fi
accept_rc=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["exit_code"])' "$out/accept/verdict.json" \
    2>/dev/null)
if [[ $device == gpu && $accept_rc == 3 ]]; then
    step accept-init dlt accept --init --inventory "$inv" --level standard --out "$out/accept-init" --skip provision \
        --expected "$out/expected.toml" --results "$out/init.sqlite" "${as_asked[@]}"
    step accept-again dlt accept --inventory "$inv" --level quick --out "$out/accept-again" --skip provision \
        --expected "$out/expected.toml" "${as_asked[@]}"
    if wants accept-again; then accepted "$out/accept-again"; fi
fi
step facts bash -c 'nvidia-smi -q 2>&1; nvidia-smi topo -m 2>&1; uname -a; '"$py"' -m dltestbed --version'
# two repetitions: validate --init takes a reference from groups of 2 ok runs or more
step bench dlt bench --targets bm --repeat 2 --device "$device" "${fw[@]}" "${models[@]}"
step validate-init dlt validate --init --reference "$out/logs/reference.yml" --bench last
step validate into "$out/validate.txt" "$py" -m dltestbed validate --reference "$out/logs/reference.yml" --bench last
step full dlt bench --suite full --targets bm --repeat 1 --device "$device" "${fw[@]}" "${full[@]}"
step screen dlt bench --suite screen --screen-time "$screen" --targets bm --repeat 1 "${fw[@]}"
if [[ $framework == tensorflow ]]; then # the gpu preset's ResNet-50 against keras.applications' (same policy, XLA)
    step efficiency-xla into "$out/efficiency-xla.txt" "$py" bench/harness_fidelity.py "${fw[@]}" "${tf_eff[@]}"
else # fidelity and each model against one written outside (torchvision's)
    step fidelity into "$out/fidelity.txt" "$py" bench/harness_fidelity.py "${fw[@]}" "${fidelity[@]}"
    step efficiency into "$out/efficiency.txt" "$py" bench/harness_fidelity.py "${fw[@]}" "${eager[@]}"
    # the compile cache, as dltestbed runs and as an unprivileged user (AS_USER, default nobody: PYTHON must be an
    # interpreter that user reaches, with dltestbed and the framework)
    step compile-cache dlt bench --targets bm --device "$device" "${fw[@]}" "${cached[@]}"
    step compile-as-user dlt bench --targets bm --as-user "${AS_USER:-nobody}" --device "$device" "${fw[@]}" \
        "${cached[@]}"
    step efficiency-compiled into "$out/efficiency-compiled.txt" "$py" bench/harness_fidelity.py "${fw[@]}" \
        "${compiled[@]}"
fi
step det-on-cpu dlt bench --targets bm --repeat 1 --deterministic --device cpu "${fw[@]}" "${det[@]}"
step det-on-"$device" dlt bench --targets bm --repeat 1 --deterministic --device "$device" "${fw[@]}" "${det[@]}"
# every GPU of the machine in one data-parallel job: MirroredStrategy, NCCL's all-reduce (one replica per GPU)
if [[ $framework != tensorflow ]]; then
    skip gpus-node "one process over every GPU is TensorFlow's (PyTorch: --scenario distributed)"
elif [[ $device == cpu ]] || "$py" -c 'import importlib.metadata as m; m.version("nvidia-nccl-cu12")' 2>/dev/null; then
    step gpus-node dlt bench --targets bm --repeat 1 --gpus node --device "$device" "${node[@]}"
else
    skip gpus-node "no NCCL in this install (bundle.sh's EXTRA_PACKAGES=nvidia-nccl-cu12)"
fi
step report-html dlt report --all --out "$out/report.html"
step report-json dlt report --all --out "$out/report.json"
if [[ $framework == tensorflow ]]; then
    step sampler into "$out/sampler.txt" "$py" bench/sampler_cost.py "${sampler[@]}"
else
    skip sampler "its workload arms are TensorFlow's"
fi

{
    echo
    echo "== the figures the issue asks for (report.json)"
    "$py" - "$out/report.json" <<'EOF'
import json, sys

try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError) as exc:
    sys.exit(f"no report.json: {exc}")
cases = r["micro"]["cases"]
for c in cases:
    k = c["key"]
    if k["probe"] in ("gemm", "h2d", "d2h", "conv"):
        frac = c.get("fraction")
        share = f"{frac:.0%} of {c['limit']:.4g} ({c['limit_source']})" if frac else "no limit read"
        print(f"{k['probe']:5} {k['framework'][:10]:10} {k['case'][:48]:48} {c['value']['mean']:.4g} {k['unit']}: {share}")
for g in r["health"]["gpus"]:
    print("health:", json.dumps(g)[:400])
for f in r["health"]["findings"]:
    print("finding:", json.dumps(f)[:300])
print("checks:", len(r["checks"]["rows"]), "rows,", len(r["checks"]["mismatches"]), "mismatches")
for a in r["agreement"]:
    print("agreement:", json.dumps(a)[:400])
for w in r.get("warmup", []):
    print("warm-up:", w)
for s in r["steady"]:
    print("steady-state flag:", s)
EOF
    if [[ -s "$out/sampler.txt" ]]; then
        echo
        echo "== sampler's cost"
        tail -5 "$out/sampler.txt"
    fi
    if [[ -s "$out/fidelity.txt" ]]; then
        echo
        echo "== the harness against a bare loop, and the model against one written outside (gpu preset's math, compiled)"
        tail -9 "$out/fidelity.txt"
    fi
    if [[ -s "$out/efficiency.txt" ]]; then
        echo
        echo "== the model against one written outside (eager)"
        tail -6 "$out/efficiency.txt"
    fi
    if [[ -s "$out/efficiency-xla.txt" ]]; then
        echo
        echo "== the model against keras.applications' (gpu preset's math, XLA)"
        tail -6 "$out/efficiency-xla.txt"
    fi
    if [[ -s "$out/efficiency-compiled.txt" ]]; then
        echo
        echo "== the model against one written outside (compiled)"
        tail -6 "$out/efficiency-compiled.txt"
    fi
    echo
    echo "== the compile cache: each bench's compiled runs in order (to timed steps: process start to the first timed step)"
    "$py" - "$DLTESTBED_RESULTS" <<'EOF'
import sys
from collections import defaultdict

from dltestbed.results.store import Store

store = Store.open(sys.argv[1], read_only=True)
groups = defaultdict(list)  # each bench's kind and model: a cache is shared within one alone
for r in sorted(store.runs(), key=lambda r: r.started_at or ""):
    if r.compile_cache and r.status == "ok" and r.elapsed_seconds is not None and r.timed_seconds is not None:
        groups[(r.bench_id, r.target_kind, r.arm, r.model)].append(r)
for (bench, kind, arm, model), runs in groups.items():
    user = runs[0].fingerprint.get("run_as_user", "?")
    starts = [(r.startup_seconds or 0) + r.elapsed_seconds - r.timed_seconds for r in runs]
    wall = lambda r: f"{r.wall_seconds:.1f} s" if r.wall_seconds is not None else "?"
    cells = [f"{r.compile_cache} {s:.1f} s (from launch {wall(r)})" for r, s in zip(runs, starts)]
    ratio = f"; first / second {starts[0] / starts[1]:.1f}x" if len(starts) > 1 and starts[1] > 0 else ""
    print(f"{bench} as {user}, {kind}{arm} {model}: " + ", ".join(cells) + ratio)
EOF
} >>"$out/summary.txt" 2>&1
tar -C "$out" -czf "$out/logs.tgz" logs
echo "failed steps: $failed (figures in $out)" | tee -a "$out/summary.txt"
exit "$failed"
