{{/*
A controller of its own (add-ons, node groups): a ServiceAccount and a Deployment that
runs `nodejoin-controller run --csr=off` with the given flags, electing a leader on a
Lease of its own. Argument: dict "root" $ "name" NAME "replicas" N "args" LIST
"caMount" BOOL (the cluster CA certificate from ConfigMap kube-root-ca.crt).
*/}}
{{- define "nodejoin.component" -}}
{{- $ := .root -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .name }}
  namespace: {{ $.Release.Namespace }}
  labels:
    app.kubernetes.io/name: {{ .name }}
    {{- include "nodejoin.labels" $ | nindent 4 }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .name }}
  namespace: {{ $.Release.Namespace }}
  labels:
    app.kubernetes.io/name: {{ .name }}
    {{- include "nodejoin.labels" $ | nindent 4 }}
spec:
  replicas: {{ .replicas }}
  revisionHistoryLimit: 3
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ .name }}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: {{ .name }}
        app.kubernetes.io/part-of: nodejoin
    spec:
      serviceAccountName: {{ .name }}
      enableServiceLinks: false
      {{- with $.Values.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      {{- with $.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- include "nodejoin.podSecurity" $ | nindent 6 }}
      {{- with include "nodejoin.placement" $ | trim }}{{ . | nindent 6 }}{{ end }}
      {{- if $.Values.placement.spreadAcrossNodes }}
      {{- include "nodejoin.spread" .name | nindent 6 }}
      {{- end }}
      containers:
        - name: controller
          image: {{ include "nodejoin.image" $ }}
          imagePullPolicy: {{ $.Values.image.pullPolicy }}
          args:
            - run
            # No CSR controller and no webhook: this service account holds none of
            # their rights, and the approver's holds none of these.
            - --csr=off
            - --leader-elect=true
            - --leader-election-id={{ .name }}
            - --identity=$(POD_NAME)
            - --install-rbac=false
            - --install-crds=false
            {{- with include "nodejoin.inventoryArgs" $ | trim }}{{ . | nindent 12 }}{{ end }}
            {{- range .args }}
            - {{ . }}
            {{- end }}
            - --metrics-bind-address=:{{ $.Values.metricsPort }}
            - --health-probe-bind-address=:{{ $.Values.healthPort }}
          env:
            - name: POD_NAME
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
            {{- with $.Values.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          ports:
            - name: metrics
              containerPort: {{ $.Values.metricsPort }}
              protocol: TCP
            - name: health
              containerPort: {{ $.Values.healthPort }}
              protocol: TCP
          {{- include "nodejoin.probes" $ | nindent 10 }}
          resources:
            {{- toYaml $.Values.resources | nindent 12 }}
          {{- include "nodejoin.containerSecurity" $ | nindent 10 }}
          volumeMounts:
            {{- if .caMount }}
            - name: cluster-ca
              mountPath: /etc/nodejoin/cluster-ca
              readOnly: true
            {{- end }}
            {{- with include "nodejoin.inventoryMounts" $ | trim }}{{ . | nindent 12 }}{{ end }}
            - name: tmp
              mountPath: /tmp
      volumes:
        {{- if .caMount }}
        # The cluster CA's certificate (public), which every namespace has.
        - name: cluster-ca
          configMap:
            name: kube-root-ca.crt
            defaultMode: 0444
        {{- end }}
        {{- with include "nodejoin.inventoryVolumes" $ | trim }}{{ . | nindent 8 }}{{ end }}
        - name: tmp
          emptyDir:
            sizeLimit: 64Mi
{{- end }}
