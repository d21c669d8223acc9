{{/* Capstan is one per cluster: its CRDs and ClusterRoles are cluster-wide,
and the controller impersonates the service account capstan-addons by
name. So every name is fixed, with the capstan- prefix that
`kubectl apply -k config/default` gives too. */}}

{{- define "capstan.labels" -}}
app.kubernetes.io/name: capstan
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "capstan.selector" -}}
app.kubernetes.io/name: capstan
app.kubernetes.io/component: controller
{{- end -}}

{{- define "capstan.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
