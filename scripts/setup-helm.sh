#!/usr/bin/env bash
# Builds the Helm CLI from its published Go module (helm.sh/helm/v3, pinned in
# tools/helm/go.mod) so the chart tests (test/charts/) can lint and render
# charts/ without a Helm installation.
#
#   bash scripts/setup-helm.sh            # prints the binary path as its last line
#   export HELM_BIN=$(bash scripts/setup-helm.sh | tail -n1)
#
# The binary goes to
#   ${GARDENER_ACL_CACHE:-$HOME/.cache/gardener-acl}/helm-<version>/helm
# and is never committed. Idempotent: a binary that exists and reports the
# pinned version is kept. Go module and build caches stay at Go's defaults
# (override GOMODCACHE/GOCACHE as usual). The ldflags mirror Helm's Makefile:
# version string, and the default Kubernetes version (.Capabilities) derived
# from the k8s.io/client-go it is built against, as Helm's release builds do.
#
# Measured on the 2-core build machine with Go 1.26.8, empty GOCACHE, modules already in
# GOMODCACHE (`go mod tidy` there took 7 s): 3m19s wall, 155 CPU-s, peak RSS 0.9 GB; GOCACHE
# grows by ~0.7 GB; binary 62 MB. Warm run (binary present): 0.07 s.
# Environment:
#   GARDENER_ACL_CACHE      cache root (default ~/.cache/gardener-acl)
#   GARDENER_ACL_BUILD_JOBS go build -p (default 2)
#   SETUP_HELM_FORCE=1      rebuild even if the binary is up to date
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mod="$root/tools/helm"

log() { printf 'setup-helm: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

command -v go >/dev/null 2>&1 || die "Go is required (>= 1.26); 'go' is not on PATH"
go_minor="$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')"
[[ "$go_minor" =~ ^[0-9]+$ ]] && ((go_minor >= 26)) \
  || die "Go >= 1.26 is required to build Helm v3.22 (found $(go env GOVERSION))"

mod_version() { # <go.mod> <module path>
  awk -v m="$2" '($1 == m || ($1 == "require" && $2 == m)) && $0 !~ /=>/ {
      print ($1 == "require" ? $3 : $2); exit }' "$1"
}
HELM_VERSION="$(mod_version "$mod/go.mod" helm.sh/helm/v3)"
[[ "$HELM_VERSION" =~ ^v3\.[0-9]+\.[0-9]+$ ]] || die "cannot read helm.sh/helm/v3 version from $mod/go.mod"
CLIENT_GO_VERSION="$(mod_version "$mod/go.mod" k8s.io/client-go)"
[[ "$CLIENT_GO_VERSION" =~ ^v0\.([0-9]+)\.[0-9]+$ ]] || die "cannot read k8s.io/client-go version from $mod/go.mod"
K8S_MINOR="${BASH_REMATCH[1]}"

cache="${GARDENER_ACL_CACHE:-$HOME/.cache/gardener-acl}"
dir="$cache/helm-$HELM_VERSION"
bin="$dir/helm"
jobs="${GARDENER_ACL_BUILD_JOBS:-2}"
mkdir -p "$dir"

# One setup at a time per cache directory (parallel test workers, CI steps).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$dir/.lock"
  flock 9
fi

helm_ok() {
  [[ -x "$bin" ]] && [[ "$("$bin" version --template '{{.Version}}' 2>/dev/null)" == "$HELM_VERSION" ]]
}

if [[ "${SETUP_HELM_FORCE:-}" != 1 ]] && helm_ok; then
  log "helm $HELM_VERSION is up to date"
  echo "$bin"
  exit 0
fi

# go build into a temporary file, then rename: an interrupted build never
# leaves a half-written binary behind.
log "building helm $HELM_VERSION with $(go env GOVERSION), -p $jobs ..."
start=$SECONDS
tmp="$dir/.helm.tmp.$$"
(cd "$mod" && CGO_ENABLED=0 go build -p "$jobs" -trimpath -mod=readonly -buildvcs=false \
    -ldflags "-s -w \
      -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION \
      -X helm.sh/helm/v3/internal/version.metadata= \
      -X helm.sh/helm/v3/internal/version.gitTreeState=clean \
      -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 \
      -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$K8S_MINOR \
      -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 \
      -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$K8S_MINOR" \
    -o "$tmp" helm.sh/helm/v3/cmd/helm) || { rm -f "$tmp"; die "building helm failed"; }
mv -f "$tmp" "$bin"
helm_ok || die "$bin does not report version $HELM_VERSION"
log "built $bin in $((SECONDS - start))s"
echo "$bin"
