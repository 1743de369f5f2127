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

{{/* Serving certificate + CA for the webhook, computed once per render and shared by the
     Secret and the MutatingWebhookConfiguration. */}}
{{- define "gardener-acl.webhookCerts" -}}
{{- $tls := .Values.webhook.tls -}}
{{- if eq $tls.mode "selfSigned" -}}
{{- $svc := printf "%s.%s.svc" (include "gardener-acl.name" .) .Release.Namespace -}}
{{- $ca := genCA "gardener-acl-webhook-ca" 3650 -}}
{{- $cert := genSignedCert $svc nil (list $svc (printf "%s.cluster.local" $svc)) 3650 $ca -}}
{{- dict "crt" $cert.Cert "key" $cert.Key "caBundle" $ca.Cert | toJson -}}
{{- else -}}
{{- dict "crt" $tls.crt "key" $tls.key "caBundle" $tls.caBundle | toJson -}}
{{- end -}}
{{- end -}}
