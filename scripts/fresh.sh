# Sourced by scripts/test.sh: this run gets its own empty copy of everything dltestbed caches or keeps,
# so every build path (root filesystem, wheelhouse, container images, image archives, guest image, lab
# layers) runs as on a new user's first day, whatever this machine kept from earlier runs:
#   - the XDG cache, state and data folders (wheelhouses, rootfs tars, image archives, host keys, store);
#   - the VM, guest-image and lab folders that default to /var/lib/dltestbed;
#   - Docker's and Podman's image stores: a dockerd of this run's own (its own data root and socket,
#     DOCKER_HOST) and a Podman storage of its own (CONTAINERS_STORAGE_CONF). The machine's own stores
#     are neither read nor changed.
# System packages and pip's own cache stay: the registries serve them the same way to a new user.
# DLTESTBED_FRESH=0 keeps the machine's caches (a developer's quick loop; never what CI runs).
# Everything is removed when the shell exits (fresh_cleanup, from test.sh's EXIT trap). A run that was
# killed before its cleanup leaves its folders; the next run removes them first (fresh_sweep).

fresh_root=""
fresh_dockerd=""

# fresh_stop PID: end a process and wait for it (at most 30 s)
fresh_stop() {
    kill "$1" 2>/dev/null || true
    for _ in $(seq 60); do kill -0 "$1" 2>/dev/null || break; sleep 0.5; done
}

# fresh_remove DIR: the folder, after the overlay layers Podman or Docker may still have mounted under it
# (deepest first)
fresh_remove() {
    awk -v root="$1/" 'index($2, root) == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do
        umount -l "$m" 2>/dev/null || true
    done
    rm -rf "$1"
}

fresh_cleanup() {
    if [[ -n "$fresh_dockerd" ]] && kill -0 "$fresh_dockerd" 2>/dev/null; then
        fresh_stop "$fresh_dockerd"
    fi
    if [[ -n "$fresh_root" && -d "$fresh_root" ]]; then
        fresh_remove "$fresh_root"
    fi
    [[ -n "$fresh_root" ]] && rm -f "$fresh_root.pid"
    return 0
}

# Folders a run left when it was killed: this script's roots (fresh.*) and the VM tier's folders
# (test-vms-*), each with its run's pid beside it (FOLDER.pid); one whose pid file is missing or whose
# process is gone is removed, with the dockerd it started, the mounts under it and its lock.
fresh_sweep() {
    local d pid
    for d in /var/lib/dltestbed/fresh.* /var/lib/dltestbed/test-vms-*; do
        [[ -d "$d" ]] || continue
        pid=$(cat "$d.pid" 2>/dev/null || true)
        if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
            continue # a live run's
        fi
        pid=$(cat "$d/docker.pid" 2>/dev/null || true) # its dockerd, if that pid is still a dockerd of this folder
        if [[ "$pid" =~ ^[0-9]+$ ]] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "--data-root $d/"; then
            fresh_stop "$pid"
        fi
        fresh_remove "$d"
        rm -f "$d.pid" "$d.lock"
        echo "fresh: removed $d (left by a run that ended before its cleanup)"
    done
}

fresh_start() {
    if [[ "${DLTESTBED_FRESH:-1}" == 0 ]]; then
        echo "fresh: NO (DLTESTBED_FRESH=0): this run may use the caches and images this machine kept"
        return
    fi
    # pip's cache stays where pip had it before XDG_CACHE_HOME moves
    PIP_CACHE_DIR="${PIP_CACHE_DIR:-$(.venv/bin/python -m pip cache dir 2>/dev/null || echo "$HOME/.cache/pip")}"
    export PIP_CACHE_DIR
    mkdir -p /var/lib/dltestbed
    fresh_sweep
    fresh_root=$(mktemp -d /var/lib/dltestbed/fresh.XXXXXX)
    echo "$$" >"$fresh_root.pid" # this run's: a later run's fresh_sweep leaves the folder alone while it lives
    chmod 755 "$fresh_root" # qemu's own user reaches guest images and VM disks under it
    mkdir -p "$fresh_root"/{cache,state,data,vms,vm-images,labs,podman,charliecloud}
    export XDG_CACHE_HOME="$fresh_root/cache" XDG_STATE_HOME="$fresh_root/state" XDG_DATA_HOME="$fresh_root/data"
    export DLTESTBED_VM_DIR="$fresh_root/vms" DLTESTBED_VM_IMAGES="$fresh_root/vm-images"
    export DLTESTBED_LAB_DIR="$fresh_root/labs" DLTESTBED_CH_DIR="$fresh_root/charliecloud"
    export CONTAINERS_STORAGE_CONF="$fresh_root/podman/storage.conf"
    printf '[storage]\ndriver = "overlay"\nrunroot = "%s"\ngraphroot = "%s"\n' \
        "$fresh_root/podman/run" "$fresh_root/podman/storage" >"$CONTAINERS_STORAGE_CONF"
    if command -v dockerd >/dev/null; then
        export DOCKER_HOST="unix://$fresh_root/docker.sock"
        dockerd --iptables=false --data-root "$fresh_root/docker" --exec-root "$fresh_root/docker-exec" \
            --host "$DOCKER_HOST" --pidfile "$fresh_root/docker.pid" >"$fresh_root/dockerd.log" 2>&1 &
        fresh_dockerd=$!
        for _ in $(seq 120); do
            docker version --format '{{.Server.Version}}' >/dev/null 2>&1 && break
            kill -0 "$fresh_dockerd" 2>/dev/null || break
            sleep 0.5
        done
        if ! docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then
            echo "fresh: this run's own dockerd did not start; its log:" >&2
            tail -20 "$fresh_root/dockerd.log" >&2
            return 1
        fi
    fi
    local files docker_images podman_images
    files=$(find "$fresh_root"/{cache,state,data,vms,vm-images,labs,charliecloud} -mindepth 1 | wc -l)
    docker_images=$(docker images -qa 2>/dev/null | wc -l)
    podman_images=$(podman images -qa 2>/dev/null | wc -l)
    echo "fresh: every dltestbed folder and image store starts empty under $fresh_root:"
    echo "fresh:   XDG cache/state/data, DLTESTBED_VM_DIR, DLTESTBED_VM_IMAGES, DLTESTBED_LAB_DIR, DLTESTBED_CH_DIR: $files files"
    echo "fresh:   docker (this run's own dockerd, ${DOCKER_HOST:-none}): $docker_images images;" \
        "podman (storage $fresh_root/podman/storage): $podman_images images"
    echo "fresh:   pip's cache stays at $PIP_CACHE_DIR; everything else is removed when the run ends"
}
