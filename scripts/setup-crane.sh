#!/usr/bin/env bash
# Builds go-containerregistry's crane from its Go module (pinned in tools/crane/go.mod), which
# scripts/build-image.sh uses to assemble, check and export the OCI image without a container
# engine or a registry outside this machine.
#
#   bash scripts/setup-crane.sh     # prints the binary path as its last line
#
# The binary goes to ${GARDENER_ACL_CACHE:-$HOME/.cache/gardener-acl}/crane-<version>/crane and is
# never committed. Idempotent: a binary that reports the pinned version is kept. Measured on the
# 2-core machine: about 5 s with the module downloaded, 0.05 s warm.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mod="$root/tools/crane"
log() { printf 'setup-crane: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

command -v go >/dev/null 2>&1 || die "Go is required (>= 1.26); 'go' is not on PATH"
version="$(awk '($1 == "require" && $2 == "github.com/google/go-containerregistry") || $1 == "github.com/google/go-containerregistry" { print ($1 == "require" ? $3 : $2); exit }' "$mod/go.mod")"
[[ "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "cannot read the go-containerregistry version from $mod/go.mod"

cache="${GARDENER_ACL_CACHE:-$HOME/.cache/gardener-acl}"
dir="$cache/crane-$version"
bin="$dir/crane"
mkdir -p "$dir"
if command -v flock >/dev/null 2>&1; then
  exec 9>"$dir/.lock"
  flock 9
fi

if [[ "${SETUP_CRANE_FORCE:-}" != 1 && -x "$bin" && "$("$bin" version 2>/dev/null)" == "$version" ]]; then
  log "crane $version is up to date"
  echo "$bin"
  exit 0
fi

log "building crane $version with $(go env GOVERSION) ..."
tmp="$dir/.crane.tmp.$$"
(cd "$mod" && CGO_ENABLED=0 go build -p "${GARDENER_ACL_BUILD_JOBS:-2}" -trimpath -mod=readonly -buildvcs=false -ldflags "-s -w" \
  -o "$tmp" github.com/google/go-containerregistry/cmd/crane) || { rm -f "$tmp"; die "building crane failed"; }
mv -f "$tmp" "$bin"
[[ "$("$bin" version)" == "$version" ]] || die "$bin does not report version $version"
log "built $bin"
echo "$bin"
