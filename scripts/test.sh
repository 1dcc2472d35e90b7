#!/usr/bin/env bash
# Install dltestbed with its test tools, then the linter, the formatter's check, the type checker, and every
# test tier, on empty dltestbed folders and image stores (scripts/fresh.sh): as a new user's first run.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
phases=()
phase() { phases+=("$1 $(((SECONDS - started) / 60)) min"); } # the minute each part ended, for the summary
bash scripts/install.sh --test
phase installed
.venv/bin/ruff check dltestbed tests bench scripts
.venv/bin/ruff format --check dltestbed tests bench scripts
.venv/bin/mypy  # the package, as pyproject.toml's [tool.mypy] says
phase checked
# the container and VM tiers build images and guest disks: say up front when the disk is short of them (at their
# peak, Docker's and Podman's stores, the caches, a guest image being built and the venv took 41 GB on 2026-11-28)
need_gb=40
free_gb=$(df --output=avail -BG /var/lib | tail -1 | tr -dc 0-9)
echo "disk: ${free_gb} GB free under /var/lib (the tests need about $need_gb GB at their peak)"
if [ "$free_gb" -lt "$need_gb" ]; then
  echo "warning: only ${free_gb} GB free: image and VM tests may fail with 'No space left on device'" >&2
fi
# a new user's machine: dltestbed's folders and image stores start empty for this run (scripts/fresh.sh)
source scripts/fresh.sh
trap fresh_cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT  # a stopped run cleans up too
fresh_start
# one fixed temp folder, emptied by pytest when it starts: a run that was killed (its labs' layers, VM
# disks) leaves nothing that outlives the next run
tmp="${DLTESTBED_TEST_TMP:-/tmp/dltestbed-tests}"
pytest_run() { .venv/bin/python -m pytest -v --durations=25 "$@"; }
if [ "$#" -gt 0 ]; then # the tests named: one pytest
    pytest_run --basetemp "$tmp" "$@"
    exit
fi
# Every tier, two at once as the two cores allow, each in a pytest of its own: a queue of tiers, longest first,
# and two slots that each take the next tier once theirs has ended, so both cores stay busy to the end whatever
# this machine is quick at (how fast the VM tier's TCG and the lab's namespaces run differs from machine to
# machine: the VM tier took 25 min here on 2026-11-30 where an earlier machine took 43.5, the lab 33 without
# Kubernetes where it took 51.5, so streams fixed in advance ended 17 min apart). Then the tests that compare speeds (marker `quiet`), alone.
# The tiers share nothing a test changes or counts: their own temp folders, and each but the lab its own state
# folder (so its own installation id: no `teardown` removes another tier's VMs or containers); one cache whose
# builds are locked (the first tier to need an image builds it, another waits for it). Several run workloads on
# this machine: a test that looks for workload processes looks for its own alone (tests/tf/test_scenarios.py by
# its PYTEST_CURRENT_TEST, tests/lab/test_slurm.py by its cluster).
#   lab   namespaces, containers, Slurm, and the lab's Kubernetes cluster (marker `kubernetes`): in the run's own
#         Podman store, whose workload image the Kubernetes nodes load; the cluster's first fixture waits for
#         Kubernetes' build from source, started below beside the tiers (niced: the tests' processes come first;
#         about 10 minutes beside them, 5 alone)
#   vms   the VM tier: its images' builds, then qemu's threads under TCG; a Podman store of its own, since the lab
#         tier prunes its own (test_image_build_is_cached) and the VM tier finds its guest image through the
#         Podman image it carries
#   tf    TensorFlow's and PyTorch's tier, the GPU check's script at CPU sizes among it
#   unit  the unit and browser tiers
#   dead  the acceptance of a rack with dead nodes (3-6 min): its nodes are measured at once, so it runs beside
#         another tier, not among the quiet ones
TIERS=(lab vms tf unit dead)
DEAD_NODES=tests/lab/test_accept_rack.py::test_two_dead_nodes_are_named_the_four_good_ones_judged_and_a_mended_one_resumed
mkdir -p "$tmp" # pytest makes each tier's --basetemp in it, but not the folders above
states=$(mktemp -d "$tmp.states.XXXXXX")
queue="$tmp.queue"
cpu_pid=""
cpu_log="$tmp.cpu.log"
kube_pid=""
kube_log="$tmp.kubernetes.log"
slots=()
# run_tier NAME: its tests in a pytest of their own (its pid in $tmp.NAME.pid), its output in $tmp.NAME.log
run_tier() {
    local name=$1 args=()
    case "$name" in
        lab) args=(tests/lab --ignore=tests/lab/test_vms.py --deselect "$DEAD_NODES") ;;
        vms) args=(tests/lab/test_vms.py) ;;
        tf) args=(tests/tf) ;;
        unit) args=(tests/unit tests/browser) ;;
        dead) args=("$DEAD_NODES") ;;
    esac
    (
        if [[ "$name" != lab ]]; then
            export XDG_STATE_HOME="$states/$name"
            mkdir -p "$XDG_STATE_HOME"
        fi
        if [[ "$name" == vms && -n "$fresh_root" ]]; then # removed with the run's, by fresh_cleanup
            export CONTAINERS_STORAGE_CONF="$fresh_root/podman-vms/storage.conf"
            mkdir -p "$fresh_root/podman-vms"
            printf '[storage]\ndriver = "overlay"\nrunroot = "%s"\ngraphroot = "%s"\n' \
                "$fresh_root/podman-vms/run" "$fresh_root/podman-vms/storage" >"$CONTAINERS_STORAGE_CONF"
        fi
        exec .venv/bin/python -m pytest -v --durations=25 --basetemp "$tmp/$name" "${args[@]}" -m "not quiet"
    ) >"$tmp.$name.log" 2>&1 &
    echo $! >"$tmp.$name.pid"
    wait $!
}
# slot: the queue's next tier until none is left; each one's exit status in $tmp.NAME.rc, the minute it ended in
# $tmp.NAME.ended, its log printed whole when it ends (under the queue's lock: two logs never interleave)
slot() {
    local name rc ended
    while name=$(flock "$queue.lock" sh -c 'head -n 1 "$1" && sed -i 1d "$1"' sh "$queue") && [[ -n "$name" ]]; do
        flock "$queue.lock" echo "minute $(((SECONDS - started) / 60)): tier $name starts"
        rc=0
        run_tier "$name" || rc=$?
        rm -f "$tmp.$name.pid"
        echo "$rc" >"$tmp.$name.rc"
        ended=$(((SECONDS - started) / 60))
        echo "$ended" >"$tmp.$name.ended"
        flock "$queue.lock" sh -c 'echo; echo "======== tier $1 ended at minute $2 (exit $3): ========"; cat "$4"' sh \
            "$name" "$ended" "$rc" "$tmp.$name.log"
    done
}
# A stop (Ctrl-C, a time limit's TERM): no tier starts after it; each running tier's pytest gets TERM, which
# tests/conftest.py takes as Ctrl-C (every fixture's teardown runs: labs, clusters, VMs; a second stop does not cut
# it), up to 5 minutes, then KILL; what each said last is printed, as its log is printed only when it ends
stop_tiers() {
    local pid name alive live=()
    for pid in "${slots[@]}"; do kill "$pid" 2>/dev/null || true; done
    for name in "${TIERS[@]}"; do
        pid=$(cat "$tmp.$name.pid" 2>/dev/null || true)
        if [[ "$pid" =~ ^[0-9]+$ ]] && kill -TERM "$pid" 2>/dev/null; then
            live+=("$pid")
            echo "stopping tier $name: its teardown runs" >&2
        fi
    done
    for _ in $(seq 600); do
        alive=0
        for pid in "${live[@]}"; do
            if kill -0 "$pid" 2>/dev/null; then alive=1; fi
        done
        ((alive)) || break
        sleep 0.5
    done
    for pid in "${live[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    for name in "${TIERS[@]}"; do
        [[ -f "$tmp.$name.pid" ]] || continue # ended (its slot removed it) or never started
        echo "======== the last of tier $name's log: ========"
        tail -n 40 "$tmp.$name.log" 2>/dev/null || true
    done
    [[ -n "$cpu_pid" ]] && { kill "$cpu_pid" 2>/dev/null || true; }
    [[ -n "$kube_pid" ]] && { kill -- -"$kube_pid" 2>/dev/null || true; }
    rm -rf "$states" "$cpu_log" "$kube_log" "$queue" "$queue.lock" "$tmp".*.pid "$tmp".*.rc "$tmp".*.ended
    fresh_cleanup
}
trap stop_tiers EXIT
rm -f "$tmp".*.pid "$tmp".*.rc "$tmp".*.ended
printf '%s\n' "${TIERS[@]}" >"$queue"
echo "tiers, two at once, each slot taking the next as its own ends: ${TIERS[*]}; then -m quiet alone"
# how busy the cores were, each minute (from /proc/stat): where they idle, another tier would fit
(
    read -r _ a b c idle e f g _ </proc/stat
    while sleep 60; do
        read -r _ a2 b2 c2 idle2 e2 f2 g2 _ </proc/stat
        all=$(((a2 + b2 + c2 + idle2 + e2 + f2 + g2) - (a + b + c + idle + e + f + g)))
        echo $((all > 0 ? 100 - 100 * (idle2 + e2 - idle - e) / all : 0))
        a=$a2 b=$b2 c=$c2 idle=$idle2 e=$e2 f=$f2 g=$g2
    done >"$cpu_log"
) &
cpu_pid=$!
# Kubernetes from Debian's source into this run's empty cache (scripts/kubernetes.sh), in a session of its own (a
# stop ends its compilers too); the Kubernetes tests wait for it (its lock)
setsid bash -c 'rc=0; nice -n 10 bash scripts/kubernetes.sh || rc=$?; echo "ended after $SECONDS s"; exit $rc' \
    >"$kube_log" 2>&1 &
kube_pid=$!
slot &
slots+=($!)
slot &
slots+=($!)
wait "${slots[@]}" || true
slots=()
phase "tiers ended"
kube_rc=0
wait "$kube_pid" || kube_rc=$?
kube_pid=""
kube_said="Kubernetes' build beside the tiers: exit $kube_rc; $(grep -h -o -E '(built|ended after) [0-9in ]+ s' "$kube_log" |
    paste -sd ';' || true)"
rc_quiet=0
pytest_run --basetemp "$tmp/quiet" tests -m quiet 2>&1 | tee "$tmp.quiet.log" || rc_quiet=$?
echo "$rc_quiet" >"$tmp.quiet.rc"
phase "quiet tier ended"
echo
echo "================================ every tier ================================"
failed=0
for name in "${TIERS[@]}" quiet; do
    log="$tmp.$name.log"
    rc=$(cat "$tmp.$name.rc" 2>/dev/null || echo "none: it did not run")
    [[ "$rc" == 0 ]] || failed=1
    ended=$(cat "$tmp.$name.ended" 2>/dev/null || true)
    echo "$name: exit $rc${ended:+, ended at minute $ended}"
    [[ -f "$log" ]] || continue
    # its result line, what failed, and the time per tier
    grep -E '^(FAILED|ERROR) ' "$log" | sed "s/^/$name: /" || true
    awk -v n="$name" '/^=+ (time per tier|slowest test files|where each failure was) =+$/{on=1; next} /^=+ /{on=0} on && NF{print n ": " $0}' "$log"
    grep -E '^=+ .*(passed|failed|error).* in [0-9.]+s' "$log" | tail -1 | sed "s/^/$name: /" || true
done
echo "$kube_said"
[ "$kube_rc" -eq 0 ] || tail -20 "$kube_log"
echo "minutes from the start: $(IFS=,; echo "${phases[*]}" | sed 's/,/, /g')"
# the cores' use per 5 minutes from the tiers' start, in % of all of them (the mean of its minutes)
echo "cores busy, % per 5 min from the tiers' start: $(awk '{s += $1; n++} n == 5 {printf "%d ", s / 5; s = 0; n = 0}
    END {if (n) printf "%d", s / n}' "$cpu_log")"
rm -f "$tmp".*.log
[ "$failed" -eq 0 ] && [ "$kube_rc" -eq 0 ]
