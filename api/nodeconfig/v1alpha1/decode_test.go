package v1alpha1

import (
	"errors"
	"strings"
	"testing"
)

const minimal = `apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: my-cluster
    apiServerEndpoint: https://example.com
    certificateAuthority: Y2VydGlmaWNhdGVBdXRob3JpdHk=
    cidr: 10.100.0.0/16
`

func TestDecodeMinimal(t *testing.T) {
	cfg, err := Decode([]byte(minimal), "test")
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Spec.Cluster
	if c.Name != "my-cluster" || c.APIServerEndpoint != "https://example.com" || string(c.CertificateAuthority) != "certificateAuthority" || c.CIDR != "10.100.0.0/16" {
		t.Errorf("cluster = %+v", c)
	}
}

func TestDecodeJSON(t *testing.T) {
	js := `{"apiVersion":"node.eks.aws/v1alpha1","kind":"NodeConfig","spec":{"cluster":{"name":"c"},"kubelet":{"config":{"maxPods":110,"clusterDNS":["1.1.1.1"]},"flags":["--v=2"]},"featureGates":{"InstanceIdNodeName":true}}}`
	cfg, err := Decode([]byte(js), "test")
	if err != nil {
		t.Fatal(err)
	}
	if string(cfg.Spec.Kubelet.Config["maxPods"]) != "110" || string(cfg.Spec.Kubelet.Config["clusterDNS"]) != `["1.1.1.1"]` {
		t.Errorf("kubelet config = %v", cfg.Spec.Kubelet.Config)
	}
	if !cfg.Spec.Enabled(FeatureInstanceIDNodeName) || cfg.Spec.Enabled(FeatureFastImagePull) {
		t.Errorf("feature gates = %v", cfg.Spec.FeatureGates)
	}
}

func TestDecodeErrorsNameFieldAndLine(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string
	}{
		{"misspelt field", strings.Replace(minimal, "    name: my-cluster", "    name-not-real: my-cluster", 1),
			[]string{"doc, line 5: field spec.cluster.name-not-real: unknown field (did you mean \"name\"?)"}},
		{"case", strings.Replace(minimal, "apiServerEndpoint", "apiserverEndpoint", 1),
			[]string{`line 6: field spec.cluster.apiserverEndpoint: unknown field (did you mean "apiServerEndpoint"? field names are case-sensitive)`}},
		{"two unknown fields", minimal + "  kublet: {}\n  extra: 1\n",
			[]string{`line 9: field spec.kublet: unknown field (did you mean "kubelet"?)`, `line 10: field spec.extra: unknown field`}},
		{"wrong type", minimal + "    enableOutpost: maybe\n",
			[]string{"line 9: field spec.cluster.enableOutpost: a string cannot be a bool"}},
		{"raw PEM CA", strings.Replace(minimal, "Y2VydGlmaWNhdGVBdXRob3JpdHk=", "-----BEGIN CERTIFICATE-----", 1),
			[]string{"line 7: field spec.cluster.certificateAuthority: not base64", "base64 -w0 ca.crt"}},
		{"syntax", "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n   name: a\n  bad\n", []string{"doc, line 6: syntax error"}},
		{"wrong kind", "apiVersion: v1\nkind: ConfigMap\n", []string{`line 2: not a NodeConfig: kind "ConfigMap" of apiVersion "v1"`}},
		{"missing kind", "apiVersion: node.eks.aws/v1alpha1\nspec: {}\n", []string{"field kind: missing (want kind: NodeConfig)"}},
		{"unsupported version", "apiVersion: node.eks.aws/v1beta9\nkind: NodeConfig\n", []string{`line 1: field apiVersion: version "node.eks.aws/v1beta9" is not supported`}},
		{"duplicate key", minimal + "  cluster: {}\n", []string{"doc, line 9: field spec.cluster: given twice (first on line 4)"}},
		{"two documents", minimal + "---\n" + minimal, []string{"more than one YAML document"}},
		{"not an object", "- a\n- b\n", []string{"not a YAML or JSON object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.doc), "doc")
			if err == nil {
				t.Fatal("Decode succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(minimal))
	f.Add([]byte(`{"apiVersion":"node.eks.aws/v1alpha1","kind":"NodeConfig","spec":{"kubelet":{"config":{"a":[1,{"b":null}]}}}}`))
	f.Add([]byte("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec: &a\n  x: *a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Decode(data, "fuzz")
		if err == nil && cfg == nil {
			t.Fatal("nil config without error")
		}
		// Every error names the document and is a located DecodeError.
		var de *DecodeError
		if err != nil && (!strings.HasPrefix(err.Error(), "fuzz") || !errors.As(err, &de)) {
			t.Fatalf("error %q does not name the document or is not a *DecodeError", err)
		}
	})
}
