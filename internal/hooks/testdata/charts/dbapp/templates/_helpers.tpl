{{/*
dbapp.hookPod renders a hook's pod spec: it fails, hangs or succeeds as the
hook's values ask. It takes a dict with "name" and "cfg".
*/}}
{{- define "dbapp.podSpec" -}}
restartPolicy: Never
{{- if .cfg.hang }}
nodeSelector:
  capstan.dev/no-such-node: "true"
{{- else if .cfg.nodeLabel }}
nodeSelector:
  {{ .cfg.nodeLabel }}: "true"
{{- end }}
containers:
  - name: {{ .name }}
    image: registry.example/dbapp-tools:1.0
    args: [{{ range $i, $a := .args }}{{ if $i }}, {{ end }}{{ $a | quote }}{{ end }}]
{{- end }}

{{/*
dbapp.podMeta renders the labels and annotations that make kwok fail a pod.
*/}}
{{- define "dbapp.podMeta" -}}
labels:
  app.kubernetes.io/component: hook
  {{- if .cfg.fail }}
  capstan.dev/test-fail: "true"
  {{- end }}
annotations:
  capstan.dev/test-exit-code: {{ .cfg.exitCode | default 1 | quote }}
{{- end }}

{{/*
dbapp.hookJob renders a hook Job. It takes a dict with "root", "name",
"events", "cfg" and "args".
*/}}
{{- define "dbapp.hookJob" -}}
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .root.Release.Name }}-{{ .name }}
  annotations:
    helm.sh/hook: {{ .events | quote }}
    helm.sh/hook-weight: {{ .cfg.weight | default "0" | quote }}
    {{- with .cfg.deletePolicy }}
    helm.sh/hook-delete-policy: {{ . | quote }}
    {{- end }}
spec:
  backoffLimit: {{ if .cfg.fail }}0{{ else }}2{{ end }}
  template:
    metadata:
      {{- include "dbapp.podMeta" . | nindent 6 }}
    spec:
      {{- include "dbapp.podSpec" . | nindent 6 }}
{{- end }}
