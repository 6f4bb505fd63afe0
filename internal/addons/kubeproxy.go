package addons

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	componentbaseconfigv1alpha1 "k8s.io/component-base/config/v1alpha1"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	"k8s.io/utils/ptr"
	sigsyaml "sigs.k8s.io/yaml"
)

// Paths inside the kube-proxy container.
const (
	kubeProxyConfigDir = "/var/lib/kube-proxy"
	saDir              = "/var/run/secrets/kubernetes.io/serviceaccount"
	xtablesLock        = "/run/xtables.lock"
)

// kubeProxy renders kube-proxy: its ServiceAccount bound to system:node-proxier, its
// configuration and kubeconfig, and its DaemonSet (kubeadm's shape).
func kubeProxy(o *Options) ([]runtime.Object, error) {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem, Labels: labels(KubeProxy, nil)}
	}
	config, err := kubeProxyConfig(o)
	if err != nil {
		return nil, err
	}
	kubeconfig, err := kubeProxyKubeconfig(o)
	if err != nil {
		return nil, err
	}
	sa := &corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: meta(KubeProxy)}
	crb := &rbacv1.ClusterRoleBinding{
		TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
		ObjectMeta: metav1.ObjectMeta{Name: KubeProxyBinding, Labels: labels(KubeProxy, nil)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: NodeProxierRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: metav1.NamespaceSystem, Name: KubeProxy}},
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   typeMeta("v1", "ConfigMap"),
		ObjectMeta: meta(KubeProxy),
		Data:       map[string]string{"config.conf": string(config), "kubeconfig.conf": string(kubeconfig)},
	}
	podLabels := map[string]string{"k8s-app": KubeProxy}
	ds := &appsv1.DaemonSet{
		TypeMeta:   typeMeta("apps/v1", "DaemonSet"),
		ObjectMeta: metav1.ObjectMeta{Name: KubeProxy, Namespace: metav1.NamespaceSystem, Labels: labels(KubeProxy, podLabels)},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type:          appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromString("10%"))},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels(KubeProxy, podLabels)},
				Spec: corev1.PodSpec{
					PriorityClassName:  "system-node-critical",
					ServiceAccountName: KubeProxy,
					// The node's network namespace is what kube-proxy programs.
					HostNetwork:  true,
					NodeSelector: map[string]string{corev1.LabelOSStable: "linux"},
					Affinity:     notSimulated(),
					Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name:            KubeProxy,
						Image:           o.KubeProxyImage,
						ImagePullPolicy: corev1.PullIfNotPresent,
						// A hostNetwork pod of a local node shares the machine's hostname,
						// not the node's: the node name comes from the pod's spec.
						Command: []string{"/usr/local/bin/kube-proxy", "--config=" + kubeProxyConfigDir + "/config.conf", "--hostname-override=$(NODE_NAME)"},
						Env: []corev1.EnvVar{{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{
							FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"},
						}}},
						SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "kube-proxy", MountPath: kubeProxyConfigDir},
							{Name: "xtables-lock", MountPath: xtablesLock},
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "kube-proxy", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: KubeProxy},
						}}},
						// The lock iptables takes: shared with everything else on the
						// machine that runs iptables (harmless: it only serializes them).
						{Name: "xtables-lock", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
							Path: xtablesLock, Type: ptr.To(corev1.HostPathFileOrCreate),
						}}},
					},
				},
			},
		},
	}
	return []runtime.Object{sa, crb, cm, ds}, nil
}

// NodeProxierRole is upstream's bootstrap role for kube-proxy; KubeProxyBinding binds
// kube-proxy's ServiceAccount to it.
const (
	NodeProxierRole  = "system:node-proxier"
	KubeProxyBinding = "nodejoin:node-proxier"
)

// kubeProxyConfig is the KubeProxyConfiguration. conntrack maxPerCore and min are 0:
// otherwise kube-proxy writes nf_conntrack_max, which is read-only in any network
// namespace but the host's, and exits.
func kubeProxyConfig(o *Options) ([]byte, error) {
	c := kubeproxyv1alpha1.KubeProxyConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: kubeproxyv1alpha1.SchemeGroupVersion.String(), Kind: "KubeProxyConfiguration"},
		ClientConnection: componentbaseconfigv1alpha1.ClientConnectionConfiguration{
			Kubeconfig: kubeProxyConfigDir + "/kubeconfig.conf",
		},
		BindAddress: "0.0.0.0",
		// Explicit: an empty mode logs an error about the default changing.
		Mode:        "iptables",
		ClusterCIDR: o.PodCIDR.String(),
		IPTables: kubeproxyv1alpha1.KubeProxyIPTablesConfiguration{
			SyncPeriod:    metav1.Duration{Duration: 30 * time.Second},
			MinSyncPeriod: metav1.Duration{Duration: time.Second},
		},
		Conntrack: kubeproxyv1alpha1.KubeProxyConntrackConfiguration{
			MaxPerCore: ptr.To[int32](0),
			Min:        ptr.To[int32](0),
		},
	}
	b, err := sigsyaml.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encoding the KubeProxyConfiguration: %w", err)
	}
	return b, nil
}

// kubeProxyKubeconfig points kube-proxy at the API server's real address, with the
// pod's service account token and CA.
func kubeProxyKubeconfig(o *Options) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["default"] = &clientcmdapi.Cluster{Server: o.APIServer, CertificateAuthority: saDir + "/ca.crt"}
	cfg.AuthInfos["default"] = &clientcmdapi.AuthInfo{TokenFile: saDir + "/token"}
	cfg.Contexts["default"] = &clientcmdapi.Context{Cluster: "default", AuthInfo: "default"}
	cfg.CurrentContext = "default"
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding kube-proxy's kubeconfig: %w", err)
	}
	return b, nil
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}
