{{/* Labels on every object; TauGrid's own vocabulary plus Helm's. */}}
{{- define "taugrid.labels" -}}
app.kubernetes.io/part-of: taugrid
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
{{- end -}}

{{/* Selector labels of a component: (dict "root" $ "name" "tau-controller") */}}
{{- define "taugrid.selector" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{/* An image reference from {repository, tag, digest}: the digest wins, the
tag defaults to the chart's appVersion. (dict "image" .Values.x.image "root" $) */}}
{{- define "taugrid.image" -}}
{{- if .image.digest -}}
{{ .image.repository }}@{{ .image.digest }}
{{- else -}}
{{ .image.repository }}:{{ .image.tag | default .root.Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* The YAML documents of a file under files/, as a list of dicts. */}}
{{- define "taugrid.documents" -}}
{{- $docs := list -}}
{{- range regexSplit "(?m)^---\\s*$" (.root.Files.Get .file) -1 -}}
{{- $d := fromYaml . -}}
{{- if $d -}}{{- $docs = append $docs $d -}}{{- end -}}
{{- end -}}
{{- toJson (dict "items" $docs) -}}
{{- end -}}

{{/* The rules of the object of a kind in a file under files/. */}}
{{- define "taugrid.rulesOf" -}}
{{- $found := list -}}
{{- range (include "taugrid.documents" . | fromJson).items -}}
{{- if eq .kind $.kind -}}{{- $found = .rules -}}{{- end -}}
{{- end -}}
{{- if not $found -}}{{- fail (printf "%s holds no %s" .file .kind) -}}{{- end -}}
{{- toYaml $found -}}
{{- end -}}

{{/* The controller's restricted security context. */}}
{{- define "taugrid.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}
