{{/* Names are fixed rather than release-derived: Gardener installs the chart once per seed,
     and the RBAC, Lease and webhook registration refer to them. */}}
{{- define "gardener-acl.name" -}}gardener-acl{{- end -}}

{{- define "gardener-acl.labels" -}}
app.kubernetes.io/name: gardener-acl
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "gardener-acl.selectorLabels" -}}
app.kubernetes.io/name: gardener-acl
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gardener-acl.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* The ServiceAccount's user name, as the API server reports it in admission requests. */}}
{{- define "gardener-acl.serviceAccountUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ include "gardener-acl.name" . }}
{{- end -}}

{{- define "gardener-acl.webhookTLSSecret" -}}
{{- if eq .Values.webhook.tls.mode "secret" -}}{{ .Values.webhook.tls.secretName }}{{- else -}}gardener-acl-webhook-tls{{- end -}}
{{- end -}}

{{/* Certificate material given in the values (modes secret and inline); mode managed has none:
     the controller keeps it in Secrets at run time. */}}
{{- define "gardener-acl.webhookCerts" -}}
{{- $tls := .Values.webhook.tls -}}
{{- dict "crt" $tls.crt "key" $tls.key "caBundle" $tls.caBundle | toJson -}}
{{- end -}}

{{/* Values of the reference extension's chart (stackitcloud/gardener-extension-acl), accepted so
     that its ControllerDeployment values work unchanged when switching over; each maps to ours
     where it means the same and wins over our default. See README "Migrating from the reference
     extension". */}}
{{- define "gardener-acl.replicas" -}}
{{- if hasKey .Values "replicaCount" -}}{{ .Values.replicaCount }}{{- else -}}{{ .Values.replicas }}{{- end -}}
{{- end -}}

{{- define "gardener-acl.pullPolicy" -}}
{{- .Values.imagePullPolicy | default .Values.image.pullPolicy -}}
{{- end -}}

{{- define "gardener-acl.workers" -}}
{{- $controllers := .Values.controllers | default dict -}}
{{- if hasKey $controllers "concurrentSyncs" -}}{{ $controllers.concurrentSyncs }}{{- else -}}{{ .Values.controller.workers }}{{- end -}}
{{- end -}}

{{/* The reference's flat resources.requests/limits meant its only container, the controller. */}}
{{- define "gardener-acl.controllerResources" -}}
{{- $flat := pick .Values.resources "requests" "limits" -}}
{{- if $flat -}}{{ toYaml $flat }}{{- else -}}{{ toYaml .Values.resources.controller }}{{- end -}}
{{- end -}}

{{- define "gardener-acl.operatorConfig" -}}
{{- $config := deepCopy .Values.config -}}
{{- $_ := set $config "additionalAllowedCIDRs" (concat ($config.additionalAllowedCIDRs | default list) (.Values.additionalAllowedCidrs | default list) | uniq) -}}
{{- toYaml $config -}}
{{- end -}}

{{/* Reference values with no counterpart here, named on the Deployment so `kubectl describe`
     shows what the switch-over left without effect. */}}
{{- define "gardener-acl.ignoredReferenceValues" -}}
{{- $ignored := list -}}
{{- range $key := list "disableControllers" "imageVectorOverwrite" -}}
{{- if hasKey $.Values $key -}}{{- $ignored = append $ignored $key -}}{{- end -}}
{{- end -}}
{{- range $key := list "ignoreOperationAnnotation" "healthcheck" -}}
{{- if hasKey ($.Values.controllers | default dict) $key -}}{{- $ignored = append $ignored (printf "controllers.%s" $key) -}}{{- end -}}
{{- end -}}
{{- join ", " $ignored -}}
{{- end -}}

{{/* The seed webhook runs apart from the controller: own name, labels, ServiceAccount. Its pods
     carry another app.kubernetes.io/name so that the two Deployments' selectors never overlap
     (and the controller Deployment keeps the selector it always had). */}}
{{- define "gardener-acl.webhookName" -}}gardener-acl-webhook{{- end -}}

{{- define "gardener-acl.webhookSelectorLabels" -}}
app.kubernetes.io/name: gardener-acl-webhook
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gardener-acl.webhookLabels" -}}
{{ include "gardener-acl.webhookSelectorLabels" . }}
app.kubernetes.io/part-of: gardener-acl
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The seed Prometheus (namespace garden) may scrape /metrics on `port`: Gardener's
     docs/operations/network_policies.md, "Seed System Namespaces", for a pod outside `garden`
     (an extension-* namespace). The pods carry prometheus.io/scrape and prometheus.io/port
     (docs/extensions/logging-and-monitoring.md). */}}
{{- define "gardener-acl.seedScrapeAnnotations" -}}
networking.resources.gardener.cloud/from-all-seed-scrape-targets-allowed-ports: '[{"protocol":"TCP","port":{{ .port }}}]'
networking.resources.gardener.cloud/namespace-selectors: '[{"matchLabels":{"kubernetes.io/metadata.name":"garden"}}]'
networking.resources.gardener.cloud/pod-label-selector-namespace-alias: extensions
{{- end -}}

{{/* The controller keeps the seed webhook's certificates and registration (webhook.tls.mode managed). */}}
{{/* Rendered by gardener-operator for the runtime cluster (it sets gardener.runtimeCluster.enabled,
     the string "true"): the chart then runs `garden-controller`, which protects the virtual garden,
     and no seed webhook (there are no seed EnvoyFilters to admit). */}}
{{- define "gardener-acl.runtimeCluster" -}}
{{- $gardener := .Values.gardener | default dict -}}
{{- $runtime := $gardener.runtimeCluster | default dict -}}
{{- if eq (toString ($runtime.enabled | default "")) "true" -}}true{{- end -}}
{{- end -}}

{{/* The seed's EnvoyFilter webhook: webhook.enabled on a seed. */}}
{{- define "gardener-acl.seedWebhook" -}}
{{- if and .Values.webhook.enabled (not (include "gardener-acl.runtimeCluster" .)) -}}true{{- end -}}
{{- end -}}

{{- define "gardener-acl.managedWebhookCertificates" -}}
{{- if and (include "gardener-acl.seedWebhook" .) (eq .Values.webhook.tls.mode "managed") -}}true{{- end -}}
{{- end -}}

{{/*
A memory limit below a process's V8 heap limit plus its code and native memory would have the
kernel kill the process before V8 collects: refused here, with the fix. Called with
process (its name in the message), heap and resources (its values), heapValue and limitValue
(where the operator sets them).
*/}}
{{- define "gardener-acl.checkMemory" -}}
{{- $heap := .heap -}}
{{- $limit := dig "limits" "memory" "" .resources -}}
{{- if and $heap $limit -}}
{{- $quantity := kindIs "string" $limit | ternary $limit (printf "%d" (int64 $limit)) -}}
{{- if not (regexMatch "^[0-9]+(Ki|Mi|Gi|Ti|k|M|G|T)?$" $quantity) -}}
{{- fail (printf "the %s's memory limit %q is not a whole number with one of the units Ki, Mi, Gi, Ti, k, M, G, T; give it like 512Mi" .process $quantity) -}}
{{- end -}}
{{- $units := dict "" 1 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 -}}
{{- $mib := div (mul (regexFind "^[0-9]+" $quantity | atoi) (get $units (regexReplaceAll "^[0-9]+" $quantity ""))) 1048576 -}}
{{- $needed := add (int64 $heap.maxOldSpaceMiB) (int64 $heap.maxSemiSpaceMiB | mul 3) 128 -}}
{{- if lt (int64 $mib) (int64 $needed) -}}
{{- fail (printf "the %s's memory limit %s (%d MiB) is below what its heap needs: %s.maxOldSpaceMiB %d + 3 x maxSemiSpaceMiB %d + 128 MiB for code and native memory = %d MiB; raise %s or lower %s" .process $quantity (int64 $mib) .heapValue (int64 $heap.maxOldSpaceMiB) (int64 $heap.maxSemiSpaceMiB) (int64 $needed) .limitValue .heapValue) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gardener-acl.checkControllerMemory" -}}
{{- include "gardener-acl.checkMemory" (dict "process" "controller" "heap" .Values.controller.heap "resources" (include "gardener-acl.controllerResources" . | fromYaml) "heapValue" "controller.heap" "limitValue" "resources.controller.limits.memory (or the flat resources.limits.memory)") -}}
{{- end -}}

{{- define "gardener-acl.checkWebhookMemory" -}}
{{- include "gardener-acl.checkMemory" (dict "process" "webhook" "heap" .Values.webhook.heap "resources" .Values.resources.webhook "heapValue" "webhook.heap" "limitValue" "resources.webhook.limits.memory") -}}
{{- end -}}

{{/* NODE_OPTIONS with a process's V8 heap limits (its heap value), or nothing when it has none. */}}
{{- define "gardener-acl.heapEnv" -}}
{{- with . -}}
# Without a heap limit V8 lets garbage grow the heap to several times what is live.
- name: NODE_OPTIONS
  value: {{ printf "--max-old-space-size=%d --max-semi-space-size=%d" (int .maxOldSpaceMiB) (int .maxSemiSpaceMiB) | quote }}
{{- end -}}
{{- end -}}

{{/* gardener-operator gives the runtime cluster's priority class (gardener.runtimeCluster.priorityClassName). */}}
{{- define "gardener-acl.priorityClassName" -}}
{{- $gardener := .Values.gardener | default dict -}}
{{- $runtime := $gardener.runtimeCluster | default dict -}}
{{- if and (include "gardener-acl.runtimeCluster" .) $runtime.priorityClassName -}}{{ $runtime.priorityClassName }}{{- else -}}{{ .Values.priorityClassName }}{{- end -}}
{{- end -}}
