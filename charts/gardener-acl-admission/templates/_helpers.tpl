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
