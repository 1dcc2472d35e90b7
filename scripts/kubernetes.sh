#!/usr/bin/env bash
# Build Kubernetes' control plane and kubelet from Debian's source package, once, into dltestbed's cache, with
# their checksums recorded (what `dltestbed lab up --kubernetes` runs). Debian 12 ships only kubectl (package
# kubernetes-client, installed here when no kubectl is); its `kubernetes` source (1.20, every dependency vendored)
# builds offline with Debian's Go 1.19: about 5 minutes on 2 cores. Called by `scripts/install.sh --kubernetes`; as
# root, on Debian 12. `--packages`: only the Debian packages the build and a node need.
#   <cache>/kubernetes/<debian version>/bin/     kube-apiserver kube-controller-manager kube-scheduler kubelet
#                                                 (each static), etcd (Debian's etcd-server, unpacked: no service is
#                                                 started), pause (the pod sandbox, static, from the source's
#                                                 build/pause/linux/pause.c)
#   <cache>/kubernetes/<debian version>/SHA256SUMS  of bin/*, the source's .dsc and the recipe (a build that
#                                                 checks, of this RECIPE, is kept)
#   <cache>/kubernetes/current                     the build in use (dltestbed/lab/kube/build.py reads it)
# <cache>: ${XDG_CACHE_HOME:-~/.cache}/dltestbed (dltestbed/paths.py's cache_dir). One build at a time: a second
# waits for the first (a lock beside it), then finds it done.
# The source is fetched through apt with deb-src lines of its own (this machine's sources lists are not changed),
# so apt checks it against Debian's signed release files.
set -euo pipefail

VERSION="1.20.5+really1.20.2-1.1+deb12u1" # Debian 12's kubernetes source package
ETCD_VERSION="3.4.23-4+b4"                 # Debian 12's etcd-server
WHAT="cmd/kube-apiserver cmd/kube-controller-manager cmd/kube-scheduler cmd/kubelet"
RECIPE="static, providerless, dockerless, no kubectl" # how they are built: one of another recipe is made again

packages() {
    local need=()
    [[ -x /usr/lib/go-1.19/bin/go ]] || need+=(golang-1.19-go)
    command -v rsync >/dev/null || need+=(rsync)
    command -v jq >/dev/null || need+=(jq)
    command -v dpkg-source >/dev/null || need+=(dpkg-dev)
    command -v gcc >/dev/null || need+=(gcc)
    [[ -e /usr/lib/x86_64-linux-gnu/libc.a || -e /usr/lib/aarch64-linux-gnu/libc.a ]] || need+=(libc6-dev)
    command -v containerd >/dev/null || need+=(containerd)
    [[ -x /usr/lib/cni/bridge ]] || need+=(containernetworking-plugins)
    command -v kubectl >/dev/null || need+=(kubernetes-client) # to look at the lab's cluster: not built here
    if ((${#need[@]})); then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
    fi
}
packages
[[ "${1:-}" == --packages ]] && exit 0

cache="${XDG_CACHE_HOME:-$HOME/.cache}/dltestbed"
out="$cache/kubernetes/$VERSION"
mkdir -p "$cache/kubernetes"
exec 9>"$cache/kubernetes/build.lock"
flock 9 # a build under way elsewhere ends first
if [[ -f "$out/SHA256SUMS" && "$(cat "$out/recipe" 2>/dev/null)" == "$RECIPE" ]] &&
    (cd "$out" && sha256sum --quiet -c SHA256SUMS) 2>/dev/null; then
    ln -sfn "$VERSION" "$cache/kubernetes/current"
    echo "kubernetes $VERSION: built, checksums match ($out)"
    exit 0
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/dltestbed-kubernetes.XXXXXX")"
trap 'rm -rf "$work"' EXIT
chmod 755 "$work" # apt's _apt user reads what it downloads here
lists="$work/lists"
mkdir -p "$lists/partial" "$work/apt/archives/partial"
{
    echo "deb http://deb.debian.org/debian bookworm main"
    echo "deb-src http://deb.debian.org/debian bookworm main"
    echo "deb http://deb.debian.org/debian-security bookworm-security main"
    echo "deb-src http://deb.debian.org/debian-security bookworm-security main"
} >"$work/sources.list"
apt_own=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$lists" -o "Dir::Cache=$work/apt" -o APT::Sandbox::User=root)
apt-get -qq "${apt_own[@]}" update
cd "$work"
apt-get -qq "${apt_own[@]}" source --download-only "kubernetes=$VERSION" >/dev/null
apt-get -qq "${apt_own[@]}" download "etcd-server=$ETCD_VERSION" >/dev/null
dpkg-source -x --no-check "kubernetes_${VERSION#*:}.dsc" src >/dev/null # apt checked it against the release files

start=$SECONDS
# In a session of its own, so that a stop (TERM, INT) ends the compilers too, not the shell alone. Every binary
# static (CGO_ENABLED=0, as Debian's own rules build them): the kubelet is then built with the same flags as the
# control plane, so the packages they share are compiled once, not twice (on 2026-11-30, the same source from an
# empty Go cache: 386 s of compiling, not 543, after 84 s of generated files either way). Without the in-tree cloud
# providers and the kubelet's Docker shim (Kubernetes' own build tags `providerless` and `dockerless`: the lab's
# nodes run containerd through the CRI, on no cloud), whose SDKs were much of the compiling: 293 s in all, not 462.
TAGS="providerless,dockerless"
setsid bash -c 'cd src && PATH="/usr/lib/go-1.19/bin:$PATH" GOFLAGS="-mod=vendor -tags=$3" GOCACHE="$1/gocache" \
    GOPATH="$1/gopath" CGO_ENABLED=0 KUBE_STATIC_OVERRIDES=kubelet exec make WHAT="$2"' build "$work" "$WHAT" "$TAGS" \
    >"$work/make.log" 2>&1 9>&- &
make_pid=$!
trap 'kill -- -"$make_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
if ! wait "$make_pid"; then
    tail -20 "$work/make.log" >&2
    exit 1
fi
echo "kubernetes $VERSION: built in $((SECONDS - start)) s"

rm -rf "$out.new"
mkdir -p "$out.new/bin"
for b in $WHAT; do
    cp "src/_output/bin/${b#cmd/}" "$out.new/bin/"
done
dpkg-deb -x etcd-server_*.deb etcd
cp etcd/usr/bin/etcd "$out.new/bin/"
gcc -Os -static -DVERSION="v3.4-dltestbed" -o "$out.new/bin/pause" src/build/pause/linux/pause.c
cp "kubernetes_${VERSION#*:}.dsc" "$out.new/"
echo "$RECIPE" >"$out.new/recipe"
(cd "$out.new" && sha256sum bin/* ./*.dsc recipe >SHA256SUMS)
rm -rf "$out"
mv "$out.new" "$out"
ln -sfn "$VERSION" "$cache/kubernetes/current"
echo "kubernetes $VERSION: in $out (checksums: $out/SHA256SUMS)"
