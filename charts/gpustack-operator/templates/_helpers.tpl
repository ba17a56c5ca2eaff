{{/* Names and labels shared by every template. */}}

{{- define "gpustack-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The prefix of every object's name; gpustack-operator unless overridden. */}}
{{- define "gpustack-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- include "gpustack-operator.name" . -}}
{{- end -}}
{{- end -}}

{{- define "gpustack-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpustack-operator.labels" -}}
helm.sh/chart: {{ include "gpustack-operator.chart" . }}
app.kubernetes.io/name: {{ include "gpustack-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpustack-operator
{{- end -}}

{{/* Selector labels of one component: include with (dict "root" $ "component" "worker"). */}}
{{- define "gpustack-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpustack-operator.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "gpustack-operator.componentLabels" -}}
{{ include "gpustack-operator.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "gpustack-operator.worker.name" -}}
{{- printf "%s-worker" (include "gpustack-operator.fullname" .) -}}
{{- end -}}

{{- define "gpustack-operator.deviceManager.name" -}}
{{- printf "%s-device-manager" (include "gpustack-operator.fullname" .) -}}
{{- end -}}

{{- define "gpustack-operator.worker.certSecret" -}}
{{- printf "%s-worker-cert" (include "gpustack-operator.fullname" .) -}}
{{- end -}}

{{- define "gpustack-operator.selfSignedIssuer" -}}
{{- printf "%s-selfsigned-issuer" (include "gpustack-operator.fullname" .) -}}
{{- end -}}

{{/* [registry/][namespace/]repository(@digest|:tag); tag defaults to v<appVersion>. */}}
{{- define "gpustack-operator.image" -}}
{{- $parts := list -}}
{{- with .Values.global.imageRegistry }}{{ $parts = append $parts (trimSuffix "/" .) }}{{ end -}}
{{- with .Values.global.imageNamespace }}{{ $parts = append $parts (trimAll "/" .) }}{{ end -}}
{{- $parts = append $parts .Values.image.repository -}}
{{- $ref := join "/" $parts -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $ref .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $ref (default (printf "v%s" .Chart.AppVersion) .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* "true" when the worker's serving certificate comes from cert-manager. */}}
{{- define "gpustack-operator.certmanager.enabled" -}}
{{- $mode := toString .Values.global.certmanager.enabled -}}
{{- if eq $mode "true" -}}
true
{{- else if and (eq $mode "auto") (.Capabilities.APIVersions.Has "cert-manager.io/v1") -}}
true
{{- end -}}
{{- end -}}

{{/*
The manufacturer table as environment, so the worker and the device managers use exactly the chart's
values (rules/naming/manufacturers.py reads these overrides). An empty value is left out: the code's default
applies.
*/}}
{{- define "gpustack-operator.manufacturerEnv" -}}
{{- range $name, $m := .Values.global.manufacturers }}
{{- $prefix := printf "GPUSTACK_%s_" (upper $name) }}
{{- with $m.pciVendorID }}
- name: {{ $prefix }}PCI_VENDOR_ID
  value: {{ . | quote }}
{{- end }}
{{- with $m.resourceName }}
- name: {{ $prefix }}ACCELERATABLE_RESOURCE_NAME
  value: {{ . | quote }}
{{- end }}
{{- with $m.runtimeName }}
- name: {{ $prefix }}ACCELERATABLE_RUNTIME_NAME
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The restricted container security context (Pod Security "restricted"). */}}
{{- define "gpustack-operator.restrictedSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/*
A ClusterRole and a Role (in the release namespace) with their bindings to one ServiceAccount, from the
generated rules in files/rbac/<file>.yaml: include with (dict "root" $ "name" <object name> "component"
<component> "file" <file>). The rules are generated from the code's declarations; never write them here.
*/}}
{{- define "gpustack-operator.rbac" -}}
{{- $root := .root -}}
{{- $path := printf "files/rbac/%s.yaml" .file -}}
{{- $rules := $root.Files.Get $path | fromYaml -}}
{{- if not $rules }}{{ fail (printf "%s is missing or empty" $path) }}{{ end -}}
{{- if hasKey $rules "Error" }}{{ fail (printf "%s: %s" $path $rules.Error) }}{{ end -}}
{{- $labels := include "gpustack-operator.componentLabels" (dict "root" $root "component" .component) -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ .name }}
  labels:
    {{- $labels | nindent 4 }}
rules:
  {{- with $rules.clusterRules }}
  {{- toYaml . | nindent 2 }}
  {{- else }} []
  {{- end }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ .name }}
  labels:
    {{- $labels | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ .name }}
subjects:
  - kind: ServiceAccount
    name: {{ .name }}
    namespace: {{ $root.Release.Namespace }}
{{- with $rules.namespaceRules }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $.name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- $labels | nindent 4 }}
rules:
  {{- toYaml . | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $.name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- $labels | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $.name }}
subjects:
  - kind: ServiceAccount
    name: {{ $.name }}
    namespace: {{ $root.Release.Namespace }}
{{- end }}
{{- end -}}

{{/* True (non-empty) when at least one manufacturer's device manager is enabled. */}}
{{- define "gpustack-operator.deviceManager.any" -}}
{{- range $name, $m := .Values.global.manufacturers }}{{ if $m.enabled }}true{{ end }}{{ end -}}
{{- end -}}
