#!/usr/bin/env bash
# Builds tools/istio-render: Istio's own gateway config generation
# (istio.io/istio/pilot/pkg/networking/core ConfigGenTest), run offline, which
# turns Gateway/VirtualService/DestinationRule/EnvoyFilter + Service YAML into
# the listeners/routes/clusters an ingress gateway receives; and, as
# `istio-render serve`, Istio's xDS discovery server for a real Envoy
# (tools/istio-render/serve.go).
#
#   bash scripts/setup-istio-render.sh     # prints the binary path as its last line
#   export ISTIO_RENDER=$(bash scripts/setup-istio-render.sh | tail -n1)
#
# The binary goes to
#   ${GARDENER_ACL_CACHE:-$HOME/.cache/gardener-acl}/istio-render-<istio.io/istio version>/istio-render
# and is never committed. Idempotent: an existing binary built from the same
# sources (hash recorded next to it) is kept. Go module and build caches stay
# at Go's defaults (override GOMODCACHE/GOCACHE as usual).
#
# Cold run measured on the 2-core build machine (empty module and build caches,
# another Go build competing): 4m20s wall, 345 s CPU, peak RSS 1.9 GB (link),
# 129 module zips = 132 MB download (639 MB in GOMODCACHE), 1.7 GB GOCACHE,
# 112 MiB binary. Version pins and why: tools/istio-render/go.mod.
# Environment:
#   GARDENER_ACL_CACHE         cache root (default ~/.cache/gardener-acl)
#   GARDENER_ACL_BUILD_JOBS    go build -p (default 2)
#   SETUP_ISTIO_RENDER_FORCE=1 rebuild even if the binary is up to date
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$root/tools/istio-render"

log() { printf 'setup-istio-render: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

command -v go >/dev/null 2>&1 || die "Go is required (>= 1.26); 'go' is not on PATH"
go_minor="$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')"
[[ "$go_minor" =~ ^[0-9]+$ ]] && ((go_minor >= 26)) \
  || die "Go >= 1.26 is required (found $(go env GOVERSION))"

ISTIO_VERSION="$(awk '$1 == "istio.io/istio" && $0 !~ /=>/ { print $2; exit }' "$src/go.mod")"
[[ "$ISTIO_VERSION" =~ ^v0\.0\.0-[0-9]{14}-[0-9a-f]{12}$ ]] \
  || die "cannot read the istio.io/istio pseudo-version from $src/go.mod"
# go.mod, go.sum, then every *.go file in byte order of its name (test/istio/istio-render.ts
# computes the same hash to tell a stale binary).
mapfile -t go_files < <(find "$src" -maxdepth 1 -name '*.go' -printf '%f\n' | LC_ALL=C sort)
((${#go_files[@]} > 0)) || die "no Go sources in $src"
src_hash="$(cd "$src" && cat go.mod go.sum "${go_files[@]}" | sha256sum | cut -c1-16)"

cache="${GARDENER_ACL_CACHE:-$HOME/.cache/gardener-acl}"
dir="$cache/istio-render-$ISTIO_VERSION"
bin="$dir/istio-render"
jobs="${GARDENER_ACL_BUILD_JOBS:-2}"
mkdir -p "$dir"

# One setup at a time per cache directory (parallel test workers, CI steps).
exec 9>"$dir/.lock"
flock 9

if [[ "${SETUP_ISTIO_RENDER_FORCE:-}" != 1 && -x "$bin" && -f "$bin.src-hash" &&
      "$(cat "$bin.src-hash")" == "$src_hash" ]]; then
  log "up to date: $bin"
  echo "$bin"
  exit 0
fi

log "building istio-render against istio.io/istio@$ISTIO_VERSION (-p $jobs; cold: several minutes)"
start=$SECONDS
tmp="$dir/.istio-render.tmp.$$"
trap 'rm -f "$tmp"' EXIT
(
  cd "$src"
  # GOTOOLCHAIN=local: never try to download another Go toolchain.
  GOTOOLCHAIN=local go build -p "$jobs" -mod=readonly -buildvcs=false -trimpath \
    -ldflags="-s -w" -o "$tmp" .
) >&2
"$tmp" --version >&2 || die "built binary does not run"
mv -f "$tmp" "$bin"
trap - EXIT
echo "$src_hash" >"$bin.src-hash"
log "built in $((SECONDS - start))s: $bin"
echo "$bin"
