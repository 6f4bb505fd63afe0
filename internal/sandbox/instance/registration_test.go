package instance

import (
	"context"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/localaws"
	"github.com/nodejoin/nodejoin/internal/nodegroup/userdata"
)

func simProvider(t *testing.T) *Provider {
	t.Helper()
	p, err := New(Config{Cluster: testCluster, HostEndpoint: "https://127.0.0.1:6443", Dir: t.TempDir(),
		Cloud:    &localaws.Cloud{AccountID: "000000000000", EC2: localaws.NewEC2("000000000000")},
		NodeCIDR: netip.MustParsePrefix("198.18.0.0/24"), Gateway: netip.MustParseAddr("198.18.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startSimNode launches a simulated instance with userData and returns what its
// simulated kubelet is started with.
func startSimNode(t *testing.T, p *Provider, spec Spec) (SimNode, error) {
	t.Helper()
	spec.Kubelet = KubeletSim
	inst, err := p.Start(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Terminate(context.Background(), inst) })
	got := make(chan SimNode, 1)
	err = inst.Init(t.Context(), func(_ context.Context, n SimNode) error {
		got <- n
		return nil
	})
	if err != nil {
		return SimNode{}, err
	}
	select {
	case n := <-got:
		return n, nil
	case <-time.After(time.Minute): // a bound against hanging
		t.Fatal("the simulated kubelet never started")
	}
	return SimNode{}, nil
}

// A simulated kubelet registers its Node with the labels and taints the instance's
// user data gives the real kubelet, whichever family and style wrote it: EKS managed
// node groups' AL2023 NodeConfig and AL2 bootstrap.sh flags, eksctl's AL2 cloud-config
// and Bottlerocket TOML, all rendered as the NodeGroup controller renders them.
func TestSimulatedNodeTakesLabelsAndTaintsFromUserData(t *testing.T) {
	p := simProvider(t)
	cluster := userdata.Cluster{Name: testCluster.Name, Endpoint: testCluster.Endpoint, CertificateAuthority: testCluster.CAPEM, ServiceCIDR: testCluster.ServiceCIDR.String()}
	taints := []corev1.Taint{
		{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
		{Key: "example.com/spot", Effect: corev1.TaintEffectPreferNoSchedule},
	}
	for _, tc := range []struct {
		family     nodejoinv1alpha1.AMIFamily
		style      userdata.Style
		wantLabels map[string]string
	}{
		{nodejoinv1alpha1.AMIFamilyAmazonLinux2023, userdata.Managed, map[string]string{
			"eks.amazonaws.com/nodegroup": "workers", "eks.amazonaws.com/capacityType": "SPOT", "eks.amazonaws.com/nodegroup-image": "ami-0123456789abcdef0",
			"eks.amazonaws.com/sourceLaunchTemplateId": "lt-0123456789abcdef0", "eks.amazonaws.com/sourceLaunchTemplateVersion": "3", "team": "blue"}},
		{nodejoinv1alpha1.AMIFamilyAmazonLinux2, userdata.Managed, map[string]string{
			"eks.amazonaws.com/nodegroup": "workers", "eks.amazonaws.com/capacityType": "SPOT", "eks.amazonaws.com/nodegroup-image": "ami-0123456789abcdef0",
			"eks.amazonaws.com/sourceLaunchTemplateId": "lt-0123456789abcdef0", "eks.amazonaws.com/sourceLaunchTemplateVersion": "3", "team": "blue"}},
		{nodejoinv1alpha1.AMIFamilyAmazonLinux2, userdata.SelfManaged, map[string]string{"team": "blue"}},
		{nodejoinv1alpha1.AMIFamilyAmazonLinux2023, userdata.SelfManaged, map[string]string{"team": "blue"}},
		{nodejoinv1alpha1.AMIFamilyBottlerocket, userdata.Managed, map[string]string{
			"eks.amazonaws.com/nodegroup": "workers", "eks.amazonaws.com/capacityType": "SPOT", "eks.amazonaws.com/nodegroup-image": "ami-0123456789abcdef0",
			"eks.amazonaws.com/sourceLaunchTemplateId": "lt-0123456789abcdef0", "eks.amazonaws.com/sourceLaunchTemplateVersion": "3", "team": "blue"}},
		{nodejoinv1alpha1.AMIFamilyBottlerocket, userdata.SelfManaged, map[string]string{"team": "blue"}},
	} {
		t.Run(string(tc.family)+"/"+string(tc.style), func(t *testing.T) {
			data, err := userdata.Render(cluster, userdata.Template{Family: tc.family, Style: tc.style, NodeGroupName: "workers",
				InstanceType: "m5.large", CapacityType: "SPOT", Labels: map[string]string{"team": "blue"}, Taints: taints,
				ReleaseAMI: "ami-0123456789abcdef0", LaunchTemplateID: "lt-0123456789abcdef0", LaunchTemplateVersion: "3"})
			if err != nil {
				t.Fatal(err)
			}
			n, err := startSimNode(t, p, Spec{UserData: data, AMIFamily: tc.family})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(n.Labels, tc.wantLabels) {
				t.Errorf("labels = %v\nwant     %v", n.Labels, tc.wantLabels)
			}
			if !reflect.DeepEqual(n.Taints, taints) {
				t.Errorf("taints = %v, want %v", n.Taints, taints)
			}
		})
	}
}

// The default user data of `nodejoin add node` carries neither; --kubelet-arg flags
// apply after it as through a real instance's local NodeConfig; and user data whose
// labels the kubelet refuses fails the start, naming the label, as the kubelet would
// refuse to start.
func TestSimulatedNodeLocalFlagsAndRefusedLabels(t *testing.T) {
	p := simProvider(t)
	n, err := startSimNode(t, p, Spec{AMIFamily: nodejoinv1alpha1.AMIFamilyAmazonLinux2})
	if err != nil || len(n.Labels) != 0 || len(n.Taints) != 0 {
		t.Errorf("default user data: labels %v, taints %v, %v", n.Labels, n.Taints, err)
	}
	n, err = startSimNode(t, p, Spec{AMIFamily: nodejoinv1alpha1.AMIFamilyBottlerocket, KubeletFlags: []string{"--node-labels=team=docs", "--register-with-taints=a=b:NoExecute"}})
	if want := map[string]string{"team": "docs"}; err != nil || !reflect.DeepEqual(n.Labels, want) ||
		!reflect.DeepEqual(n.Taints, []corev1.Taint{{Key: "a", Value: "b", Effect: corev1.TaintEffectNoExecute}}) {
		t.Errorf("--kubelet-arg: labels %v, taints %v, %v", n.Labels, n.Taints, err)
	}
	_, err = startSimNode(t, p, Spec{AMIFamily: nodejoinv1alpha1.AMIFamilyAmazonLinux2023, KubeletFlags: []string{"--node-labels=node-role.kubernetes.io/worker="}})
	if err == nil || !strings.Contains(err.Error(), "node-role.kubernetes.io/worker") {
		t.Errorf("a label the kubelet refuses: %v", err)
	}
}
