{{/*
Labels of every object.
*/}}
{{- define "nodejoin.labels" -}}
app.kubernetes.io/part-of: nodejoin
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version | replace "+" "_" }}
{{- end }}

{{/*
The image reference: repository@digest when a digest is given, else repository:tag.
*/}}
{{- define "nodejoin.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}
{{- end }}

{{/*
Refusals that the schema cannot express: each names the value to set.
*/}}
{{- define "nodejoin.validate" -}}
{{- $v := .Values -}}
{{- if and $v.webhook.enabled (not $v.webhook.clientCAConfigMap) -}}
{{- fail "webhook.enabled is true but webhook.clientCAConfigMap is empty: set webhook.clientCAConfigMap to the ConfigMap (key ca.crt) of the CA that signed kube-apiserver's client certificate for the webhook; without it anyone reaching the port could call the webhook" -}}
{{- end -}}
{{- if and $v.webhook.enabled (not $v.webhook.clusterID) -}}
{{- fail "webhook.enabled is true but webhook.clusterID is empty: set webhook.clusterID to the cluster name nodes sign their tokens for (nodeadm --cluster-name)" -}}
{{- end -}}
{{- if and $v.webhook.enabled (not $v.webhook.region) (not $v.webhook.stsHosts) -}}
{{- fail "webhook.enabled is true but neither webhook.region nor webhook.stsHosts is set: set webhook.region to the STS region nodes sign their tokens for" -}}
{{- end -}}
{{- if and $v.webhook.enabled $v.webhook.networkPolicy.enabled (not $v.hostNetwork) (not $v.webhook.networkPolicy.apiServerCIDR) -}}
{{- fail "webhook.networkPolicy.enabled is true but webhook.networkPolicy.apiServerCIDR is empty: set it to the addresses kube-apiserver calls the webhook from (the control-plane nodes' subnet), or set webhook.networkPolicy.enabled=false" -}}
{{- end -}}
{{- if and $v.webhook.instanceProofs.required (not $v.webhook.instanceProofs.certConfigMap) -}}
{{- fail "webhook.instanceProofs.required is true but webhook.instanceProofs.certConfigMap is empty: set it to the ConfigMap (key certs.pem) of the certificates that sign instance identity documents, or set webhook.instanceProofs.required=false" -}}
{{- end -}}
{{- if and (eq $v.csr.mode "sign") (not $v.csr.signing.caSecret) -}}
{{- fail "csr.mode is sign but csr.signing.caSecret is empty: set csr.signing.caSecret to the Secret (tls.crt, tls.key) of the CA that signs kubelet certificates, or use csr.mode=approve and let kube-controller-manager sign" -}}
{{- end -}}
{{- if and (not $v.placement.controlPlane) (or $v.webhook.enabled (eq $v.csr.mode "sign")) -}}
{{- fail "placement.controlPlane is false while webhook.enabled is true or csr.mode is sign: the pods would run on worker nodes, whose kubelets can read their Secrets (the CA key) and whose nodes authenticate through the webhook. Set placement.controlPlane=true, or set webhook.enabled=false and csr.mode=approve" -}}
{{- end -}}
{{- if and (eq $v.inventory.source "ec2") (not $v.inventory.ec2.region) -}}
{{- fail "inventory.source is ec2 but inventory.ec2.region is empty: set inventory.ec2.region to the region of the nodes' instances" -}}
{{- end -}}
{{- if and (eq $v.inventory.source "file") (not $v.inventory.file.configMap) -}}
{{- fail "inventory.source is file but inventory.file.configMap is empty: set inventory.file.configMap to the ConfigMap holding the inventory JSON" -}}
{{- end -}}
{{- if and $v.addons.enabled (has "kube-proxy" $v.addons.names) (not $v.addons.apiserverEndpoint) -}}
{{- fail "addons.enabled is true with kube-proxy but addons.apiserverEndpoint is empty: set it to the API server's address as nodes reach it (https://host:port)" -}}
{{- end -}}
{{- if and $v.nodeGroups.enabled (not $v.nodeGroups.apiserverEndpoint) -}}
{{- fail "nodeGroups.enabled is true but nodeGroups.apiserverEndpoint is empty: set it to the API server's address as nodes reach it (https://host:port)" -}}
{{- end -}}
{{- if and $v.nodeGroups.enabled (not $v.nodeGroups.clusterName) (not $v.webhook.clusterID) -}}
{{- fail "nodeGroups.enabled is true but neither nodeGroups.clusterName nor webhook.clusterID is set: set nodeGroups.clusterName to the cluster name node groups' user data carries" -}}
{{- end -}}
{{- end }}

{{/*
Pod placement: control-plane nodes by default, as kubeadm places kube-controller-manager.
*/}}
{{- define "nodejoin.placement" -}}
{{- $sel := dict -}}
{{- if .Values.placement.controlPlane -}}
{{- $_ := set $sel "node-role.kubernetes.io/control-plane" "" -}}
{{- end -}}
{{- $sel = merge (deepCopy .Values.placement.nodeSelector) $sel -}}
{{- if $sel }}
nodeSelector:
  {{- toYaml $sel | nindent 2 }}
{{- end }}
{{- $tol := list -}}
{{- if .Values.placement.controlPlane -}}
{{- $tol = append $tol (dict "key" "node-role.kubernetes.io/control-plane" "operator" "Exists" "effect" "NoSchedule") -}}
{{- end -}}
{{- $tol = concat $tol .Values.placement.tolerations -}}
{{- if $tol }}
tolerations:
  {{- toYaml $tol | nindent 2 }}
{{- end }}
{{- end }}

{{/*
Anti-affinity spreading one component's replicas over nodes. Argument: the component name.
*/}}
{{- define "nodejoin.spread" -}}
affinity:
  podAntiAffinity:
    # Preferred rather than required, so that a single control-plane node, or a
    # rollout on two nodes, can still place them.
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              app.kubernetes.io/name: {{ . }}
{{- end }}

{{/*
The restricted-profile security contexts every container runs with.
*/}}
{{- define "nodejoin.podSecurity" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  # Makes the Secret files (mode 0440) readable by the group above.
  fsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
{{- end }}
{{- define "nodejoin.containerSecurity" -}}
securityContext:
  runAsNonRoot: true
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: [ALL]
  seccompProfile:
    type: RuntimeDefault
{{- end }}

{{/*
Inventory flags and their mount. inventory.args / inventory.mounts / inventory.volumes.
*/}}
{{- define "nodejoin.inventoryArgs" -}}
{{- if eq .Values.inventory.source "ec2" }}
- --inventory-source=ec2
- --aws-region={{ .Values.inventory.ec2.region }}
{{- with .Values.inventory.ec2.endpoint }}
- --ec2-endpoint={{ . }}
{{- end }}
{{- with .Values.inventory.ec2.iamEndpoint }}
- --iam-endpoint={{ . }}
{{- end }}
{{- else }}
- --inventory=/etc/nodejoin/inventory/{{ .Values.inventory.file.key }}
{{- end }}
{{- end }}
{{- define "nodejoin.inventoryMounts" -}}
{{- if eq .Values.inventory.source "file" }}
- name: inventory
  mountPath: /etc/nodejoin/inventory
  readOnly: true
{{- end }}
{{- end }}
{{- define "nodejoin.inventoryVolumes" -}}
{{- if eq .Values.inventory.source "file" }}
- name: inventory
  configMap:
    name: {{ .Values.inventory.file.configMap }}
    defaultMode: 0444
{{- end }}
{{- end }}

{{/*
Probes and the common ports of every component.
*/}}
{{- define "nodejoin.probes" -}}
livenessProbe:
  httpGet:
    path: /healthz
    port: health
  periodSeconds: 10
  timeoutSeconds: 3
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /readyz
    port: health
  periodSeconds: 5
  timeoutSeconds: 3
  failureThreshold: 2
{{- end }}
