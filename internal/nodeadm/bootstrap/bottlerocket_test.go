package bootstrap

import (
	"encoding/json"
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodejoin/nodejoin/api/nodeconfig/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig"
	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig/instancetypes"
	"github.com/nodejoin/nodejoin/internal/userdata"
)

// TestBottlerocketMaxPodsSizesKubeReserved is the regression test of issue 14's first
// defect: on Bottlerocket, settings.kubernetes.max-pods sizes kubeReserved memory, so
// max-pods 20 on an m5.large (29 pods by its ENIs) reserves 11×20+255 = 475Mi, not 574Mi.
func TestBottlerocketMaxPodsSizesKubeReserved(t *testing.T) {
	toml := "[settings.kubernetes]\ncluster-name = \"c1\"\napi-server = \"https://example.com\"\n" +
		"cluster-certificate = \"Q0E=\"\ncluster-dns-ip = \"10.100.0.10\"\nmax-pods = 20\n"
	for _, tt := range []struct {
		instanceType string
		wantMemory   string
	}{
		{"m5.large", "475Mi"},
		{"mock-type.large", "475Mi"}, // unknown to the table: max-pods still applies
	} {
		t.Run(tt.instanceType, func(t *testing.T) {
			res, err := userdata.Decode(t.Context(), []byte(toml), nil)
			if err != nil {
				t.Fatal(err)
			}
			var cfgs []*v1alpha1.NodeConfig
			for _, c := range res.Configs {
				cfgs = append(cfgs, c.Config)
			}
			merged, err := nodeconfig.Merge(cfgs)
			if err != nil {
				t.Fatal(err)
			}
			merged.Spec.Cluster.CertificateAuthority = []byte(testCA)
			md := *e2eInstance
			md.InstanceType = tt.instanceType
			out, err := Render(merged, &md, Options{CPUMillis: 2000, InstanceTypes: instancetypes.Lookup})
			if err != nil {
				t.Fatal(err)
			}
			var kc kubeletv1beta1.KubeletConfiguration
			if err := json.Unmarshal(file(t, out, KubeletConfigPath), &kc); err != nil {
				t.Fatal(err)
			}
			if kc.KubeReserved["memory"] != tt.wantMemory || kc.MaxPods != 20 || out.MaxPods != 20 {
				t.Errorf("kubeReserved memory %s, maxPods %d (computed %d); want %s and 20", kc.KubeReserved["memory"], kc.MaxPods, out.MaxPods, tt.wantMemory)
			}
		})
	}
}
