#!/usr/bin/env bash
# Install dltestbed into ./.venv on a Debian machine, as root: system packages first, then pip.
# Usage: bash scripts/install.sh [--lab] [--slurm] [--kubernetes] [--containers] [--vm] [--test]
#   --lab   adds what `dltestbed lab` needs (openssh-server, iproute2)
#   --slurm adds Slurm (slurmctld, slurmd, its client commands) and munge: `lab up --slurm`, and this
#           machine as a submit host for `bench --launcher slurm` (a site's own Slurm needs only slurm-client)
#   --kubernetes  adds what `lab up --kubernetes` needs: Kubernetes built from Debian's source into dltestbed's
#           cache (scripts/kubernetes.sh: about 10 minutes on 2 cores, once), containerd and the CNI plugins, and
#           the Kubernetes client
#   --containers  adds Docker, Podman and debootstrap (cbm targets; the image is built locally), and Charliecloud
#           with what rootless Podman needs (uidmap, fuse-overlayfs, slirp4netns): containers run as a user
#   --vm    adds libvirt, qemu and what guest images need (vm and cvm targets); libvirtd is started
#   --test  adds pytest and ruff, what the lab test tier needs (implies --lab --slurm --containers --vm), and
#           VictoriaMetrics (a time-series server speaking InfluxDB's v2 write API) for the stream tests,
#           fdisk and extlinux (the VM tests build a cloud image with its own boot loader), and
#           Chromium (the browser tier opens the HTML report in it, headless)
# TensorFlow: the CUDA build where nvidia-smi sees a GPU, else the CPU build (override: DLTESTBED_TF=cpu|gpu).
set -euo pipefail
cd "$(dirname "$0")/.."

extras=()
lab=0
slurm=0
containers=0
vm=0
kubernetes=0
for arg in "$@"; do
    case "$arg" in
        --test) extras+=(test pytorch); lab=1; slurm=1; containers=1; vm=1 ;;
        --kubernetes) extras+=(kubernetes); lab=1; kubernetes=1 ;;
        --pytorch) extras+=(pytorch) ;;
        --vm) extras+=(vm); vm=1; containers=1 ;;
        --lab) lab=1 ;;
        --slurm) lab=1; slurm=1 ;;
        --containers) containers=1 ;;
        *) echo "usage: bash scripts/install.sh [--pytorch] [--lab] [--slurm] [--kubernetes] [--containers] [--vm] [--test]" >&2; exit 2 ;;
    esac
done

apt_needed=()
command -v python3 >/dev/null || apt_needed+=(python3)
python3 -c 'import ensurepip, venv' 2>/dev/null || apt_needed+=(python3-venv)
command -v ssh >/dev/null || apt_needed+=(openssh-client)   # bench over SSH, provisioning
if ((lab)); then
    [[ -x /usr/sbin/sshd ]] || apt_needed+=(openssh-server)
    command -v ip >/dev/null || apt_needed+=(iproute2)
fi
if ((slurm)); then
    [[ -x /usr/sbin/slurmctld ]] || apt_needed+=(slurmctld)
    [[ -x /usr/sbin/slurmd ]] || apt_needed+=(slurmd)
    command -v srun >/dev/null || apt_needed+=(slurm-client)
    [[ -x /usr/sbin/munged ]] || apt_needed+=(munge)
fi
if ((containers)); then
    [[ -x /usr/sbin/dockerd ]] || apt_needed+=(docker.io)
    [[ -x /usr/bin/podman ]] || apt_needed+=(podman)
    command -v debootstrap >/dev/null || apt_needed+=(debootstrap)
    # containers run as a user (bench --runtime charliecloud or podman-rootless --as-user NAME)
    command -v ch-run >/dev/null || apt_needed+=(charliecloud-runtime)
    command -v ch-convert >/dev/null || apt_needed+=(charliecloud-builders)
    command -v newuidmap >/dev/null || apt_needed+=(uidmap)
    command -v fuse-overlayfs >/dev/null || apt_needed+=(fuse-overlayfs)
    command -v slirp4netns >/dev/null || apt_needed+=(slirp4netns)
    command -v zstd >/dev/null || apt_needed+=(zstd) # Podman's image archive (runtimes/podman.py)
fi
if ((vm)); then
    command -v libvirtd >/dev/null || apt_needed+=(libvirt-daemon-system)
    command -v qemu-system-x86_64 >/dev/null || apt_needed+=(qemu-system-x86)
    command -v qemu-img >/dev/null || apt_needed+=(qemu-utils)
    command -v virt-xml-validate >/dev/null || apt_needed+=(libxml2-utils)
    command -v mkfs.vfat >/dev/null || apt_needed+=(dosfstools)
    command -v mcopy >/dev/null || apt_needed+=(mtools)
    command -v mkfs.ext4 >/dev/null || apt_needed+=(e2fsprogs)
    # libvirt-python has no wheels: it is built against libvirt's headers
    dpkg -s libvirt-dev >/dev/null 2>&1 || apt_needed+=(libvirt-dev pkg-config gcc)
    python3 -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
        || apt_needed+=(python3-dev)
fi
if [[ " ${extras[*]} " == *" test "* ]]; then
    command -v victoria-metrics >/dev/null || apt_needed+=(victoria-metrics)
    # the VM tests build a cloud image with its own boot loader (tests/cloudimage.py)
    command -v sfdisk >/dev/null || apt_needed+=(fdisk)
    command -v extlinux >/dev/null || apt_needed+=(extlinux)
    [[ -e /usr/lib/syslinux/mbr/mbr.bin ]] || apt_needed+=(syslinux-common)
    [[ -x /usr/bin/chromium ]] || apt_needed+=(chromium)
fi
if ((${#apt_needed[@]})); then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_needed[@]}" >/dev/null
fi
python3 - <<'PY'
import sys
if sys.version_info < (3, 11):
    sys.exit(f"dltestbed needs Python >= 3.11; this python3 is {sys.version.split()[0]}")
PY

tf="${DLTESTBED_TF:-}"
if [[ -z "$tf" ]]; then
    if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then tf=gpu; else tf=cpu; fi
fi
extras+=("$tf")

[[ -x .venv/bin/python ]] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
IFS=, spec=".[${extras[*]}]"
.venv/bin/python -m pip install -q --disable-pip-version-check -e "$spec"
# the checkout's bytecode, written once: an editable install compiles nothing, and where PYTHONDONTWRITEBYTECODE
# is set every dltestbed process (CLI, workload, lab host) would compile its modules again (0.3-0.4 s of CPU each)
.venv/bin/python -m compileall -q dltestbed >/dev/null
if ((vm)); then
    bash scripts/libvirt-up.sh
fi
if ((kubernetes)); then
    bash scripts/kubernetes.sh
fi
echo "installed dltestbed with TensorFlow ($tf build) in $(pwd)/.venv: run .venv/bin/dltestbed --help"
