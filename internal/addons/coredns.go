package addons

import (
	"fmt"
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

// CoreDNSRole is the ClusterRole (and binding) CoreDNS reads the cluster with.
const CoreDNSRole = "system:coredns"

// KubeDNS is the Service in front of CoreDNS, as kubeadm and EKS name it.
const KubeDNS = "kube-dns"

// Corefile is CoreDNS's configuration. It never forwards: the machine's own resolver
// is outside the sandbox, and no query may leave it. Two server blocks: the cluster's
// zones, served by the kubernetes plugin; and every other name, answered NXDOMAIN at
// once by the template plugin.
//
// Unlike kubeadm's, the kubernetes plugin has no `fallthrough in-addr.arpa ip6.arpa`:
// that hands unknown reverse names to `forward`, and with nothing after it CoreDNS
// would answer SERVFAIL; authoritative for the reverse zones, it answers NXDOMAIN.
// The catch-all cannot sit in the cluster's block either: CoreDNS runs plugins in
// its compiled order, in which template comes before kubernetes and would answer for
// cluster names too. There is no `loop`: a loop needs a forward.
func Corefile(clusterDomain string) string {
	return fmt.Sprintf(`.:53 {
    errors
    prometheus :9153
    template ANY ANY {
        rcode NXDOMAIN
    }
}
%[1]s:53 in-addr.arpa:53 ip6.arpa:53 {
    errors
    health {
        lameduck 5s
    }
    ready
    kubernetes %[1]s in-addr.arpa ip6.arpa {
        pods insecure
        ttl 30
    }
    prometheus :9153
    cache 30 {
        disable success %[1]s
        disable denial %[1]s
    }
    reload
    loadbalance
}
`, strings.TrimSuffix(clusterDomain, "."))
}

// coreDNS renders CoreDNS: its ServiceAccount and role, Corefile, Deployment and the
// kube-dns Service at the cluster DNS address (kubeadm's shape).
func coreDNS(o *Options) []runtime.Object {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem, Labels: labels(CoreDNS, nil)}
	}
	podLabels := map[string]string{"k8s-app": KubeDNS}
	sa := &corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: meta(CoreDNS)}
	role := &rbacv1.ClusterRole{
		TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"),
		ObjectMeta: metav1.ObjectMeta{Name: CoreDNSRole, Labels: labels(CoreDNS, nil)},
		Rules:      CoreDNSRules(),
	}
	binding := &rbacv1.ClusterRoleBinding{
		TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
		ObjectMeta: metav1.ObjectMeta{Name: CoreDNSRole, Labels: labels(CoreDNS, nil)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: CoreDNSRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: metav1.NamespaceSystem, Name: CoreDNS}},
	}
	cm := &corev1.ConfigMap{TypeMeta: typeMeta("v1", "ConfigMap"), ObjectMeta: meta(CoreDNS),
		Data: map[string]string{"Corefile": Corefile(o.ClusterDomain)}}
	probe := func(path string, port int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromInt32(port), Scheme: corev1.URISchemeHTTP,
		}}}
	}
	liveness := probe("/health", 8080)
	liveness.InitialDelaySeconds, liveness.TimeoutSeconds, liveness.SuccessThreshold, liveness.FailureThreshold = 60, 5, 1, 5
	dep := &appsv1.Deployment{
		TypeMeta:   typeMeta("apps/v1", "Deployment"),
		ObjectMeta: metav1.ObjectMeta{Name: CoreDNS, Namespace: metav1.NamespaceSystem, Labels: labels(CoreDNS, podLabels)},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr.To(intstr.FromInt32(1))},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels(CoreDNS, podLabels)},
				Spec: corev1.PodSpec{
					PriorityClassName:  "system-cluster-critical",
					ServiceAccountName: CoreDNS,
					// CoreDNS resolves nothing through the node's resolv.conf (it never
					// forwards); Default keeps it from querying itself at startup.
					DNSPolicy:    corev1.DNSDefault,
					NodeSelector: map[string]string{corev1.LabelOSStable: "linux"},
					Affinity: &corev1.Affinity{
						NodeAffinity: notSimulated().NodeAffinity,
						PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
							Weight: 100,
							PodAffinityTerm: corev1.PodAffinityTerm{
								LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
									{Key: "k8s-app", Operator: metav1.LabelSelectorOpIn, Values: []string{KubeDNS}},
								}},
								TopologyKey: corev1.LabelHostname,
							},
						}}},
					},
					Tolerations: []corev1.Toleration{
						{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
						{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule},
					},
					Containers: []corev1.Container{{
						Name:            CoreDNS,
						Image:           o.CoreDNSImage,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Args:            []string{"-conf", "/etc/coredns/Corefile"},
						Resources: corev1.ResourceRequirements{
							Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("170Mi")},
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("70Mi")},
						},
						Ports: []corev1.ContainerPort{
							{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
							{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP},
							{Name: "metrics", ContainerPort: 9153, Protocol: corev1.ProtocolTCP},
							{Name: "liveness-probe", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
							{Name: "readiness-probe", ContainerPort: 8181, Protocol: corev1.ProtocolTCP},
						},
						LivenessProbe:  liveness,
						ReadinessProbe: probe("/ready", 8181),
						// Root, with only NET_BIND_SERVICE: upstream's image runs as a
						// non-root user and binds port 53 through a file capability set
						// on /coredns, but the locally built image has no file
						// capabilities, and a non-root process gets no added capability
						// without them. As root, the bounding set below is what it has.
						SecurityContext: &corev1.SecurityContext{
							RunAsUser:                ptr.To[int64](0),
							AllowPrivilegeEscalation: ptr.To(false),
							Capabilities: &corev1.Capabilities{
								Add:  []corev1.Capability{"NET_BIND_SERVICE"},
								Drop: []corev1.Capability{"ALL"},
							},
							ReadOnlyRootFilesystem: ptr.To(true),
						},
						VolumeMounts: []corev1.VolumeMount{{Name: "config-volume", MountPath: "/etc/coredns", ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{{Name: "config-volume", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: CoreDNS},
						Items:                []corev1.KeyToPath{{Key: "Corefile", Path: "Corefile"}},
					}}}},
				},
			},
		},
	}
	svcLabels := map[string]string{"k8s-app": KubeDNS, "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"}
	svc := &corev1.Service{
		TypeMeta:   typeMeta("v1", "Service"),
		ObjectMeta: metav1.ObjectMeta{Name: KubeDNS, Namespace: metav1.NamespaceSystem, Labels: labels(CoreDNS, svcLabels)},
		Spec: corev1.ServiceSpec{
			Selector:  podLabels,
			ClusterIP: o.DNSIP.String(),
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
				{Name: "metrics", Port: 9153, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9153)},
			},
		},
	}
	return []runtime.Object{sa, role, binding, cm, dep, svc}
}

// CoreDNSRules are what CoreDNS reads: Services, their endpoints, pods and namespaces.
func CoreDNSRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
	}
}
