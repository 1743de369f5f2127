#!/usr/bin/env bash
# Builds Gardener's own components from the gardener/gardener Go module (pinned in
# tools/gardener/go.mod) so that Gardener's code, not our reading of it, judges the
# extension contract in the tests:
#   gardener-resource-manager  cmd/gardener-resource-manager, unchanged
#   gardener-contract          tools/gardener/contract: gardenlet's Extension deployer
#                              (pkg/component/extensions/extension), its health checks
#                              (pkg/utils/kubernetes/health) and Gardener's API validation,
#                              driven from the command line
#
#   bash scripts/setup-gardener.sh            # prints the bin directory as its last line
#   export GARDENER_BIN=$(bash scripts/setup-gardener.sh | tail -n1)
#
# Binaries go to ${GARDENER_ACL_CACHE:-$HOME/.cache/gardener-acl}/gardener-<version>-<hash>/bin,
# where <hash> covers every file of tools/gardener (go.mod, go.sum, the driver's sources), so a
# changed driver or pin builds into a new directory; never committed. Idempotent: a directory
# whose binaries all exist is kept. Go module and build caches stay at Go's defaults.
# Environment:
#   GARDENER_ACL_CACHE      cache root (default ~/.cache/gardener-acl)
#   GARDENER_ACL_BUILD_JOBS go build -p (default 2)
#   SETUP_GARDENER_FORCE=1  rebuild even if the binaries exist
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mod="$root/tools/gardener"

log() { printf 'setup-gardener: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

command -v go >/dev/null 2>&1 || die "Go is required (>= 1.26); 'go' is not on PATH"
go_minor="$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')"
[[ "$go_minor" =~ ^[0-9]+$ ]] && ((go_minor >= 26)) \
  || die "Go >= 1.26 is required to build gardener v1.149 (found $(go env GOVERSION))"

GARDENER_VERSION="$(awk '$1 == "github.com/gardener/gardener" { print $2; exit }' "$mod/go.mod")"
[[ "$GARDENER_VERSION" =~ ^v1\.[0-9]+\.[0-9]+$ ]] || die "cannot read github.com/gardener/gardener version from $mod/go.mod"
sources_hash="$(cd "$mod" && find . -type f \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' \) -print0 \
  | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-12)"

cache="${GARDENER_ACL_CACHE:-$HOME/.cache/gardener-acl}"
bin="$cache/gardener-$GARDENER_VERSION-$sources_hash/bin"
jobs="${GARDENER_ACL_BUILD_JOBS:-2}"
mkdir -p "$bin"

if command -v flock >/dev/null 2>&1; then
  exec 9>"$bin/.lock"
  flock 9
fi

# name -> package
declare -A packages=(
  [gardener-resource-manager]=github.com/gardener/gardener/cmd/gardener-resource-manager
  [gardener-contract]=./contract
)

for name in "${!packages[@]}"; do
  if [[ "${SETUP_GARDENER_FORCE:-}" != 1 && -x "$bin/$name" ]]; then
    log "$name ($GARDENER_VERSION) is up to date"
    continue
  fi
  start=$SECONDS
  tmp="$bin/.$name.tmp.$$"
  log "building $name from gardener $GARDENER_VERSION with $(go env GOVERSION), -p $jobs ..."
  (cd "$mod" && CGO_ENABLED=0 go build -p "$jobs" -trimpath -mod=readonly -buildvcs=false \
      -ldflags "-s -w" -o "$tmp" "${packages[$name]}") || { rm -f "$tmp"; die "building $name failed"; }
  mv -f "$tmp" "$bin/$name"
  log "built $bin/$name in $((SECONDS - start))s"
done
# Gardener's own CRDs, taken from the pinned module, never committed: the seed's
# VerticalPodAutoscalers (the chart renders one per Deployment; the chart tests install it into
# the test kube-apiserver, so the API server checks our objects against Gardener's schema), and
# gardener-operator's Garden (the garden ACL reads the runtime cluster's from it).
declare -A crds=(
  [autoscaling.k8s.io_verticalpodautoscalers.yaml]=example/seed-crds/10-crd-autoscaling.k8s.io_verticalpodautoscalers.yaml
  [operator.gardener.cloud_gardens.yaml]=example/operator/10-crd-operator.gardener.cloud_gardens.yaml
)
moddir=""
for name in "${!crds[@]}"; do
  crd="$bin/crds/$name"
  [[ -s "$crd" ]] && continue
  [[ -n "$moddir" ]] || moddir="$(cd "$mod" && go list -m -f '{{.Dir}}' github.com/gardener/gardener)"
  mkdir -p "$bin/crds"
  cp "$moddir/${crds[$name]}" "$crd.tmp.$$" && mv -f "$crd.tmp.$$" "$crd" \
    || die "cannot copy the CRD $name from gardener $GARDENER_VERSION"
  chmod u+w "$crd"
done
echo "$bin"
