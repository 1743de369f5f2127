#!/usr/bin/env bash
# Builds the gardener-acl OCI image without a container engine and without pulling a base image,
# then runs it. Used by CI (scripts/test-all.sh) so the image is built and run on every change.
#
#   bash scripts/build-image.sh [OUT_DIR]     # default: $GARDENER_ACL_CACHE/image
#
# 1. Base layer: Node.js 20 from Debian's own packages (trixie's nodejs and exactly its
#    dependency closure, resolved by apt-get in a private apt root and unpacked with dpkg-deb),
#    plus what a distroless base carries: the merged-/usr links, /tmp, and a nonroot user 65532.
# 2. App layer: the compiled application (tsc), its production node_modules (npm ci --omit=dev),
#    the charts (for `registration`) and the embedded example (for `render`).
# 3. crane (go-containerregistry, built from its Go module) assembles both layers on an empty
#    base in a registry it serves on 127.0.0.1 only, sets the entrypoint, user and env as the
#    Containerfile does, checks the image (crane validate) and writes an OCI image layout to
#    OUT_DIR/oci plus OUT_DIR/image.tar.
# 4. The image's filesystem (crane export) runs in a private mount namespace with chroot as user
#    65532: it prints its version and renders the embedded example seed, which must equal what
#    `npm start` prints from the source tree.
# Prints the package versions, the layer sizes and the image size.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
log() { printf 'build-image: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

cache="${GARDENER_ACL_CACHE:-$HOME/.cache/gardener-acl}"
out="${1:-$cache/image}"
version="$(node -p 'require("./package.json").version')"
crane="$(bash scripts/setup-crane.sh | tail -n 1)"
work="$(mktemp -d)"
registry_pid=""
cleanup() {
  [[ -n "$registry_pid" ]] && kill "$registry_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
# Reproducible tar: sorted, fixed owner and time.
pack() { # <dir> <out.tar.gz>
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 --format=posix \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime -C "$1" -cf - . | gzip -n -6 >"$2"
}

# --- 1. Node.js from Debian's packages -------------------------------------------------------
apt_root="$cache/debian-trixie-apt"
mkdir -p "$apt_root"/etc/apt/{sources.list.d,preferences.d,apt.conf.d} "$apt_root"/var/lib/apt/lists/partial \
  "$apt_root"/var/cache/apt/archives/partial "$apt_root"/var/lib/dpkg
: >"$apt_root/var/lib/dpkg/status" # nothing installed: apt resolves the whole dependency closure
cat >"$apt_root/etc/apt/sources.list" <<'EOF'
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security trixie-security main
EOF
apt=(apt-get -q -o "Dir=$apt_root" -o "Dir::State::status=$apt_root/var/lib/dpkg/status"
  -o "Dir::Etc::SourceParts=$apt_root/etc/apt/sources.list.d" -o "Dir::Etc::Parts=$apt_root/etc/apt/apt.conf.d"
  -o "Dir::Etc::PreferencesParts=$apt_root/etc/apt/preferences.d" -o APT::Architecture=amd64
  -o APT::Install-Recommends=false -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
log "resolving nodejs and its dependencies in Debian trixie"
"${apt[@]}" update >/dev/null
rm -f "$apt_root"/var/cache/apt/archives/*.deb
"${apt[@]}" install --download-only -y nodejs >/dev/null
base="$work/base"
mkdir -p "$base"
for deb in "$apt_root"/var/cache/apt/archives/*.deb; do dpkg-deb -x "$deb" "$base"; done
node_pkg="$(dpkg-deb -f "$apt_root"/var/cache/apt/archives/nodejs_*.deb Version)"
log "Debian packages: $(for deb in "$apt_root"/var/cache/apt/archives/*.deb; do dpkg-deb -f "$deb" Package; done | tr '\n' ' ')"
# What base-files and a distroless base provide; no shell, no package manager.
for d in bin lib lib64 sbin; do [[ -e "$base/$d" ]] || ln -s "usr/$d" "$base/$d"; done
mkdir -p "$base/tmp" "$base/etc" "$base/proc" "$base/dev" "$base/home/nonroot"
chmod 1777 "$base/tmp"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$base/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$base/etc/group"
chown 65532:65532 "$base/home/nonroot"
rm -rf "$base/usr/share/doc" "$base/usr/share/man" "$base/usr/share/lintian"
pack "$base" "$work/base.tar.gz"

# --- 2. The application --------------------------------------------------------------------
log "compiling and installing production dependencies"
app="$work/app/app"
mkdir -p "$app"
# No source maps: theirs hold paths relative to this checkout, which would make the layer differ by
# where the repository was cloned; the image carries no sources to map to anyway.
npx tsc -p tsconfig.json --outDir "$work/dist" --sourceMap false
cp package.json package-lock.json "$app/"
(cd "$app" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
rm -f "$app/node_modules/.package-lock.json"
mkdir -p "$app/dist"
cp -r "$work/dist/src" "$app/dist/src"
cp -r examples "$app/dist/examples"
cp -r charts "$app/charts"
pack "$work/app" "$work/app.tar.gz"

# --- 3. The image ------------------------------------------------------------------------------
port="$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
"$crane" registry serve --address "127.0.0.1:$port" >"$work/registry.log" 2>&1 &
registry_pid=$!
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/v2/" >/dev/null && break; sleep 0.1; done
ref="127.0.0.1:$port/gardener-acl:$version"
export GOFLAGS="" # crane uses plain HTTP for a loopback registry
"$crane" append --insecure --oci-empty-base -f "$work/base.tar.gz" -t "$ref" >/dev/null
"$crane" append --insecure -b "$ref" -f "$work/app.tar.gz" -t "$ref" >/dev/null
digest="$("$crane" mutate --insecure "$ref" -t "$ref" \
  --entrypoint=/usr/bin/node,/app/dist/src/cli/main.js --cmd=--help --user=65532:65532 --workdir=/app \
  --env=NODE_ENV=production --env=PATH=/usr/local/bin:/usr/bin:/bin \
  --label=org.opencontainers.image.title=gardener-acl --label="org.opencontainers.image.version=$version" \
  --label="org.opencontainers.image.base.name=debian:trixie nodejs $node_pkg")"
"$crane" validate --insecure --remote "$ref" >/dev/null || die "crane validate refused the image"
rm -rf "$out"
mkdir -p "$out"
"$crane" pull --insecure --format=oci "$ref" "$out/oci"
"$crane" pull --insecure "$ref" "$out/image.tar"
"$crane" manifest --insecure "$ref" >"$out/manifest.json"
"$crane" config --insecure "$ref" >"$out/config.json"

# --- 4. Run it ---------------------------------------------------------------------------------
rootfs="$work/rootfs"
mkdir -p "$rootfs"
"$crane" export --insecure "$ref" - | tar -x -C "$rootfs"
entry=(/usr/bin/node /app/dist/src/cli/main.js)
# The image has no shell and no env(1): the environment is set before chroot.
in_image() { # the image's entrypoint with the given args, as its user, in a private mount namespace
  unshare --mount --propagation private -- sh -c '
    rootfs="$1"; shift
    mount --rbind /dev "$rootfs/dev" && mount -t proc proc "$rootfs/proc" && cd "$rootfs" &&
      exec env -i HOME=/home/nonroot NODE_ENV=production PATH=/usr/bin:/bin "$(command -v chroot)" --userspec=65532:65532 "$rootfs" "$@"' sh "$rootfs" "${entry[@]}" "$@"
}
shown_version="$(in_image version)"
[[ "$shown_version" == "gardener-acl $version" ]] || die "the image printed \"$shown_version\", not \"gardener-acl $version\""
in_image render >"$out/render-in-image.yaml"
npx tsx src/cli/main.ts render >"$work/render-from-source.yaml"
cmp -s "$out/render-in-image.yaml" "$work/render-from-source.yaml" || die "the image renders the example seed differently from the source tree"

compressed="$(node -e 'const m=require(process.argv[1]); console.log(m.layers.reduce((n,l)=>n+l.size,0)+m.config.size)' "$out/manifest.json")"
layers="$(node -e 'const m=require(process.argv[1]); console.log(m.layers.map((l)=>(l.size/1048576).toFixed(1)+" MiB").join(" + "))' "$out/manifest.json")"
echo "image: gardener-acl:$version ${digest##*@}"
echo "image: base Node.js $node_pkg from Debian trixie packages"
echo "image: runs as $(node -e 'console.log(require(process.argv[1]).config.User)' "$out/config.json"); printed \"$shown_version\"; rendered the example seed ($(grep -c '^kind: EnvoyFilter' "$out/render-in-image.yaml") EnvoyFilters), identical to the source tree's"
echo "image: layers $layers; compressed $(awk -v b="$compressed" 'BEGIN { printf "%.1f MiB", b / 1048576 }'); unpacked $(du -sm "$rootfs" | cut -f1) MiB"
echo "image: OCI layout $out/oci, tarball $out/image.tar"
