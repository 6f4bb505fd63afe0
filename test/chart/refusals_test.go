package chart

import (
	"strings"
	"testing"
)

// values.schema.json refuses a wrong type, an unknown key and a value outside its
// enumeration, naming the value's path; helm exits non-zero and renders nothing.
func TestSchemaRefusesWrongValuesWithTheirPath(t *testing.T) {
	for _, tt := range []struct {
		name, set, want string
	}{
		{"wrong type", "replicas=two", "/replicas"},
		{"wrong nested type", "webhook.enabled=maybe", "/webhook/enabled"},
		{"unknown key", "webhook.clientCA=x", "additional properties 'clientCA' not allowed"},
		{"unknown top-level key", "replica=3", "additional properties 'replica' not allowed"},
		{"outside the enumeration", "csr.mode=trust", "/csr/mode"},
		{"unknown inventory", "inventory.source=dns", "/inventory/source"},
		{"unknown add-on", "addons.names={kube-proxy,vpc-cni}", "/addons/names/1"},
		{"STS endpoint over plain HTTP", "webhook.stsEndpoint=http://10.0.0.1:8773", "/webhook/stsEndpoint"},
		{"STS endpoint with a path", "webhook.stsEndpoint=https://sts.local/x", "/webhook/stsEndpoint"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := run(t, "template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion, "--values", values("approver"), "--set", tt.set)
			if code == 0 {
				t.Fatalf("--set %s rendered:\n%.300s", tt.set, out)
			}
			if !strings.Contains(errOut, tt.want) {
				t.Errorf("--set %s: exit %d, message %q, want it to name %q", tt.set, code, errOut, tt.want)
			}
		})
	}
}

// What the schema cannot say, the templates refuse at render time, naming the value to
// set: a webhook without its client CA, signing without a key, pods on workers while
// they hold the webhook or the CA key.
func TestTemplatesRefuseUnsafeCombinationsNamingTheValue(t *testing.T) {
	webhook := []string{"--set", "webhook.enabled=true,webhook.clusterID=c,webhook.region=us-west-2,webhook.networkPolicy.enabled=false"}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"webhook without client CA", webhook, "set webhook.clientCAConfigMap"},
		{"webhook without cluster ID", []string{"--set", "webhook.enabled=true,webhook.clientCAConfigMap=ca,webhook.region=r,webhook.networkPolicy.enabled=false"}, "set webhook.clusterID"},
		{"signing without key", []string{"--set", "csr.mode=sign"}, "set csr.signing.caSecret"},
		{"signer on workers", []string{"--set", "csr.mode=sign,csr.signing.caSecret=ca,placement.controlPlane=false"}, "Set placement.controlPlane=true"},
		{"webhook on workers", append(webhook, "--set", "webhook.clientCAConfigMap=ca,placement.controlPlane=false"), "Set placement.controlPlane=true"},
		{"network policy without CIDR", []string{"--set", "webhook.enabled=true,webhook.clusterID=c,webhook.region=r,webhook.clientCAConfigMap=ca"}, "set it to the addresses kube-apiserver calls the webhook from"},
		{"instance proofs required without certificates", append(webhook, "--set", "webhook.clientCAConfigMap=ca,webhook.instanceProofs.required=true"), "set it to the ConfigMap (key certs.pem)"},
		{"EC2 inventory without region", []string{"--set", "inventory.ec2.region="}, "set inventory.ec2.region"},
		{"file inventory without ConfigMap", []string{"--set", "inventory.source=file"}, "set inventory.file.configMap"},
		{"kube-proxy without endpoint", []string{"--set", "addons.enabled=true"}, "addons.apiserverEndpoint is empty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion, "--values", values("approver")}, tt.args...)
			_, errOut, code := run(t, args...)
			if code == 0 || !strings.Contains(errOut, tt.want) {
				t.Errorf("exit %d, message %q; want a refusal containing %q", code, errOut, tt.want)
			}
		})
	}
	// Workers are fine for the approver alone: it holds no key and answers no tokens.
	render(t, "--values", values("approver"), "--set", "placement.controlPlane=false")
}
