{{- define "gardener-acl-admission.name" -}}gardener-acl-admission{{- end -}}

{{- define "gardener-acl-admission.labels" -}}
app.kubernetes.io/name: gardener-acl-admission
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "gardener-acl-admission.selectorLabels" -}}
app.kubernetes.io/name: gardener-acl-admission
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gardener-acl-admission.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{- define "gardener-acl-admission.tlsSecret" -}}
{{- if eq .Values.webhook.tls.mode "secret" -}}{{ .Values.webhook.tls.secretName }}{{- else -}}gardener-acl-admission-tls{{- end -}}
{{- end -}}

{{- /* gardener-operator renders this chart twice with the same values plus its own
       (pkg/operator/controller/extension/extension/admission): both renders get
       gardener.virtualCluster.enabled=true, only the runtime-cluster render gets
       gardener.runtimeCluster. "runtime": the server; "virtual": only the registration, by URL;
       "" (a plain helm install): as the values say. */ -}}
{{- define "gardener-acl-admission.operatorRender" -}}
{{- $g := .Values.gardener | default dict -}}
{{- $virtual := $g.virtualCluster | default dict -}}
{{- if $virtual.enabled -}}{{- if hasKey $g "runtimeCluster" -}}runtime{{- else -}}virtual{{- end -}}{{- end -}}
{{- end -}}

{{- define "gardener-acl-admission.serverEnabled" -}}
{{- $render := include "gardener-acl-admission.operatorRender" . -}}
{{- if eq $render "runtime" -}}true{{- else if eq $render "virtual" -}}{{- else if .Values.server.enabled -}}true{{- end -}}
{{- end -}}

{{- define "gardener-acl-admission.registerWebhook" -}}
{{- $render := include "gardener-acl-admission.operatorRender" . -}}
{{- if eq $render "virtual" -}}true{{- else if eq $render "runtime" -}}{{- else if .Values.webhook.registerWebhook -}}true{{- end -}}
{{- end -}}

{{- /* The virtual garden's API server runs in the runtime cluster's garden namespace, where the
       runtime render put the Service. */ -}}
{{- define "gardener-acl-admission.registrationURL" -}}
{{- if eq (include "gardener-acl-admission.operatorRender" .) "virtual" -}}
{{ .Values.webhook.registration.url | default "https://gardener-acl-admission.garden.svc" }}
{{- else if eq .Values.webhook.registration.mode "url" -}}
{{ .Values.webhook.registration.url }}
{{- end -}}
{{- end -}}

{{- define "gardener-acl-admission.priorityClassName" -}}
{{- $g := .Values.gardener | default dict -}}
{{- $runtime := $g.runtimeCluster | default dict -}}
{{- $runtime.priorityClassName | default .Values.priorityClassName -}}
{{- end -}}

{{/* replicas, or the reference extension's replicaCount when given. */}}
{{- define "gardener-acl-admission.replicas" -}}
{{- if hasKey .Values "replicaCount" -}}{{ .Values.replicaCount }}{{- else -}}{{ .Values.replicas }}{{- end -}}
{{- end -}}

{{- /* webhook.tls.mode managed: the server process keeps the certificates and the registration. */ -}}
{{- define "gardener-acl-admission.managed" -}}
{{- if eq .Values.webhook.tls.mode "managed" -}}true{{- end -}}
{{- end -}}

{{- /* Where the API server that stores Shoots calls the server, for a managed registration:
       the URL (operator renders, or registration.mode url), else empty (the Service). */ -}}
{{- define "gardener-acl-admission.managedRegistrationURL" -}}
{{- if include "gardener-acl-admission.operatorRender" . -}}
{{ .Values.webhook.registration.url | default "https://gardener-acl-admission.garden.svc" }}
{{- else if eq .Values.webhook.registration.mode "url" -}}
{{ .Values.webhook.registration.url }}
{{- end -}}
{{- end -}}

{{- /* The Garden webhook (validate-garden: gardener-operator's Gardens, which live in the runtime
       cluster, the server's own). webhook.garden.enabled "auto" (the default): on where Gardens
       exist, gardener-operator's runtime render; true: also for a plain install with the server. */ -}}
{{- define "gardener-acl-admission.gardenWebhook" -}}
{{- $garden := .Values.webhook.garden | default dict -}}
{{- $enabled := "auto" -}}
{{- if hasKey $garden "enabled" -}}{{- $enabled = toString $garden.enabled -}}{{- end -}}
{{- $render := include "gardener-acl-admission.operatorRender" . -}}
{{- if and (include "gardener-acl-admission.serverEnabled" .) (or (eq $enabled "true") (and (eq $enabled "auto") (eq $render "runtime"))) -}}true{{- end -}}
{{- end -}}

{{- /* The ClusterRole that owns gardener-acl-garden (so it goes with the installation) and grants
       its writes: in gardener-operator's runtime render a ClusterRole of its own, as the installation's
       gardener-acl-admission is in the virtual garden; in a plain install that one. */ -}}
{{- define "gardener-acl-admission.gardenOwner" -}}
{{- if eq (include "gardener-acl-admission.operatorRender" .) "runtime" -}}gardener-acl-admission-garden{{- else -}}gardener-acl-admission{{- end -}}
{{- end -}}
