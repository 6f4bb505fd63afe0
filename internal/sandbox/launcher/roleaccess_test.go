package launcher

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/csr"
	"github.com/nodejoin/nodejoin/internal/nodegroup"
)

// Issue 25: the sandbox mapped the role of any Auto Scaling group's instances to a node
// access entry, so any group with any role (a bastion's, a CloudFormation stack's) made
// its instances nodes. Only a NodeGroup's own group (nodejoin's or the local EKS's) is
// owned now; a group merely named in a NodeGroup's status, or any other, is not.
func TestOnlyNodeGroupsOwnAutoScalingGroups(t *testing.T) {
	s := runtime.NewScheme()
	if err := nodejoinv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	ng := &nodejoinv1alpha1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "workers", UID: types.UID("5f0c-uid")}}
	ng.Status.AutoScalingGroupName = "cfn-stack-NodeGroup-ABC" // a status pointed elsewhere
	dyn := dynamicfake.NewSimpleDynamicClient(s, ng)
	owned, _ := nodegroup.ResourceNames(ng)
	for _, tt := range []struct{ group, want string }{
		{owned, "workers"},
		{"cfn-stack-NodeGroup-ABC", ""},
		{"eksctl-c-nodegroup-ng-1-NodeGroup-XYZ", ""},
		{"bastion", ""},
		{"eks-workers-other-uid", ""},
	} {
		got, err := nodeGroupOwning(t.Context(), dyn, tt.group)
		if err != nil || got != tt.want {
			t.Errorf("nodeGroupOwning(%q) = %q, %v; want %q", tt.group, got, err, tt.want)
		}
	}
}

// The instances Run launches are tagged for their node group and the cluster, the
// tags the CSR policy reads for a bootstrap token's instance.
func TestRunInstancesAreTaggedForTheirGroup(t *testing.T) {
	tags := nodeTags("demo")
	if tags[csr.NodeGroupTag] != LocalNodeGroup || tags[csr.ClusterTagPrefix+"demo"] != "owned" || len(tags) != 2 {
		t.Errorf("nodeTags = %v", tags)
	}
}
