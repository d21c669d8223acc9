{{- define "common.configmap" -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .root.Release.Name }}-{{ .name }}
  labels:
    {{- include "common.labels" .root | nindent 4 }}
data:
  {{- toYaml .data | nindent 2 }}
{{- end -}}
