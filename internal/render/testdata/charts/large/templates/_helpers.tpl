{{- define "large.name" -}}
{{- printf "%s-%s" .root.Release.Name .c.name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- define "large.labels" -}}
app.kubernetes.io/name: {{ .c.name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .c.tag | quote }}
app.kubernetes.io/part-of: {{ .root.Values.global.partOf }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
owner: {{ .root.Values.global.owner }}
{{- end -}}
{{- define "large.selector" -}}
app.kubernetes.io/name: {{ .c.name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}
