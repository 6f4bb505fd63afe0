package addons

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// AWSNode is the node network add-on: the VPC CNI's aws-node DaemonSet, running
// nodejoin-netagent (its init copies the CNI plugins, its ipamd hands out VPC addresses
// from the instance's ENIs and writes the CNI config once it can).
const AWSNode = "aws-node"

// The aws-node image and where things are in it (hack/images builds it).
const (
	// DefaultAWSNodeImage is the locally built nodejoin-netagent image.
	DefaultAWSNodeImage = "nodejoin.io/nodejoin-netagent:dev"
	// NetagentPath is the netagent binary in the image.
	NetagentPath = "/usr/local/bin/nodejoin-netagent"
	// NetagentPluginsDir holds the CNI plugins the init container copies to the node:
	// nodejoin-cni, loopback and portmap.
	NetagentPluginsDir = "/opt/nodejoin-netagent/cni"
)

// The node directories aws-node uses by default: EKS's.
const (
	DefaultCNIBinDir     = "/opt/cni/bin"
	DefaultCNIConfDir    = "/etc/cni/net.d"
	DefaultAWSStateDir   = "/var/run/aws-node"
	DefaultAWSLogDir     = "/var/log/aws-routed-eni"
	DefaultWarmENITarget = 1
)

// Ports of ipamd on the node (host network), as the VPC CNI's.
const (
	// AWSNodeMetricsPort serves Prometheus metrics at /metrics.
	AWSNodeMetricsPort = 61678
	// AWSNodeHealthPort serves /healthz on 127.0.0.1, the readiness and liveness probes'.
	AWSNodeHealthPort = 61679
)

// AWSNodeOptions configure the aws-node DaemonSet.
type AWSNodeOptions struct {
	// Image defaults to DefaultAWSNodeImage.
	Image string
	// CNIBinDir, CNIConfDir, StateDir (ipamd's socket and checkpoint) and LogDir are the
	// node's directories, the same paths inside the containers (so the CNI config ipamd
	// writes names paths the runtime finds). Defaults: EKS's (DefaultCNIBinDir, ...).
	// They may contain $(NODE_NAME), which Kubernetes expands in the containers' args,
	// but only with SharedHostDir, since a hostPath volume's path is not expanded.
	CNIBinDir, CNIConfDir, StateDir, LogDir string
	// SharedHostDir, when set, is one host directory mounted at the same path in place
	// of one volume per directory above, which must all be inside it. Local instances
	// share the host's filesystem, and a cluster's nodes have their directories under
	// one such directory, told apart by $(NODE_NAME).
	SharedHostDir string
	// Region is AWS_REGION; empty leaves it to ipamd (the instance's region from IMDS).
	Region string
	// EC2Endpoint is AWS_ENDPOINT_URL_EC2 (http:// or https://); empty: the SDK's default.
	EC2Endpoint string
	// WarmENITarget, WarmIPTarget and MinimumIPTarget are the VPC CNI's warm-pool knobs
	// (WARM_ENI_TARGET, ...); nil leaves a knob unset. WarmENITarget defaults to 1.
	WarmENITarget, WarmIPTarget, MinimumIPTarget *int
	// Env are further environment variables of ipamd, after the ones above.
	Env []corev1.EnvVar
}

//nolint:gocyclo // a flat sequence of defaults and independent option checks.
func (a *AWSNodeOptions) complete() error {
	if a.Image == "" {
		a.Image = DefaultAWSNodeImage
	}
	for _, d := range []struct {
		p   *string
		def string
	}{{&a.CNIBinDir, DefaultCNIBinDir}, {&a.CNIConfDir, DefaultCNIConfDir}, {&a.StateDir, DefaultAWSStateDir}, {&a.LogDir, DefaultAWSLogDir}} {
		if *d.p == "" {
			*d.p = d.def
		}
	}
	if a.WarmENITarget == nil {
		a.WarmENITarget = ptr.To(DefaultWarmENITarget)
	}
	var errs []error
	shared := strings.TrimSuffix(a.SharedHostDir, "/")
	if a.SharedHostDir != "" && (!path.IsAbs(a.SharedHostDir) || strings.Contains(a.SharedHostDir, "$(") || shared == "") {
		errs = append(errs, fmt.Errorf("aws-node shared host directory %q: want an absolute path without $(...), other than /", a.SharedHostDir))
	}
	for _, d := range []struct{ name, p string }{{"CNI bin", a.CNIBinDir}, {"CNI config", a.CNIConfDir}, {"state", a.StateDir}, {"log", a.LogDir}} {
		switch {
		case !path.IsAbs(d.p):
			errs = append(errs, fmt.Errorf("aws-node %s directory %q: want an absolute path", d.name, d.p))
		case a.SharedHostDir == "" && strings.Contains(d.p, "$("):
			errs = append(errs, fmt.Errorf("aws-node %s directory %q: $(...) is expanded only with a shared host directory (a hostPath volume's path is not)", d.name, d.p))
		case a.SharedHostDir != "" && !strings.HasPrefix(path.Clean(d.p), shared+"/"):
			errs = append(errs, fmt.Errorf("aws-node %s directory %q is outside the shared host directory %s", d.name, d.p, a.SharedHostDir))
		}
	}
	if a.EC2Endpoint != "" {
		u, err := url.Parse(a.EC2Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("aws-node EC2 endpoint %q: want http(s)://host[:port]", a.EC2Endpoint))
		}
	}
	for _, k := range []struct {
		name string
		v    *int
	}{{"WARM_ENI_TARGET", a.WarmENITarget}, {"WARM_IP_TARGET", a.WarmIPTarget}, {"MINIMUM_IP_TARGET", a.MinimumIPTarget}} {
		if k.v != nil && *k.v < 0 {
			errs = append(errs, fmt.Errorf("aws-node %s %d: want 0 or more", k.name, *k.v))
		}
	}
	return errors.Join(errs...)
}

// AWSNodeRules are what ipamd may read, the VPC CNI's read rights: nodes, pods and
// namespaces (no writes: nodejoin's ipamd labels nothing).
func AWSNodeRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes", "pods", "namespaces"}, Verbs: []string{"get", "list", "watch"}},
	}
}

// awsNode renders aws-node: its ServiceAccount, ClusterRole and binding, and the
// DaemonSet (the VPC CNI's shape: host network, system-node-critical, on every node but
// simulated ones, an init container, then ipamd with probes and metrics).
func awsNode(o *Options) []runtime.Object {
	a := &o.AWSNode
	sa := &corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"),
		ObjectMeta: metav1.ObjectMeta{Name: AWSNode, Namespace: metav1.NamespaceSystem, Labels: labels(AWSNode, nil)}}
	role := &rbacv1.ClusterRole{
		TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"),
		ObjectMeta: metav1.ObjectMeta{Name: AWSNode, Labels: labels(AWSNode, nil)},
		Rules:      AWSNodeRules(),
	}
	binding := &rbacv1.ClusterRoleBinding{
		TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
		ObjectMeta: metav1.ObjectMeta{Name: AWSNode, Labels: labels(AWSNode, nil)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: AWSNode},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: metav1.NamespaceSystem, Name: AWSNode}},
	}

	// Volumes: one per node directory, or the one shared directory; each mounted at the
	// same path as on the host.
	type dir struct{ name, path string }
	dirs := []dir{{"cni-bin-dir", a.CNIBinDir}, {"cni-net-dir", a.CNIConfDir}, {"run-dir", a.StateDir}, {"log-dir", a.LogDir}}
	var volumes []corev1.Volume
	var initMounts, mounts []corev1.VolumeMount
	if a.SharedHostDir != "" {
		volumes = append(volumes, corev1.Volume{Name: "nodes-dir", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
			Path: a.SharedHostDir, Type: ptr.To(corev1.HostPathDirectory),
		}}})
		m := corev1.VolumeMount{Name: "nodes-dir", MountPath: a.SharedHostDir}
		initMounts, mounts = []corev1.VolumeMount{m}, []corev1.VolumeMount{m}
	} else {
		for _, d := range dirs {
			volumes = append(volumes, corev1.Volume{Name: d.name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: d.path, Type: ptr.To(corev1.HostPathDirectoryOrCreate),
			}}})
			m := corev1.VolumeMount{Name: d.name, MountPath: d.path}
			if d.name == "cni-bin-dir" {
				initMounts = append(initMounts, m)
			}
			mounts = append(mounts, m)
		}
	}
	volumes = append(volumes, corev1.Volume{Name: "xtables-lock", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
		Path: xtablesLock, Type: ptr.To(corev1.HostPathFileOrCreate),
	}}})
	mounts = append(mounts, corev1.VolumeMount{Name: "xtables-lock", MountPath: xtablesLock})

	nodeName := corev1.EnvVar{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"},
	}}
	env := []corev1.EnvVar{nodeName}
	if a.Region != "" {
		env = append(env, corev1.EnvVar{Name: "AWS_REGION", Value: a.Region})
	}
	if a.EC2Endpoint != "" {
		env = append(env, corev1.EnvVar{Name: "AWS_ENDPOINT_URL_EC2", Value: a.EC2Endpoint})
	}
	for _, k := range []struct {
		name string
		v    *int
	}{{"WARM_ENI_TARGET", a.WarmENITarget}, {"WARM_IP_TARGET", a.WarmIPTarget}, {"MINIMUM_IP_TARGET", a.MinimumIPTarget}} {
		// A knob also in Env is Env's (a variable given twice would be ambiguous).
		if k.v != nil && !slices.ContainsFunc(a.Env, func(e corev1.EnvVar) bool { return e.Name == k.name }) {
			env = append(env, corev1.EnvVar{Name: k.name, Value: strconv.Itoa(*k.v)})
		}
	}
	env = append(env, a.Env...)

	probe := func(initialDelay int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Host: "127.0.0.1", Path: "/healthz", Port: intstr.FromInt32(AWSNodeHealthPort), Scheme: corev1.URISchemeHTTP,
			}},
			InitialDelaySeconds: initialDelay, TimeoutSeconds: 10, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
		}
	}
	readiness := probe(1)
	readiness.PeriodSeconds = 2
	liveness := probe(60)
	liveness.FailureThreshold = 6

	podLabels := map[string]string{"k8s-app": AWSNode}
	ds := &appsv1.DaemonSet{
		TypeMeta:   typeMeta("apps/v1", "DaemonSet"),
		ObjectMeta: metav1.ObjectMeta{Name: AWSNode, Namespace: metav1.NamespaceSystem, Labels: labels(AWSNode, podLabels)},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type:          appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromString("10%"))},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels(AWSNode, podLabels)},
				Spec: corev1.PodSpec{
					PriorityClassName:             "system-node-critical",
					ServiceAccountName:            AWSNode,
					HostNetwork:                   true,
					TerminationGracePeriodSeconds: ptr.To[int64](10),
					NodeSelector:                  map[string]string{corev1.LabelOSStable: "linux"},
					Affinity:                      onInstances(),
					Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					InitContainers: []corev1.Container{{
						Name:            "aws-vpc-cni-init",
						Image:           a.Image,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Command: []string{NetagentPath, "init",
							"--cni-bin-dir=" + a.CNIBinDir, "--plugins-from=" + NetagentPluginsDir},
						Env: []corev1.EnvVar{nodeName},
						// Sysctls of the node's network namespace.
						SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
						VolumeMounts:    initMounts,
					}},
					Containers: []corev1.Container{{
						Name:            AWSNode,
						Image:           a.Image,
						ImagePullPolicy: corev1.PullIfNotPresent,
						// The bin dir too: ipamd checks the init container installed the plugin.
						Command: []string{NetagentPath, "ipamd", "--cni-bin-dir=" + a.CNIBinDir,
							"--cni-conf-dir=" + a.CNIConfDir, "--state-dir=" + a.StateDir, "--log-dir=" + a.LogDir},
						Env: env,
						Ports: []corev1.ContainerPort{
							{Name: "metrics", ContainerPort: AWSNodeMetricsPort, Protocol: corev1.ProtocolTCP},
						},
						ReadinessProbe: readiness,
						LivenessProbe:  liveness,
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("25m"),
						}},
						// Routes, rules and links of the node's network namespace.
						SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
						VolumeMounts:    mounts,
					}},
					Volumes: volumes,
				},
			},
		},
	}
	return []runtime.Object{sa, role, binding, ds}
}

// onInstances keeps aws-node on the Nodes of real instances: off simulated kubelets and
// off Nodes that are no EC2 instance.
func onInstances() *corev1.Affinity {
	a := notSimulated()
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	terms[0].MatchExpressions = append(terms[0].MatchExpressions, corev1.NodeSelectorRequirement{Key: NoInstanceLabel, Operator: corev1.NodeSelectorOpDoesNotExist})
	return a
}
