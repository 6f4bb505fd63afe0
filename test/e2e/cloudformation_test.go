package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
)

// repoFile is a file of the repository, by its path from the root.
func repoFile(t *testing.T, rel string) string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(here), "..", "..", rel)
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// stackStatus is a stack's status and reason, as the AWS CLI describes it.
func stackStatus(a *awsTools, name string) (string, string) {
	var out struct {
		Stacks []struct{ StackStatus, StackStatusReason string }
	}
	a.awsJSON(&out, "cloudformation", "describe-stacks", "--stack-name", name)
	return out.Stacks[0].StackStatus, out.Stacks[0].StackStatusReason
}

// stackEvents are a stack's events, oldest first, as "logical status reason" lines.
func stackEvents(a *awsTools, name string) []string {
	var out struct {
		StackEvents []struct{ LogicalResourceID, ResourceStatus, ResourceStatusReason string }
	}
	a.awsJSON(&out, "cloudformation", "describe-stack-events", "--stack-name", name)
	var lines []string
	for _, e := range slices.Backward(out.StackEvents) {
		lines = append(lines, strings.TrimSpace(e.LogicalResourceID+" "+e.ResourceStatus+" "+e.ResourceStatusReason))
	}
	return lines
}

// The AWS CLI's CloudFormation and eksctl make node groups of real kubelets on a local
// cluster: nodejoin's own template, whose stack completes only once its nodes signal
// that they joined, rolls to a new AMI in batches that wait for the new nodes' signals,
// and goes without leaving an instance, a Node or a launch template; a stack whose user
// data cannot join fails with the node's own reason and rolls back; AWS's self-managed
// template, in its AL2 and AL2023 shapes, makes nodes that join; eksctl creates, lists, scales, upgrades
// and deletes a managed AL2023 group and a self-managed one.
func TestCloudFormationAndEksctlNodeGroups(t *testing.T) {
	name := "e2e-cfn"
	c, kubeconfig, _ := upCluster(t, name, "--nodes", "0", "--nodegroup-kubelet", "real")
	a := newAWSTools(t, c, name)
	settled := func(stack string) func() (bool, string) {
		return func() (bool, string) {
			s, reason := stackStatus(a, stack)
			return !strings.HasSuffix(s, "_IN_PROGRESS"), s + " " + reason
		}
	}
	nodeCount := func(n int) func() (bool, string) {
		return func() (bool, string) {
			ready := c.readyNodes(kubeconfig)
			all := strings.Fields(c.kubectl(kubeconfig, "get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"))
			return len(ready) == n && len(all) == n, fmt.Sprintf("%d Ready of %v", len(ready), all)
		}
	}
	var cluster struct {
		Cluster struct {
			Version                 string
			Endpoint                string
			CertificateAuthority    struct{ Data string }
			KubernetesNetworkConfig struct{ ServiceIpv4Cidr string }
			ResourcesVpcConfig      struct {
				SubnetIDs []string `json:"subnetIds"`
				VpcID     string   `json:"vpcId"`
				SGs       []string `json:"securityGroupIds"`
			}
		}
	}
	a.awsJSON(&cluster, "eks", "describe-cluster", "--name", name)
	vpc := cluster.Cluster.ResourcesVpcConfig
	subnets := strings.Join(vpc.SubnetIDs, `\,`)
	ssm := "/aws/service/eks/optimized-ami/" + cluster.Cluster.Version + "/amazon-linux-2023/x86_64/standard/recommended/image_id"
	ours := repoFile(t, "deploy/cloudformation/nodegroup.yaml")
	params := func(kv ...string) []string {
		out := []string{"--parameters"}
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, "ParameterKey="+kv[i]+",ParameterValue="+kv[i+1])
		}
		return out
	}

	// nodejoin's template: CREATE_COMPLETE only after the node's signal.
	a.aws("cloudformation", "validate-template", "--template-body", "file://"+ours)
	a.aws(append([]string{"cloudformation", "create-stack", "--stack-name", "ours", "--template-body", "file://" + ours, "--capabilities", "CAPABILITY_IAM"},
		params("ClusterName", name, "NodeGroupName", "ours", "NodeAutoScalingGroupDesiredCapacity", "1", "NodeAutoScalingGroupMaxSize", "3",
			"NodeImageIdSSMParam", ssm, "VpcId", vpc.VpcID, "Subnets", subnets, "NodeSignalTimeout", "PT4M")...)...)
	c.poll(kubeconfig, "stack ours settled", 5*time.Minute, settled("ours"))
	if s, reason := stackStatus(a, "ours"); s != "CREATE_COMPLETE" {
		t.Fatalf("stack ours: %s %s\n%s", s, reason, strings.Join(stackEvents(a, "ours"), "\n"))
	}
	events := strings.Join(stackEvents(a, "ours"), "\n")
	if !strings.Contains(events, "NodeGroup CREATE_IN_PROGRESS Received SUCCESS signal with UniqueId i-") {
		t.Errorf("no signal in the stack's events:\n%s", events)
	}
	if n := c.readyNodes(kubeconfig); len(n) != 1 {
		t.Fatalf("after CREATE_COMPLETE: Ready nodes %v, want 1", n)
	}

	// update-stack: two nodes on an older AMI, rolled in batches that wait for signals.
	latest := strings.TrimSpace(a.aws("ssm", "get-parameter", "--name",
		"/aws/service/eks/optimized-ami/"+cluster.Cluster.Version+"/amazon-linux-2023/x86_64/standard/recommended/release_version",
		"--query", "Parameter.Value", "--output", "text"))
	older := olderRelease(t, a, cluster.Cluster.Version, latest)
	var images struct {
		Images []struct{ ImageID, Name string }
	}
	a.awsJSON(&images, "ec2", "describe-images", "--owners", "amazon", "--filters", "Name=name,Values=amazon-eks-node-al2023-x86_64-standard-"+cluster.Cluster.Version+"-v"+older[strings.LastIndex(older, "-")+1:])
	if len(images.Images) != 1 {
		t.Fatalf("the image of release %s: %+v", older, images.Images)
	}
	ami := images.Images[0].ImageID
	prev := func(keys ...string) []string {
		var out []string
		for _, k := range keys {
			out = append(out, "ParameterKey="+k+",UsePreviousValue=true")
		}
		return out
	}
	a.aws(append(append([]string{"cloudformation", "update-stack", "--stack-name", "ours", "--use-previous-template", "--capabilities", "CAPABILITY_IAM"},
		params("NodeAutoScalingGroupDesiredCapacity", "2", "NodeImageId", ami)...),
		prev("ClusterName", "NodeGroupName", "NodeAutoScalingGroupMaxSize", "NodeImageIdSSMParam", "VpcId", "Subnets", "NodeSignalTimeout")...)...)
	c.poll(kubeconfig, "stack ours updated", 6*time.Minute, settled("ours"))
	if s, reason := stackStatus(a, "ours"); s != "UPDATE_COMPLETE" {
		t.Fatalf("stack ours: %s %s\n%s", s, reason, strings.Join(stackEvents(a, "ours"), "\n"))
	}
	events = strings.Join(stackEvents(a, "ours"), "\n")
	for _, want := range []string{"NodeGroup UPDATE_IN_PROGRESS Rolling update initiated.", "NodeGroup UPDATE_IN_PROGRESS Received SUCCESS signal", "Successfully terminated instance(s)"} {
		if !strings.Contains(events, want) {
			t.Errorf("no %q in the update's events:\n%s", want, events)
		}
	}
	var running struct {
		Reservations []struct {
			Instances []struct {
				ImageID string `json:"ImageId"`
			}
		}
	}
	a.awsJSON(&running, "ec2", "describe-instances", "--filters", "Name=tag:aws:cloudformation:stack-name,Values=ours", "Name=instance-state-name,Values=running")
	var amis []string
	for _, r := range running.Reservations {
		for _, in := range r.Instances {
			amis = append(amis, in.ImageID)
		}
	}
	if len(amis) != 2 || amis[0] != ami || amis[1] != ami {
		t.Errorf("the stack's running instances boot %v, want two of %s", amis, ami)
	}
	c.poll(kubeconfig, "2 nodes, the replaced one gone", 3*time.Minute, nodeCount(2))

	// A stack whose nodes cannot join fails with their own reason and rolls back.
	body, err := os.ReadFile(ours)
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(body), "                    name: ${ClusterName}\n",
		"                    name: ${ClusterName}\n                  kubelet:\n                    config:\n                      maxPods: many\n", 1)
	brokenFile := filepath.Join(t.TempDir(), "broken.yaml")
	if broken == string(body) || os.WriteFile(brokenFile, []byte(broken), 0o600) != nil { //nolint:gosec // G703: a file under t.TempDir()
		t.Fatal("could not break the template's user data")
	}
	a.aws(append([]string{"cloudformation", "create-stack", "--stack-name", "broken", "--template-body", "file://" + brokenFile, "--capabilities", "CAPABILITY_IAM"},
		params("ClusterName", name, "NodeGroupName", "broken", "NodeAutoScalingGroupDesiredCapacity", "1",
			"NodeImageIdSSMParam", ssm, "VpcId", vpc.VpcID, "Subnets", subnets, "NodeSignalTimeout", "PT4M")...)...)
	c.poll(kubeconfig, "stack broken settled", 5*time.Minute, settled("broken"))
	if s, _ := stackStatus(a, "broken"); s != "ROLLBACK_COMPLETE" {
		t.Errorf("stack broken: %s", s)
	}
	events = strings.Join(stackEvents(a, "broken"), "\n")
	if !strings.Contains(events, "NodeGroup CREATE_FAILED Received FAILURE signal with UniqueId i-") || !strings.Contains(events, "maxPods") {
		t.Errorf("the failure's event does not give the node's reason:\n%s", events)
	}

	// delete-stack leaves no instance, no Node and no launch template.
	a.aws("cloudformation", "delete-stack", "--stack-name", "ours")
	c.poll(kubeconfig, "stack ours deleted", 4*time.Minute, func() (bool, string) {
		var out struct {
			StackSummaries []struct{ StackName, StackStatus string }
		}
		a.awsJSON(&out, "cloudformation", "list-stacks")
		for _, s := range out.StackSummaries {
			if s.StackName == "ours" && s.StackStatus != "DELETE_COMPLETE" {
				return false, s.StackStatus
			}
		}
		return true, ""
	})
	c.poll(kubeconfig, "no Node left", 3*time.Minute, nodeCount(0))
	var lts struct {
		LaunchTemplates []struct{ LaunchTemplateName string }
	}
	a.awsJSON(&lts, "ec2", "describe-launch-templates")
	if len(lts.LaunchTemplates) != 0 {
		t.Errorf("launch templates left: %+v", lts.LaunchTemplates)
	}
	a.awsJSON(&running, "ec2", "describe-instances", "--filters", "Name=instance-state-name,Values=pending,running")
	if len(running.Reservations) != 0 {
		t.Errorf("instances left running: %+v", running.Reservations)
	}

	// AWS's self-managed template in both shapes, side by side: AL2 (bootstrap.sh, then its
	// cfn-signal line) and AL2023 (a MIME NodeConfig with the endpoint, CA and service range
	// from describe-cluster, a cfn-signal script part, an EC2_LINUX access entry).
	al2 := repoFile(t, "internal/localaws/cloudformation/template/testdata/amazon-eks-nodegroup.yaml")
	al2023 := repoFile(t, "internal/localaws/cloudformation/template/testdata/amazon-eks-nodegroup-al2023.yaml")
	common := []string{"ClusterName", name, "ClusterControlPlaneSecurityGroup", vpc.SGs[0], "NodeAutoScalingGroupDesiredCapacity", "1",
		"NodeInstanceType", "m5.large", "VpcId", vpc.VpcID, "Subnets", subnets}
	a.aws(append([]string{"cloudformation", "create-stack", "--stack-name", "aws-al2", "--template-body", "file://" + al2, "--capabilities", "CAPABILITY_IAM"},
		params(append(common, "NodeGroupName", "aws-al2",
			"NodeImageIdSSMParam", "/aws/service/eks/optimized-ami/"+cluster.Cluster.Version+"/amazon-linux-2/recommended/image_id")...)...)...)
	a.aws(append([]string{"cloudformation", "create-stack", "--stack-name", "aws-al2023", "--template-body", "file://" + al2023, "--capabilities", "CAPABILITY_IAM"},
		params(append(common, "NodeGroupName", "aws-al2023", "NodeImageIdSSMParam", ssm,
			"ApiServerEndpoint", cluster.Cluster.Endpoint, "CertificateAuthorityData", cluster.Cluster.CertificateAuthority.Data,
			"ServiceCidr", cluster.Cluster.KubernetesNetworkConfig.ServiceIpv4Cidr)...)...)...)
	for _, stack := range []string{"aws-al2", "aws-al2023"} {
		c.poll(kubeconfig, "stack "+stack+" settled", 3*time.Minute, settled(stack))
		if s, reason := stackStatus(a, stack); s != "CREATE_COMPLETE" {
			t.Fatalf("stack %s: %s %s\n%s", stack, s, reason, strings.Join(stackEvents(a, stack), "\n"))
		}
	}
	nodeInstanceRole := func(stack string) string {
		var outs struct {
			Stacks []struct {
				Outputs []struct{ OutputKey, OutputValue string }
			}
		}
		a.awsJSON(&outs, "cloudformation", "describe-stacks", "--stack-name", stack)
		for _, o := range outs.Stacks[0].Outputs {
			if o.OutputKey == "NodeInstanceRole" {
				return o.OutputValue
			}
		}
		t.Fatalf("stack %s has no NodeInstanceRole output", stack)
		return ""
	}
	// The AL2 template makes no access entry (its users add an aws-auth mapping or an
	// access entry by hand), and the sandbox maps no role it was not asked to: its
	// node joins once the role is mapped, as on EKS.
	// The pinned AWS CLI (2.9) predates access entries; the SDK makes and reads them.
	eksc := a.eksClient()
	if _, err := eksc.CreateAccessEntry(t.Context(), &eks.CreateAccessEntryInput{ClusterName: aws.String(name), PrincipalArn: aws.String(nodeInstanceRole("aws-al2")), Type: aws.String("EC2_LINUX")}); err != nil {
		t.Fatalf("CreateAccessEntry for the AL2 stack's role: %v", err)
	}
	c.poll(kubeconfig, "the AL2 and AL2023 nodes Ready", 3*time.Minute, nodeCount(2))
	role := nodeInstanceRole("aws-al2023")
	entry, err := eksc.DescribeAccessEntry(t.Context(), &eks.DescribeAccessEntryInput{ClusterName: aws.String(name), PrincipalArn: aws.String(role)})
	if err != nil || aws.ToString(entry.AccessEntry.Type) != "EC2_LINUX" {
		t.Errorf("the AL2023 stack's role %q: access entry %+v, %v; want type EC2_LINUX", role, entry, err)
	}
	a.aws("cloudformation", "delete-stack", "--stack-name", "aws-al2")
	a.aws("cloudformation", "delete-stack", "--stack-name", "aws-al2023")
	c.poll(kubeconfig, "the AL2 and AL2023 nodes gone", 4*time.Minute, nodeCount(0))

	// eksctl: a managed AL2023 group on an older release, and a self-managed one.
	cfg := fmt.Sprintf(`apiVersion: eksctl.io/v1alpha5
kind: ClusterConfig
metadata: {name: %s, region: us-west-2}
vpc:
  id: %s
  securityGroup: %s
  subnets:
    private:
      us-west-2a: {id: %s}
      us-west-2b: {id: %s}
managedNodeGroups:
  - name: mng
    amiFamily: AmazonLinux2023
    instanceType: m5.large
    desiredCapacity: 1
    privateNetworking: true
    releaseVersion: "%s"
    # The user's own NodeConfig in eksctl's launch template, merged with EKS's by nodeadm.
    overrideBootstrapCommand: |
      apiVersion: node.eks.aws/v1alpha1
      kind: NodeConfig
      spec:
        kubelet:
          flags: ["--node-labels=override=from-launch-template"]
nodeGroups:
  - {name: self, amiFamily: AmazonLinux2023, instanceType: m5.large, desiredCapacity: 1, privateNetworking: true}
`, name, vpc.VpcID, vpc.SGs[0], vpc.SubnetIDs[0], vpc.SubnetIDs[1], older)
	cfgFile := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	a.eksctlRun("create", "nodegroup", "-f", cfgFile)
	c.poll(kubeconfig, "the two eksctl nodes Ready", 3*time.Minute, nodeCount(2))
	if got := strings.Fields(c.kubectl(kubeconfig, "get", "nodes", "-l", "override=from-launch-template,eks.amazonaws.com/nodegroup=mng", "-o", "name")); len(got) != 1 {
		t.Errorf("the managed group's node lacks the label of its launch template's NodeConfig (overrideBootstrapCommand): %v\n%s", got, c.kubectl(kubeconfig, "get", "nodes", "--show-labels"))
	}
	out := a.eksctlRun("get", "ng", "--cluster", name)
	for _, want := range []string{"mng", "self", "managed", "unmanaged"} {
		if !strings.Contains(out, want) {
			t.Errorf("eksctl get ng lacks %q:\n%s", want, out)
		}
	}
	a.eksctlRun("scale", "ng", "--cluster", name, "--name", "mng", "--nodes", "2", "--nodes-max", "3", "--wait")
	c.poll(kubeconfig, "3 nodes after eksctl scale", 3*time.Minute, nodeCount(3))
	c.kubectl(kubeconfig, "patch", "nodegroup", "mng", "--type", "merge", "-p", `{"spec":{"timeouts":{"postDrainWait":"1s"}}}`)
	a.eksctlRun("upgrade", "nodegroup", "--cluster", name, "--name", "mng", "--wait")
	var ng struct {
		Nodegroup struct{ ReleaseVersion, Status string }
	}
	a.awsJSON(&ng, "eks", "describe-nodegroup", "--cluster-name", name, "--nodegroup-name", "mng")
	if ng.Nodegroup.ReleaseVersion == older || ng.Nodegroup.Status != "ACTIVE" {
		t.Errorf("after eksctl upgrade nodegroup: %+v (was %s)", ng.Nodegroup, older)
	}
	c.poll(kubeconfig, "3 nodes after the upgrade", 4*time.Minute, nodeCount(3))
	a.eksctlRun("delete", "nodegroup", "--cluster", name, "--name", "mng", "--wait")
	a.eksctlRun("delete", "nodegroup", "--cluster", name, "--name", "self", "--wait")
	c.poll(kubeconfig, "no node after eksctl delete", 4*time.Minute, nodeCount(0))
}
