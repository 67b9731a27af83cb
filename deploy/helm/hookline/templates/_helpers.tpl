{{/* Names and labels shared by every manifest. */}}
{{- define "hookline.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "hookline.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: hookline
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "ingest") */}}
{{- define "hookline.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "hookline.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "hookline.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The image of one component: (dict "root" $ "component" "ingest") */}}
{{- define "hookline.image" -}}
{{- $img := .root.Values.image -}}
{{- $reg := "" -}}
{{- if $img.registry -}}{{- $reg = printf "%s/" (trimSuffix "/" $img.registry) -}}{{- end -}}
{{- printf "%s%s-%s:%s" $reg $img.repository .component (default .root.Chart.AppVersion $img.tag) -}}
{{- end -}}

{{/* Environment every service shares: Kafka, logging, metrics, OTEL. */}}
{{- define "hookline.commonEnv" -}}
- name: HOOKLINE_KAFKA_BROKERS
  value: {{ join "," .Values.kafka.brokers | quote }}
- name: HOOKLINE_TOPIC_PREFIX
  value: {{ .Values.kafka.topicPrefix | quote }}
- name: HOOKLINE_TOPIC_PARTITIONS
  value: {{ .Values.kafka.partitions | quote }}
- name: HOOKLINE_TOPIC_REPLICATION_FACTOR
  value: {{ .Values.kafka.replicationFactor | quote }}
- name: HOOKLINE_TOPIC_RETENTION
  value: {{ .Values.kafka.retention | quote }}
- name: HOOKLINE_KAFKA_COMPRESSION
  value: {{ .Values.kafka.compression | quote }}
{{- if .Values.kafka.tls.enabled }}
- name: HOOKLINE_KAFKA_TLS
  value: "true"
{{- if .Values.kafka.tls.secretName }}
- name: HOOKLINE_KAFKA_TLS_CA
  value: /etc/hookline/kafka-tls/ca.crt
{{- if .Values.kafka.tls.clientCert }}
- name: HOOKLINE_KAFKA_TLS_CERT
  value: /etc/hookline/kafka-tls/tls.crt
- name: HOOKLINE_KAFKA_TLS_KEY
  value: /etc/hookline/kafka-tls/tls.key
{{- end }}
{{- end }}
{{- if .Values.kafka.tls.serverName }}
- name: HOOKLINE_KAFKA_TLS_SERVER_NAME
  value: {{ .Values.kafka.tls.serverName | quote }}
{{- end }}
{{- end }}
{{- if .Values.kafka.sasl.mechanism }}
- name: HOOKLINE_KAFKA_SASL_MECHANISM
  value: {{ .Values.kafka.sasl.mechanism | quote }}
- name: HOOKLINE_KAFKA_SASL_USER
  valueFrom:
    secretKeyRef:
      name: {{ .Values.kafka.sasl.secretName }}
      key: username
- name: HOOKLINE_KAFKA_SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .Values.kafka.sasl.secretName }}
      key: password
{{- end }}
- name: HOOKLINE_LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
{{- if .Values.metrics.enabled }}
- name: HOOKLINE_METRICS_ADDR
  value: {{ printf ":%d" (int .Values.metrics.port) | quote }}
{{- end }}
{{- range $k, $v := .Values.otel }}
- name: {{ $k }}
  value: {{ $v | quote }}
{{- end }}
{{- end -}}

{{/* Extra HOOKLINE_* settings of one component. */}}
{{- define "hookline.extraEnv" -}}
{{- range $k, $v := . }}
- name: {{ $k }}
  value: {{ $v | quote }}
{{- end }}
{{- end -}}

{{/* Volumes and mounts every service shares: /tmp, Kafka TLS. */}}
{{- define "hookline.commonVolumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- if and .Values.kafka.tls.enabled .Values.kafka.tls.secretName }}
- name: kafka-tls
  secret:
    secretName: {{ .Values.kafka.tls.secretName }}
{{- end }}
{{- end -}}

{{- define "hookline.commonMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if and .Values.kafka.tls.enabled .Values.kafka.tls.secretName }}
- name: kafka-tls
  mountPath: /etc/hookline/kafka-tls
  readOnly: true
{{- end }}
{{- end -}}

{{/* The secrets key file (ingest and dispatcher). */}}
{{- define "hookline.secretsKeyEnv" -}}
{{- if .Values.secretsKey.existingSecret }}
- name: HOOKLINE_SECRETS_KEY_FILE
  value: /etc/hookline/secrets-key/{{ .Values.secretsKey.key }}
{{- end }}
{{- end -}}
{{- define "hookline.secretsKeyVolume" -}}
{{- if .Values.secretsKey.existingSecret }}
- name: secrets-key
  secret:
    secretName: {{ .Values.secretsKey.existingSecret }}
    defaultMode: 0440
    items:
      - key: {{ .Values.secretsKey.key }}
        path: {{ .Values.secretsKey.key }}
{{- end }}
{{- end -}}
{{- define "hookline.secretsKeyMount" -}}
{{- if .Values.secretsKey.existingSecret }}
- name: secrets-key
  mountPath: /etc/hookline/secrets-key
  readOnly: true
{{- end }}
{{- end -}}

{{/* Pod-level settings every workload shares. */}}
{{- define "hookline.podCommon" -}}
serviceAccountName: {{ include "hookline.serviceAccountName" .root }}
automountServiceAccountToken: false
enableServiceLinks: false
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
