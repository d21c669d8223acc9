{{/* Capstan is one per cluster, or one per shard: its CRDs are
cluster-wide, and the controller impersonates the add-ons' service account
of its own namespace by name. So every name is fixed, with the
capstan- prefix that `kubectl apply -k config/default` gives too; a shard's
cluster-wide RBAC adds the shard's name (capstan.clusterName), so that shards
in namespaces of their own can be installed side by side. */}}

{{- define "capstan.clusterName" -}}
{{- if .root.Values.shard -}}
{{ .name }}-{{ .root.Values.shard }}
{{- else -}}
{{ .name }}
{{- end -}}
{{- end -}}

{{- define "capstan.watchLabelSelector" -}}
{{- if .Values.watchLabelSelector -}}
{{ .Values.watchLabelSelector }}
{{- else if .Values.shard -}}
capstan.dev/shard={{ .Values.shard }}
{{- end -}}
{{- end -}}

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

{{/* capstan.checkPorts fails the render when two of the controller's
listeners would share a port: the API, the metrics and the health probes
(fixed at 8081) each bind their own, and a clash renders fine but leaves the
pod crash-looping on "address already in use". */}}
{{- define "capstan.checkPorts" -}}
{{- $health := 8081 -}}
{{- $api := int .Values.api.port -}}
{{- $metrics := int .Values.metrics.port -}}
{{- if and .Values.api.enabled (eq $api $health) -}}
{{- fail (printf "api.port %d is the port of the health probes: set api.port to another port" $api) -}}
{{- end -}}
{{- if and .Values.metrics.enabled (eq $metrics $health) -}}
{{- fail (printf "metrics.port %d is the port of the health probes: set metrics.port to another port" $metrics) -}}
{{- end -}}
{{- if and .Values.api.enabled .Values.metrics.enabled (eq $api $metrics) -}}
{{- fail (printf "api.port and metrics.port are both %d: set one of them to another port" $api) -}}
{{- end -}}
{{- end -}}
