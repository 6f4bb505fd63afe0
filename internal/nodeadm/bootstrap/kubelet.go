package bootstrap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig"
)

// tlsCipherSuites are the kubelet server's cipher suites, as upstream nodeadm sets them.
var tlsCipherSuites = []string{
	"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
	"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
	"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
	"TLS_RSA_WITH_AES_128_GCM_SHA256", "TLS_RSA_WITH_AES_256_GCM_SHA384",
}

// kubeletConfiguration is the kubelet configuration nodeadm computes for the node, before the
// user's drop-in (spec.kubelet.config), which the kubelet merges over it.
func (r *renderer) kubeletConfiguration(dns string, maxPods int32) *kubeletv1beta1.KubeletConfiguration {
	c := &kubeletv1beta1.KubeletConfiguration{
		TypeMeta: metav1.TypeMeta{Kind: "KubeletConfiguration", APIVersion: kubeletv1beta1.SchemeGroupVersion.String()},
		Address:  "0.0.0.0",
		Authentication: kubeletv1beta1.KubeletAuthentication{
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(true), CacheTTL: metav1.Duration{Duration: 2 * time.Minute}},
			X509:      kubeletv1beta1.KubeletX509Authentication{ClientCAFile: r.p(CAPath)},
		},
		Authorization: kubeletv1beta1.KubeletAuthorization{
			Mode: kubeletv1beta1.KubeletAuthorizationModeWebhook,
			Webhook: kubeletv1beta1.KubeletWebhookAuthorization{
				CacheAuthorizedTTL:   metav1.Duration{Duration: 5 * time.Minute},
				CacheUnauthorizedTTL: metav1.Duration{Duration: 30 * time.Second},
			},
		},
		CgroupDriver:             "systemd",
		CgroupRoot:               "/",
		ClusterDomain:            "cluster.local",
		ClusterDNS:               []string{dns},
		ContainerRuntimeEndpoint: "unix://" + r.p("/run/containerd/containerd.sock"),
		EvictionHard:             map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%"},
		FeatureGates:             map[string]bool{"RotateKubeletServerCertificate": true},
		HairpinMode:              kubeletv1beta1.HairpinVeth,
		ProtectKernelDefaults:    true,
		SerializeImagePulls:      ptr.To(false),
		ServerTLSBootstrap:       true,
		TLSCipherSuites:          tlsCipherSuites,
		ProviderID:               fmt.Sprintf("aws:///%s/%s", r.md.AvailabilityZone, r.md.InstanceID),
		SystemReservedCgroup:     "/system",
		KubeReservedCgroup:       "/runtime",
		MaxPods:                  maxPods,
		KubeReserved: map[string]string{
			"cpu":               fmt.Sprintf("%dm", nodeconfig.KubeReservedCPUMillis(r.o.CPUMillis)),
			"ephemeral-storage": "1Gi",
			"memory":            fmt.Sprintf("%dMi", nodeconfig.KubeReservedMemoryMi(int(maxPods))),
		},
	}
	c.Logging.Verbosity = 2
	// A kubelet that joined with a bootstrap token holds a client certificate from a
	// CSR, which the signer caps at a day: without rotateCertificates the kubelet never
	// asks for another and stops reaching the API server when it expires. With it, the
	// kubelet renews at 70-90 % of the certificate's life, authenticating with the
	// current certificate. With the credential plugin the kubelet authenticates by a
	// token the plugin refreshes, and has no client certificate to renew; rotation
	// there would make it drop the plugin's token for a certificate of its own.
	// serverTLSBootstrap renews the serving certificate on both paths.
	c.RotateCertificates = r.o.BootstrapToken != ""
	if r.versionAtLeast("v1.33.0") {
		c.FeatureGates["DynamicResourceAllocation"] = true
	}
	if r.versionAtLeast("v1.34.0") {
		c.FeatureGates["MutableCSINodeAllocatableCount"] = true
		c.ShutdownGracePeriod = metav1.Duration{Duration: 150 * time.Second}
		c.ShutdownGracePeriodCriticalPods = metav1.Duration{Duration: 30 * time.Second}
	}
	return c
}

func (r *renderer) kubeletConfig() error {
	spec := &r.cfg.Spec
	dns, err := nodeconfig.ClusterDNS(spec.Cluster.CIDR)
	if err != nil {
		return err
	}
	info, known := nodeconfig.ENIInfo{}, false
	if r.o.InstanceTypes != nil {
		info, known = r.o.InstanceTypes(r.md.InstanceType)
	}
	maxPods := nodeconfig.DefaultMaxPods
	switch {
	case known:
		maxPods, err = nodeconfig.MaxPods(info, spec.Kubelet.MaxPodsExpression)
		if err != nil {
			r.warn("%v", err)
		}
	case spec.Kubelet.MaxPodsExpression != "":
		// An expression that needs no instance facts (a constant, such as Bottlerocket's
		// max-pods) still applies to an unknown instance type.
		if n, err := nodeconfig.EvalConstantMaxPods(spec.Kubelet.MaxPodsExpression); err == nil {
			maxPods = n
		} else {
			r.warn("instance type %q is not in the instance-type table and maxPodsExpression %q needs it (%v): max pods is %d", r.md.InstanceType, spec.Kubelet.MaxPodsExpression, err, maxPods)
		}
	default:
		r.warn("instance type %q is not in the instance-type table: max pods is %d", r.md.InstanceType, maxPods)
	}
	if maxPods < 0 || maxPods > math.MaxInt32 {
		return fmt.Errorf("max pods %d is out of the kubelet's range", maxPods)
	}
	r.out.MaxPods = maxPods
	kc := r.kubeletConfiguration(dns, int32(maxPods))
	r.out.Warnings = append(r.out.Warnings, r.gates.filter("nodeadm's defaults", kc.FeatureGates)...)
	data, err := encodeKubeletConfig(kc)
	if err != nil {
		return fmt.Errorf("encoding the kubelet configuration: %w", err)
	}
	r.out.Files.add(KubeletConfigPath, 0o644, data)
	if len(spec.Kubelet.Config) > 0 {
		// The user's drop-in stays a free-form object: it may carry fields newer than
		// the types this nodeadm was built with, and the kubelet merges it field by field.
		dropIn := map[string]any{"kind": "KubeletConfiguration", "apiVersion": kubeletv1beta1.SchemeGroupVersion.String()}
		for k, v := range spec.Kubelet.Config {
			dropIn[k] = v
		}
		if gates, ok := userGates(spec.Kubelet.Config["featureGates"]); ok {
			if msgs := r.gates.filter("spec.kubelet.config.featureGates", gates); len(msgs) > 0 {
				r.out.Warnings = append(r.out.Warnings, msgs...)
				if len(gates) == 0 {
					delete(dropIn, "featureGates")
				} else {
					dropIn["featureGates"] = gates
				}
			}
		}
		data, err := indentJSON(dropIn)
		if err != nil {
			return fmt.Errorf("encoding spec.kubelet.config: %w", err)
		}
		r.out.Files.add(KubeletDropInPath, 0o644, data)
	}
	return nil
}

// encodeKubeletConfig writes only the fields nodeadm set: the v1beta1 types encode some
// unset fields (structs and durations without omitempty semantics, such as logging's
// flushFrequency or crashLoopBackOff), so every value equal to the zero configuration's
// is dropped. readOnlyPort 0 is written although it is the zero value: the port stays
// off explicitly, whatever a kubelet's default.
func encodeKubeletConfig(c *kubeletv1beta1.KubeletConfiguration) ([]byte, error) {
	set, err := toObject(c)
	if err != nil {
		return nil, err
	}
	zero, err := toObject(&kubeletv1beta1.KubeletConfiguration{})
	if err != nil {
		return nil, err
	}
	pruneZero(set, zero)
	set["readOnlyPort"] = c.ReadOnlyPort
	return indentJSON(set)
}

func toObject(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}

// pruneZero deletes from set every key whose value equals zero's, recursing into
// objects and dropping those left empty.
func pruneZero(set, zero map[string]any) {
	for k, v := range set {
		z, ok := zero[k]
		if !ok {
			continue
		}
		if sub, isObj := v.(map[string]any); isObj {
			if zsub, zObj := z.(map[string]any); zObj {
				pruneZero(sub, zsub)
				if len(sub) == 0 {
					delete(set, k)
				}
				continue
			}
		}
		if reflect.DeepEqual(v, z) {
			delete(set, k)
		}
	}
}

// indentJSON encodes with sorted keys and a 4-space indent, as upstream writes.
func indentJSON(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "    "); err != nil {
		return nil, err
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}
