{{/* Named templates shared by every component; manifests never copy these blocks. */}}

{{- define "vera.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "vera.name" -}}
{{- printf "%s-%s" (include "vera.fullname" .root) .component -}}
{{- end -}}

{{- define "vera.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "vera.labels" -}}
{{ include "vera.selectorLabels" . }}
app.kubernetes.io/part-of: vera
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{- define "vera.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The gRPC services; each has a values block of the same name. */}}
{{- define "vera.grpcComponents" -}}
identity knowledge retrieval snapshot
{{- end -}}

{{- define "vera.ingressHost" -}}
{{- .Values.ingress.host -}}
{{- end -}}

{{/* This chart installs no Qdrant (the schema refuses qdrant.enabled and an empty url). */}}
{{- define "vera.qdrantUrl" -}}
{{- .Values.vectorStore.url -}}
{{- end -}}

{{- define "vera.podSecurityContext" -}}
{{ toYaml .Values.podSecurityContext }}
{{- end -}}

{{- define "vera.containerSecurityContext" -}}
{{ toYaml .Values.containerSecurityContext }}
{{- end -}}

{{/* "true" when each service signs in with a login of its own (database.logins
perService, the default); empty: the one shared database.dsnSecret. */}}
{{- define "vera.serviceRoles" -}}
{{- if eq .Values.database.logins "perService" }}true{{ end -}}
{{- end -}}

{{/* Secrets by reference. The DSN reaches only the processes that own a schema, each its
own service's login unless the install chose the shared one. Args: root, service (the
schema's service). */}}
{{- define "vera.databaseEnv" -}}
{{- $ref := .root.Values.database.dsnSecret -}}
{{- if include "vera.serviceRoles" .root -}}
{{- $ref = index .root.Values.database.serviceDsnSecrets .service | default (dict "name" (printf "vera-database-%s" .service) "key" "dsn") -}}
{{- end -}}
- name: VERA_DATABASE__DSN
  valueFrom:
    secretKeyRef:
      name: {{ $ref.name }}
      key: {{ $ref.key }}
{{- end -}}

{{/* The internal gRPC key (INTERNAL_AUTH): every component signs and checks with it;
during a rotation every component also accepts the next one. */}}
{{- define "vera.rpcKeyEnv" -}}
- name: VERA_RPC__AUTH_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.rpc.authKeySecret.name }}
      key: {{ .Values.rpc.authKeySecret.key }}
{{- with .Values.rpc.nextKeySecret }}{{ if .name }}
- name: VERA_RPC__AUTH_NEXT_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .name }}
      key: {{ .key | default "next-auth-key" }}
{{- end }}{{ end }}
{{- end -}}

{{- define "vera.podSpecCommon" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if .Values.serviceAccountName }}
serviceAccountName: {{ .Values.serviceAccountName }}
{{- end }}
automountServiceAccountToken: false
enableServiceLinks: false
securityContext:
  {{- include "vera.podSecurityContext" . | nindent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
A pod's writable volumes (the root filesystem is read-only). Args: memorySnapshot (the
size of retrieval's memory snapshot volume; absent: none).
*/}}
{{- define "vera.volumes" -}}
volumes:
  # Python, ONNX Runtime and torch need a scratch /tmp.
  - name: tmp
    emptyDir:
      sizeLimit: 256Mi
  {{- with .memorySnapshot }}
  # Retrieval's memory snapshot: a restarted container reloads it instead of refilling
  # from every document. An emptyDir outlives container restarts, not the pod.
  - name: memory
    emptyDir:
      sizeLimit: {{ . }}
  {{- end }}
{{- end -}}

{{- define "vera.mounts" -}}
- name: tmp
  mountPath: /tmp
{{- if .memorySnapshot }}
- name: memory
  mountPath: {{ include "vera.dataDir" . }}/memory
{{- end }}
{{- end -}}

{{/* VERA_DATA_DIR in every pod; nothing persists there but what a volume mounts. */}}
{{- define "vera.dataDir" -}}
/opt/vera/data
{{- end -}}

{{/* grpc probes on the component's port: Kubernetes' native gRPC health client. */}}
{{- define "vera.grpcProbes" -}}
startupProbe:
  grpc:
    port: {{ .port }}
  periodSeconds: 5
  failureThreshold: {{ .startupFailures | default 24 }}
readinessProbe:
  grpc:
    port: {{ .port }}
  periodSeconds: 10
  timeoutSeconds: 3
livenessProbe:
  grpc:
    port: {{ .port }}
  periodSeconds: 20
  timeoutSeconds: 5
  failureThreshold: 3
{{- end -}}

{{/*
A gRPC service Deployment. Args: root, component (Service + labels), service (the vera
service it runs), values (replicas, resources), port, env (extra env list), strategy.
*/}}
{{- define "vera.grpcDeployment" -}}
{{- $root := .root -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "vera.name" . }}
  labels:
    {{- include "vera.labels" . | nindent 4 }}
spec:
  replicas: {{ .replicas }}
  {{- if .recreate }}
  # One pod at a time: the old one stops before the new one starts its background work.
  strategy:
    type: Recreate
  {{- end }}
  selector:
    matchLabels:
      {{- include "vera.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "vera.labels" . | nindent 8 }}
      annotations:
        checksum/config: {{ include (print $root.Template.BasePath "/configmap.yaml") $root | sha256sum }}
        {{- if $root.Values.metrics.scrapeAnnotations }}
        prometheus.io/scrape: "true"
        prometheus.io/port: {{ $root.Values.metrics.port | quote }}
        prometheus.io/path: /metrics
        {{- end }}
    spec:
      {{- include "vera.podSpecCommon" $root | trim | nindent 6 }}
      {{- include "vera.volumes" . | nindent 6 }}
      # Above the longest RPC deadline (30 s), which a stopping process drains for.
      terminationGracePeriodSeconds: 45
      containers:
        - name: {{ .service }}
          image: {{ include "vera.image" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          command: {{ concat $root.Values.commandPrefix (list "vera" "serve" .service "--address" (printf "%s:%d" $root.Values.bindHost (int .port))) | toJson }}
          ports:
            - name: grpc
              containerPort: {{ .port }}
              protocol: TCP
            # The service's metrics listener (VERA_OBSERVABILITY__SERVICE_METRICS_PORT): pod only.
            - name: metrics
              containerPort: {{ $root.Values.metrics.port }}
              protocol: TCP
          envFrom:
            - configMapRef:
                name: {{ include "vera.fullname" $root }}-config
          env:
            {{- include "vera.databaseEnv" (dict "root" $root "service" .service) | nindent 12 }}
            {{- include "vera.rpcKeyEnv" $root | nindent 12 }}
            {{- with .env }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- include "vera.grpcProbes" . | nindent 10 }}
          resources:
            {{- toYaml .resources | nindent 12 }}
          securityContext:
            {{- include "vera.containerSecurityContext" $root | nindent 12 }}
          volumeMounts:
            {{- include "vera.mounts" . | nindent 12 }}
{{- end -}}

{{/*
An HTTP front Deployment (gateway, api). Args: root, component, values, command, probes
(liveness and readiness paths), env, metrics (bool: declare the metrics port on the pod).
*/}}
{{- define "vera.httpDeployment" -}}
{{- $root := .root -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "vera.name" . }}
  labels:
    {{- include "vera.labels" . | nindent 4 }}
spec:
  {{- if not .autoscaled }}
  replicas: {{ .values.replicas }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "vera.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "vera.labels" . | nindent 8 }}
      annotations:
        checksum/config: {{ include (print $root.Template.BasePath "/configmap.yaml") $root | sha256sum }}
        {{- if and .metrics $root.Values.metrics.scrapeAnnotations }}
        prometheus.io/scrape: "true"
        prometheus.io/port: {{ $root.Values.metrics.port | quote }}
        prometheus.io/path: /metrics
        {{- end }}
    spec:
      {{- include "vera.podSpecCommon" $root | trim | nindent 6 }}
      {{- include "vera.volumes" (dict) | nindent 6 }}
      # Above the longest RPC deadline (30 s), which a stopping process drains for.
      terminationGracePeriodSeconds: 45
      containers:
        - name: {{ .component }}
          image: {{ include "vera.image" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          command: {{ concat $root.Values.commandPrefix .command | toJson }}
          ports:
            - name: http
              containerPort: {{ .values.port }}
              protocol: TCP
            {{- if .metrics }}
            # Pod only: no Service (and so no Ingress or LoadBalancer) carries this port.
            - name: metrics
              containerPort: {{ $root.Values.metrics.port }}
              protocol: TCP
            {{- end }}
          envFrom:
            - configMapRef:
                name: {{ include "vera.fullname" $root }}-config
          env:
            {{- include "vera.rpcKeyEnv" $root | nindent 12 }}
            {{- with .env }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          readinessProbe:
            httpGet:
              path: {{ .readiness }}
              port: http
            periodSeconds: 10
            timeoutSeconds: 3
          livenessProbe:
            httpGet:
              path: {{ .liveness }}
              port: http
            periodSeconds: 20
            timeoutSeconds: 5
            failureThreshold: 3
          resources:
            {{- toYaml .values.resources | nindent 12 }}
          securityContext:
            {{- include "vera.containerSecurityContext" $root | nindent 12 }}
          volumeMounts:
            {{- include "vera.mounts" (dict) | nindent 12 }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ include "vera.name" . }}
  labels:
    {{- include "vera.labels" . | nindent 4 }}
spec:
  type: ClusterIP
  selector:
    {{- include "vera.selectorLabels" . | nindent 4 }}
  ports:
    - name: http
      port: {{ .values.port }}
      targetPort: http
      protocol: TCP
{{- end -}}

{{/* The gateway's own environment: the verification secret, or, only behind
auth.INSECUREUnauthenticatedGateway, the unauthenticated local profile. The switch reaches
this pod alone: the REST API and the services keep the deployment's environment. */}}
{{- define "vera.gatewayEnv" -}}
{{- if .Values.auth.INSECUREUnauthenticatedGateway }}
- name: VERA_ENVIRONMENT
  value: local
- name: VERA_MCP__ALLOW_UNAUTHENTICATED_NON_LOOPBACK
  value: "true"
{{- else }}
{{ include "vera.authEnv" . }}
{{- end }}
{{- end -}}

{{/* The MCP token verification secret, for the gateway (verifies) and the api (mints). */}}
{{- define "vera.authEnv" -}}
{{- if and (not .Values.auth.INSECUREUnauthenticatedGateway) (eq .Values.auth.mode "jwt") }}
- name: VERA_MCP__JWT_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ .Values.auth.jwt.secret.name }}
      key: {{ .Values.auth.jwt.secret.key }}
{{- end }}
{{- end -}}
