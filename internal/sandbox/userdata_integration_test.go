package sandbox

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// A user's own user data reaches simulated kubelets through AddNodesTo, as another
// process sends it: template text filled in with the cluster's values (the host's
// endpoint for a simulated kubelet), and gzip data passed on untouched, its bootstrap.sh
// call naming only the cluster, which the local DescribeCluster resolves. Each node
// registers with the labels its user data gives it, and a misspelt field is refused
// naming the source and the line.
func TestAddNodesWithUserData(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	sb := startSim(t, "sbu", 0, nil)
	cfg, err := clientcmd.BuildConfigFromFlags("", sb.Info().Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte("#!/bin/bash\n/etc/eks/bootstrap.sh sbu --kubelet-extra-args '--node-labels=team=gzip'\n"))
	_ = zw.Close()
	for _, tc := range []struct {
		source, data, team, family string
	}{
		{"al2.sh", "#!/bin/bash\n/etc/eks/bootstrap.sh {{.ClusterName}} --apiserver-endpoint {{.APIServerEndpoint}} " +
			"--b64-cluster-ca {{.CertificateAuthority}} --dns-cluster-ip {{.ClusterDNS}} --kubelet-extra-args '--node-labels=team=al2'\n",
			"al2", "AmazonLinux2"},
		{"br.toml", "settings.kubernetes.cluster-name = '{{.ClusterName}}'\nsettings.kubernetes.api-server = '{{.APIServerEndpoint}}'\n" +
			"settings.kubernetes.cluster-certificate = '{{.CertificateAuthority}}'\nsettings.kubernetes.cluster-dns-ip = '{{.ClusterDNS}}'\n" +
			"settings.kubernetes.node-labels.team = 'bottlerocket'\n", "bottlerocket", "Bottlerocket"},
		{"cloud.gz", gz.String(), "gzip", "AmazonLinux2"},
	} {
		var steps []string
		added, err := AddNodesTo(t.Context(), "sbu", NodeOptions{Count: 1, UserData: []byte(tc.data), UserDataSource: tc.source},
			func(e Event) { steps = append(steps, e.Step) })
		if err != nil || len(added) != 1 {
			t.Fatalf("%s: AddNodesTo = %+v, %v", tc.source, added, err)
		}
		if want := tc.family + " user data from " + tc.source; !strings.Contains(strings.Join(steps, "\n"), want) {
			t.Errorf("%s: progress lacks %q: %q", tc.source, want, steps)
		}
		n, err := client.CoreV1().Nodes().Get(t.Context(), added[0].Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Labels["team"] != tc.team {
			t.Errorf("%s: node %s has team=%q, want %q from its user data", tc.source, n.Name, n.Labels["team"], tc.team)
		}
	}
	_, err = AddNodesTo(t.Context(), "sbu", NodeOptions{Count: 1, UserData: []byte("\n{{.Cluster}}"), UserDataSource: "typo.sh"}, nil)
	if err == nil || !strings.Contains(err.Error(), "user data typo.sh, line 2: unknown template field .Cluster") {
		t.Errorf("AddNodesTo with a misspelt field: %v", err)
	}
}
