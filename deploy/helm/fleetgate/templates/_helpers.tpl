{{/*
Helpers shared by every template. The chart is written in a small, deliberate subset of Helm's
template language (see docs/deploy.md, "How the chart is tested"): if, with, range, define,
include and a handful of functions.
*/}}

{{- define "fleetgate.fullname" -}}
{{- .Values.fullnameOverride | default .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end }}

{{- define "fleetgate.selectorLabels" -}}
app.kubernetes.io/name: fleetgate
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "fleetgate.labels" -}}
{{ include "fleetgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{- define "fleetgate.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The Secret holding the database URL: yours, or the one the chart makes from database.url. */}}
{{- define "fleetgate.databaseSecret" -}}
{{- if .Values.database.existingSecret -}}
{{ .Values.database.existingSecret }}
{{- else -}}
{{ required "set database.existingSecret (a Secret holding the database URL) or database.url" .Values.database.url | trunc 0 }}{{ include "fleetgate.fullname" . }}-database
{{- end -}}
{{- end }}

{{/* Environment every fleetgate process gets: its config file and the database URL. */}}
{{- define "fleetgate.env" -}}
- name: FLEETGATE_CONFIG
  value: /etc/fleetgate/config.yaml
- name: FLEETGATE_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "fleetgate.databaseSecret" . }}
      key: {{ .Values.database.secretKey }}
{{- end }}

{{- define "fleetgate.configVolume" -}}
- name: config
  configMap:
    name: {{ include "fleetgate.fullname" . }}-config
{{- end }}

{{- define "fleetgate.configMount" -}}
- name: config
  mountPath: /etc/fleetgate
  readOnly: true
{{- end }}

{{/* The restricted Pod Security Standard, for every container of the chart. */}}
{{- define "fleetgate.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
{{- end }}

{{- define "fleetgate.podSecurity" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Scheduling knobs a component may set: nodeSelector, tolerations, affinity. */}}
{{- define "fleetgate.scheduling" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The Secret holding the admin token: yours (api.adminTokenSecret) or the chart's own. */}}
{{- define "fleetgate.adminTokenSecret" -}}
{{- .Values.api.adminTokenSecret | default (printf "%s-admin-token" (include "fleetgate.fullname" .)) -}}
{{- end }}
