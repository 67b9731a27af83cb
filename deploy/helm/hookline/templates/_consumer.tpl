{{/*
A Kafka consumer service (dispatcher, scheduler) as a StatefulSet with its
headless Service and PodDisruptionBudget:
(dict "root" $ "component" "dispatcher" "values" .Values.dispatcher "txnEnv" "HOOKLINE_DISPATCHER_TRANSACTIONAL_ID" "grace" 45 "env" (list ...))
A StatefulSet gives each pod a stable, unique name (<fullname>-dispatcher-0,
-1, …); the pod's Kafka transactional id is the topic prefix plus that name,
so a restarted pod fences its previous incarnation's open transaction
instead of leaving it to time out, and no two pods share an id.
*/}}
{{- define "hookline.consumer" -}}
{{- $root := .root -}}
{{- $v := .values -}}
{{- $name := printf "%s-%s" (include "hookline.fullname" $root) .component -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ $name }}
  labels:
    {{- include "hookline.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector:
    {{- include "hookline.selector" . | nindent 4 }}
  ports:
    - name: health
      port: {{ $v.healthPort }}
      targetPort: health
{{- if $v.pdb.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ $name }}
  labels:
    {{- include "hookline.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  maxUnavailable: {{ $v.pdb.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "hookline.selector" . | nindent 6 }}
{{- end }}
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {{ $name }}
  labels:
    {{- include "hookline.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  serviceName: {{ $name }}
  replicas: {{ $v.replicas }}
  # Pods start and stop together when scaling; an upgrade still replaces
  # one pod at a time, the next only once the new one is ready
  # (/readyz: in the group, assigned, caught up).
  podManagementPolicy: Parallel
  updateStrategy:
    type: RollingUpdate
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      {{- include "hookline.selector" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "hookline.labels" $root | nindent 8 }}
        app.kubernetes.io/component: {{ .component }}
      {{- if $root.Values.metrics.enabled }}
      annotations:
        prometheus.io/scrape: "true"
        prometheus.io/port: {{ $root.Values.metrics.port | quote }}
      {{- end }}
    spec:
      {{- include "hookline.podCommon" . | nindent 6 }}
      terminationGracePeriodSeconds: {{ .grace }}
      containers:
        - name: {{ .component }}
          image: {{ include "hookline.image" . | quote }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          env:
            - name: POD_NAME
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
            - name: {{ .txnEnv }}
              value: {{ printf "%s$(POD_NAME)" $root.Values.kafka.topicPrefix | quote }}
            - name: HOOKLINE_HEALTH_ADDR
              value: {{ printf ":%d" (int $v.healthPort) | quote }}
            {{- include "hookline.commonEnv" $root | nindent 12 }}
            {{- with .env }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
            {{- include "hookline.extraEnv" $v.env | nindent 12 }}
          ports:
            - name: health
              containerPort: {{ $v.healthPort }}
              protocol: TCP
            {{- if $root.Values.metrics.enabled }}
            - name: metrics
              containerPort: {{ $root.Values.metrics.port }}
              protocol: TCP
            {{- end }}
          startupProbe:
            httpGet: {path: /healthz, port: health}
            periodSeconds: 2
            failureThreshold: 60
          # Ready: a member of the consumer group holding its assignment
          # and caught up with it; 503 while draining after SIGTERM.
          readinessProbe:
            httpGet: {path: /readyz, port: health}
            periodSeconds: 5
            failureThreshold: 2
          livenessProbe:
            httpGet: {path: /healthz, port: health}
            periodSeconds: 10
            failureThreshold: 6
          resources:
            {{- toYaml $v.resources | nindent 12 }}
          securityContext:
            {{- toYaml $root.Values.securityContext | nindent 12 }}
          volumeMounts:
            {{- include "hookline.commonMounts" $root | nindent 12 }}
            {{- if .secretsKey }}
            {{- include "hookline.secretsKeyMount" $root | nindent 12 }}
            {{- end }}
            {{- if .answers }}
            - name: answers
              mountPath: /var/lib/hookline/answers
            {{- end }}
      volumes:
        {{- include "hookline.commonVolumes" $root | nindent 8 }}
        {{- if .secretsKey }}
        {{- include "hookline.secretsKeyVolume" $root | nindent 8 }}
        {{- end }}
        {{- if .answers }}
        # The receivers' answers not committed yet (--answers-dir): an
        # emptyDir outlives a container restart (kill -9, OOM), which is
        # the crash it is for.
        - name: answers
          emptyDir:
            sizeLimit: 256Mi
        {{- end }}
{{- end -}}
