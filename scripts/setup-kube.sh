#!/usr/bin/env bash
# Builds a real kube-apiserver and etcd from their published Go modules for the
# envtest-style harness in test/kube/control-plane.ts.
#
#   bash scripts/setup-kube.sh            # prints the bin directory as its last line
#   export KUBE_ASSETS=$(bash scripts/setup-kube.sh | tail -n1)
#
# Versions are read from tools/kube/go.mod (k8s.io/kubernetes) and
# tools/etcd/go.mod (go.etcd.io/etcd/server/v3). Binaries go to
#   ${GARDENER_ACL_CACHE:-$HOME/.cache/gardener-acl}/kube-<k8s version>/bin/
# and are never committed. Idempotent: a binary that exists and reports the
# pinned version is kept. Go module and build caches stay at Go's defaults
# (override GOMODCACHE/GOCACHE as usual).
#
# Measured on a 2-core/24 GiB Debian 12 machine with Go 1.26.8 (k8s v1.37.1,
# etcd v3.7.3), empty GOMODCACHE and GOCACHE, while another Go build shared the
# CPUs: 8m38s wall (etcd 40s incl. downloads, kube-apiserver 478s), 540 CPU-s;
# downloads 114 MB of module zips (714 MB extracted in GOMODCACHE); GOCACHE
# grows by 2.9 GB (`go clean -cache` may reclaim it); peak RSS of one process
# 2.3 GB (system-wide ~2 GB used). Binaries: kube-apiserver 119 MB, etcd 25 MB.
# Warm run (binaries present): 0.2 s.
# Environment:
#   GARDENER_ACL_CACHE      cache root (default ~/.cache/gardener-acl)
#   GARDENER_ACL_BUILD_JOBS go build -p (default 2)
#   SETUP_KUBE_FORCE=1      rebuild even if the binaries are up to date
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
kube_mod="$root/tools/kube"
etcd_mod="$root/tools/etcd"

log() { printf 'setup-kube: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

command -v go >/dev/null 2>&1 || die "Go is required (>= 1.26); 'go' is not on PATH"
go_minor="$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')"
[[ "$go_minor" =~ ^[0-9]+$ ]] && ((go_minor >= 26)) \
  || die "Go >= 1.26 is required to build Kubernetes v1.37 (found $(go env GOVERSION))"

# Pinned versions, straight from the tool modules.
mod_version() { # <go.mod> <module path>
  awk -v m="$2" '($1 == m || ($1 == "require" && $2 == m)) && $0 !~ /=>/ {
      print ($1 == "require" ? $3 : $2); exit }' "$1"
}
KUBE_VERSION="$(mod_version "$kube_mod/go.mod" k8s.io/kubernetes)"
ETCD_VERSION="$(mod_version "$etcd_mod/go.mod" go.etcd.io/etcd/server/v3)"
[[ "$KUBE_VERSION" =~ ^v1\.([0-9]+)\.[0-9]+$ ]] || die "cannot read k8s.io/kubernetes version from $kube_mod/go.mod"
KUBE_MINOR="${BASH_REMATCH[1]}"
[[ "$ETCD_VERSION" =~ ^v3\.[0-9]+\.[0-9]+$ ]] || die "cannot read etcd version from $etcd_mod/go.mod"

cache="${GARDENER_ACL_CACHE:-$HOME/.cache/gardener-acl}"
bin="$cache/kube-$KUBE_VERSION/bin"
jobs="${GARDENER_ACL_BUILD_JOBS:-2}"
mkdir -p "$bin"

# One setup at a time per cache directory (parallel test workers, CI steps).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$cache/.setup-kube.lock"
  flock 9
fi

kube_binary_ok() { # <name>
  [[ -x "$bin/$1" ]] &&
    [[ "$("$bin/$1" --version 2>/dev/null)" == "Kubernetes $KUBE_VERSION" ]]
}
etcd_ok() {
  local out
  [[ -x "$bin/etcd" ]] && out="$("$bin/etcd" --version 2>/dev/null)" &&
    [[ "$out" == "etcd Version: ${ETCD_VERSION#v}"$'\n'* ]]
}

# go build into a temporary file, then rename: an interrupted build never
# leaves a half-written binary behind.
build() { # <module dir> <output name> <package> [ldflags]
  local dir="$1" out="$2" pkg="$3" ldflags="${4:-}" start tmp
  start=$SECONDS
  tmp="$bin/.$out.tmp.$$"
  log "building $out ($pkg) with $(go env GOVERSION), -p $jobs ..."
  (cd "$dir" && CGO_ENABLED=0 go build -p "$jobs" -trimpath -mod=readonly -buildvcs=false \
      -ldflags "-s -w $ldflags" -o "$tmp" "$pkg") || { rm -f "$tmp"; die "building $out failed"; }
  mv -f "$tmp" "$bin/$out"
  log "built $bin/$out in $((SECONDS - start))s"
}

if [[ "${SETUP_KUBE_FORCE:-}" == 1 ]] || ! etcd_ok; then
  build "$etcd_mod" etcd go.etcd.io/etcd/server/v3
  etcd_ok || die "$bin/etcd does not report version $ETCD_VERSION"
else
  log "etcd $ETCD_VERSION is up to date"
fi

# kube-apiserver, and kube-controller-manager, whose garbage collector removes what an uninstall
# leaves to owner references (test/support/kube-garbage-collector.ts).
for cmd in kube-apiserver kube-controller-manager; do
  if [[ "${SETUP_KUBE_FORCE:-}" == 1 ]] || ! kube_binary_ok "$cmd"; then
    build "$kube_mod" "$cmd" "k8s.io/kubernetes/cmd/$cmd" \
      "-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION \
       -X k8s.io/component-base/version.gitMajor=1 \
       -X k8s.io/component-base/version.gitMinor=$KUBE_MINOR \
       -X k8s.io/component-base/version.gitTreeState=clean"
    kube_binary_ok "$cmd" || die "$bin/$cmd does not report version $KUBE_VERSION"
  else
    log "$cmd $KUBE_VERSION is up to date"
  fi
done

# The tests' stand-in for a kubelet's port-forward endpoint (tools/kube/kubelet-standin), rebuilt
# when its sources or the module's go.mod/go.sum change.
standin_hash="$(cd "$kube_mod" && cat go.mod go.sum kubelet-standin/*.go | sha256sum | cut -c1-16)"
if [[ "${SETUP_KUBE_FORCE:-}" == 1 || ! -x "$bin/kubelet-standin" || ! -f "$bin/kubelet-standin.src-hash" ||
      "$(cat "$bin/kubelet-standin.src-hash" 2>/dev/null)" != "$standin_hash" ]]; then
  build "$kube_mod" kubelet-standin ./kubelet-standin
  echo "$standin_hash" > "$bin/kubelet-standin.src-hash"
else
  log "kubelet-standin is up to date"
fi

echo "$bin"
