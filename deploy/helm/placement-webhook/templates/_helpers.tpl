{{/*
Labels every object carries besides app.kubernetes.io/name and component: the
part-of label of deploy/base (uninstall checks find everything by it) and
Helm's own two, which tests/unit/deploy/test_chart.py ignores when it
compares this chart with the kustomize base.
*/}}
{{- define "placement-webhook.labels" -}}
app.kubernetes.io/part-of: placement-webhook
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "placement-webhook.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The policy file: a KubeSchedulerConfiguration and a PlacementPolicy document. */}}
{{- define "placement-webhook.policy" -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
{{ toYaml .Values.policy.scheduler }}
---
apiVersion: placement-webhook.io/v1alpha1
kind: PlacementPolicy
mode: {{ .Values.mode }}
{{ toYaml .Values.policy.placement }}
{{- end }}

{{/* Pod-level settings every Deployment of the release shares. */}}
{{- define "placement-webhook.podPlacement" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
priorityClassName: {{ .Values.priorityClass.name }}
{{- end }}

{{- define "placement-webhook.validate" -}}
{{- if not (has .Values.mode (list "nodeName" "nodeAffinity")) }}
{{- fail (printf "mode must be nodeName or nodeAffinity, not %q" .Values.mode) }}
{{- end }}
{{- if not (has .Values.certificates.mode (list "self-managed" "cert-manager")) }}
{{- fail (printf "certificates.mode must be self-managed or cert-manager, not %q" .Values.certificates.mode) }}
{{- end }}
{{- if and .Values.clientAuth.enabled (not .Values.clientAuth.caConfigMap) }}
{{- fail "clientAuth.enabled needs clientAuth.caConfigMap (a ConfigMap holding the client CA)" }}
{{- end }}
{{- end }}
