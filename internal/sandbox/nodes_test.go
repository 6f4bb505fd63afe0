package sandbox

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
	"github.com/nodejoin/nodejoin/internal/sandbox/joinstatus"
)

// What `get nodes` lists follows the local EC2: instances it terminated (or forgot)
// leave, and a name a new instance took over shows once, under the new instance, with
// the join state of its own Node (matched by providerID).
func TestNodeStatusesFollowTheCloud(t *testing.T) {
	const reused = "ip-198-18-0-11.local.internal"
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	rec := func(id, name, group string, launched int) *instance.Record {
		return &instance.Record{ID: id, NodeName: name, IP: "198.18.0.11", Kubelet: instance.KubeletReal, Identity: instance.IdentityAWSIAM,
			AutoScalingGroup: group, Zone: "us-west-2a", Launched: at.Add(time.Duration(launched) * time.Minute)}
	}
	readyNode := func(name, id string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-west-2a/" + id},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	}
	// Two instances of a deleted group (one terminated, one forgotten by EC2), then a
	// new instance with the first one's name, and an unrelated running instance.
	recs := []*instance.Record{
		rec("i-new", reused, "", 3),
		rec("i-old1", reused, "ng-1", 1),
		rec("i-old2", "ip-198-18-0-12.local.internal", "ng-1", 1),
		rec("i-other", "ip-198-18-0-13.local.internal", "", 2),
	}
	states := map[string]string{"i-old1": "terminated", "i-new": "running", "i-other": "running"}

	type row struct{ id, state, step, instanceState string }
	for _, tc := range []struct {
		name       string
		nodes      []*corev1.Node
		terminated bool
		want       []row
	}{
		{
			name:  "the new instance's Node is Ready",
			nodes: []*corev1.Node{readyNode(reused, "i-new"), readyNode("ip-198-18-0-13.local.internal", "i-other")},
			want:  []row{{"i-other", JoinReady, "Ready", "running"}, {"i-new", JoinReady, "Ready", "running"}},
		},
		{
			name:  "the name still has the old instance's Node",
			nodes: []*corev1.Node{readyNode(reused, "i-old1"), readyNode("ip-198-18-0-13.local.internal", "i-other")},
			want:  []row{{"i-other", JoinReady, "Ready", "running"}, {"i-new", JoinJoining, "Node registered", "running"}},
		},
		{
			name:       "terminated ones when asked, in launch order",
			nodes:      []*corev1.Node{readyNode(reused, "i-new"), readyNode("ip-198-18-0-13.local.internal", "i-other")},
			terminated: true,
			want: []row{{"i-old1", JoinTerminated, "instance started", "terminated"}, {"i-old2", JoinTerminated, "instance started", "terminated"},
				{"i-other", JoinReady, "Ready", "running"}, {"i-new", JoinReady, "Ready", "running"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := &joinstatus.Snapshot{Nodes: map[string]*corev1.Node{}}
			for _, n := range tc.nodes {
				snap.Nodes[n.Name] = n
				snap.CSRs = append(snap.CSRs, certificatesv1.CertificateSigningRequest{
					ObjectMeta: metav1.ObjectMeta{Name: "csr-" + n.Name},
					Spec:       certificatesv1.CertificateSigningRequestSpec{SignerName: certificatesv1.KubeletServingSignerName, Username: "system:node:" + n.Name},
					Status: certificatesv1.CertificateSigningRequestStatus{Certificate: []byte("cert"),
						Conditions: []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}},
				})
			}
			got := nodeStatuses(recs, states, snap, map[string]bool{}, NodesOptions{Terminated: tc.terminated})
			if len(got) != len(tc.want) {
				t.Fatalf("got %d rows, want %d: %+v", len(got), len(tc.want), got)
			}
			seen := map[string]int{}
			for i, w := range tc.want {
				g := got[i]
				if g.InstanceID != w.id || g.State != w.state || g.Step != w.step || g.InstanceState != w.instanceState {
					t.Errorf("row %d: %s %s %s (EC2 %s), want %s %s %s (EC2 %s)", i, g.InstanceID, g.State, g.Step, g.InstanceState, w.id, w.state, w.step, w.instanceState)
				}
				if g.InstanceState != "terminated" {
					seen[g.Name]++
				}
			}
			for name, n := range seen {
				if n > 1 {
					t.Errorf("node %s is listed %d times among live instances", name, n)
				}
			}
		})
	}
	if recs[0].ID != "i-new" {
		t.Errorf("nodeStatuses reordered its caller's records")
	}
}

func TestOptionsServiceCIDR(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	for _, tt := range []struct {
		services, nodes string
		ok              bool
	}{
		{"", "", true},
		{"172.20.0.0/16", "", true},
		{"172.20.0.0/16", "10.250.0.0/24", true},
		{"10.100.0.0/16", "10.100.0.0/24", false}, // overlaps the node range
		{"198.18.0.0/20", "", false},              // overlaps the default node range
		{"172.20.0.1/16", "", false},              // not a network address
		{"10.0.0.0/8", "", false},
		{"10.100.0.0/29", "", false},
		{"fd00::/108", "", false},
	} {
		o := Options{}
		if tt.services != "" {
			o.ServiceCIDR = netip.MustParsePrefix(tt.services)
		}
		if tt.nodes != "" {
			o.NodeCIDR = netip.MustParsePrefix(tt.nodes)
		}
		err := o.complete()
		var oe *OptionError
		switch {
		case tt.ok && err != nil:
			t.Errorf("--service-cidr %q --node-cidr %q: %v", tt.services, tt.nodes, err)
		case !tt.ok && (!errors.As(err, &oe) || oe.Option != "service-cidr"):
			t.Errorf("--service-cidr %q --node-cidr %q: error %v, want one about service-cidr", tt.services, tt.nodes, err)
		}
	}
	o := Options{}
	if err := o.complete(); err != nil || o.ServiceCIDR.String() != "10.100.0.0/16" {
		t.Errorf("default service range %s (%v), want 10.100.0.0/16", o.ServiceCIDR, err)
	}
}
