#!/usr/bin/env bash
# Smoke check for tools/istio-render: renders test/istio/fixtures/smoke.yaml
# for the ingress gateway and asserts, on Istio's own output, that
#   * the gateway Service's 443 -> 9443 mapping produced listener 0.0.0.0_9443,
#   * it has a filter chain with server_names [api.a.p.internal.example.com],
#   * whose first network filter is the EnvoyFilter's RBAC filter (acl-api),
#     followed by Istio's tcp_proxy to the shoot's kube-apiserver.
# Usage: bash test/istio/smoke.sh [path/to/istio-render]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="${1:-${ISTIO_RENDER:-}}"
if [[ -z "$bin" ]]; then
  bin="$(bash "$root/scripts/setup-istio-render.sh" | tail -n1)"
fi
out="$(mktemp)"
trap 'rm -f "$out"' EXIT

"$bin" --labels app=istio-ingressgateway,istio=ingressgateway --namespace istio-ingress \
  "$root/test/istio/fixtures/smoke.yaml" >"$out"

node - "$out" <<'JS'
const fs = require('fs');
const out = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const fail = (msg) => { console.error('smoke: FAIL: ' + msg); process.exit(1); };
const sni = 'api.a.p.internal.example.com';
const l = out.listeners.find((x) => x.name === '0.0.0.0_9443');
if (!l) fail('no listener 0.0.0.0_9443; listeners: ' + out.listeners.map((x) => x.name).join(', '));
if (l.address?.socket_address?.port_value !== 9443) fail('listener 0.0.0.0_9443 does not bind 9443');
const fc = (l.filter_chains ?? []).find((c) => (c.filter_chain_match?.server_names ?? []).includes(sni));
if (!fc) fail('no filter chain with server_names ' + sni);
const [first, second] = fc.filters;
if (first?.name !== 'acl-api') fail('first filter is ' + first?.name + ', want acl-api');
if (first.typed_config?.['@type'] !== 'type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC')
  fail('first filter has type ' + first.typed_config?.['@type']);
if (first.typed_config.stat_prefix !== 'envoyrbac') fail('RBAC stat_prefix not carried over');
if (second?.name !== 'envoy.filters.network.tcp_proxy') fail('second filter is ' + second?.name);
const cluster = second.typed_config?.cluster;
if (cluster !== 'outbound|443||kube-apiserver.shoot--p--a.svc.cluster.local') fail('tcp_proxy cluster is ' + cluster);
if (!out.clusters.some((c) => c.name === cluster)) fail('cluster ' + cluster + ' not rendered');
console.log('smoke: OK: 0.0.0.0_9443 chain for ' + sni + ': ' + fc.filters.map((f) => f.name).join(' -> '));
JS
