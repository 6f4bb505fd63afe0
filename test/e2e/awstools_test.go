package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eks"

	"github.com/nodejoin/nodejoin/internal/testenv"
)

// debianAWS is Debian's awscli (2.9), which `make deps` installs. It is named by path:
// another `aws` earlier in PATH (a pip-installed version 1, say) would be another client.
const debianAWS = "/usr/bin/aws"

// awsTools runs the real AWS CLI and eksctl against a local cluster's AWS endpoint, with
// the environment `nodejoin aws-env` prints and nothing of the host's AWS configuration.
type awsTools struct {
	t        *testing.T
	env      []string
	endpoint string
	eksctl   string
}

func newAWSTools(t *testing.T, c *cli, cluster string) *awsTools {
	t.Helper()
	if _, err := os.Stat(debianAWS); err != nil {
		t.Fatalf("the AWS CLI %s is missing: run `make deps` (as root)", debianAWS)
	}
	vars := map[string]string{}
	c.runJSON(false, &vars, "aws-env", "--name", cluster, "-o", "json")
	a := &awsTools{t: t, endpoint: vars["AWS_ENDPOINT_URL"], eksctl: filepath.Join(testenv.BinDir(t, "eksctl"), "eksctl")}
	if a.endpoint == "" {
		t.Fatalf("aws-env printed no AWS_ENDPOINT_URL: %v", vars)
	}
	home := t.TempDir()
	a.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "KUBECONFIG=" + filepath.Join(home, "kubeconfig")}
	for k, v := range vars {
		a.env = append(a.env, k+"="+v)
	}
	return a
}

func (a *awsTools) command(name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(a.t.Context(), name, args...)
	cmd.Env = a.env
	return cmd
}

// aws runs the AWS CLI with --endpoint-url (2.9 reads no endpoint from the environment)
// and returns its standard output.
func (a *awsTools) aws(args ...string) string {
	a.t.Helper()
	out, err := a.awsErr(args...)
	if err != nil {
		a.t.Fatalf("aws %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (a *awsTools) awsErr(args ...string) (string, error) {
	cmd := a.command(debianAWS, append([]string{"--endpoint-url", a.endpoint, "--output", "json"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out) + stderr.String(), err
	}
	return string(out), nil
}

func (a *awsTools) awsJSON(v any, args ...string) {
	a.t.Helper()
	out := a.aws(args...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		a.t.Fatalf("aws %s: decoding %q: %v", strings.Join(args, " "), out, err)
	}
}

// eksClient is aws-sdk-go-v2's EKS client, configured from the same environment.
func (a *awsTools) eksClient() *eks.Client {
	a.t.Helper()
	vars := map[string]string{}
	for _, kv := range a.env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	pem, err := os.ReadFile(vars["AWS_CA_BUNDLE"])
	if err != nil {
		a.t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	return eks.New(eks.Options{
		Region: vars["AWS_REGION"], BaseEndpoint: aws.String(a.endpoint), HTTPClient: &http.Client{Transport: tr, Timeout: 30 * time.Second},
		Credentials: credentials.NewStaticCredentialsProvider(vars["AWS_ACCESS_KEY_ID"], vars["AWS_SECRET_ACCESS_KEY"], ""),
	})
}

// eksctlRun runs eksctl, which finds the endpoint in its own variables.
func (a *awsTools) eksctlRun(args ...string) string {
	a.t.Helper()
	out, err := a.command(a.eksctl, args...).CombinedOutput()
	if err != nil {
		a.t.Fatalf("eksctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// The seeds' commands, typed as the seeds type them apart from the endpoint, drive a
// local cluster of real kubelets: the AWS CLI creates a managed node group through
// EKS, eksctl lists and scales it, EC2 shows each instance's user data, EKS upgrades
// the group to a newer AMI release with describe-update following the managed
// upgrade, an Auto Scaling change behind the node group's back is put back, and a
// self-managed group whose user data names only the cluster joins through
// DescribeCluster.
func TestAWSToolsDriveALocalCluster(t *testing.T) {
	name := "e2e-awstools"
	c, kubeconfig, _ := upCluster(t, name, "--nodes", "0", "--nodegroup-kubelet", "real")
	a := newAWSTools(t, c, name)

	// Who am I: the cluster's local administrator.
	var caller struct{ Arn, Account string }
	a.awsJSON(&caller, "sts", "get-caller-identity")
	if !strings.HasSuffix(caller.Arn, ":user/nodejoin-admin") {
		t.Errorf("get-caller-identity: %+v", caller)
	}

	// describe-cluster: what bootstrap.sh asks for, and what eksctl needs.
	var cluster struct {
		Cluster struct {
			Name, Endpoint, Version, Status string
			CertificateAuthority            struct{ Data string }
			ResourcesVpcConfig              struct {
				SubnetIDs []string `json:"subnetIds"`
				VpcID     string   `json:"vpcId"`
			}
		}
	}
	a.awsJSON(&cluster, "eks", "describe-cluster", "--name", name)
	if cluster.Cluster.Status != "ACTIVE" || cluster.Cluster.Endpoint == "" || cluster.Cluster.CertificateAuthority.Data == "" || len(cluster.Cluster.ResourcesVpcConfig.SubnetIDs) < 2 {
		t.Fatalf("describe-cluster: %+v", cluster.Cluster)
	}

	// The oldest and newest AMI releases EKS offers for the cluster's version, as
	// eksctl resolves them: through SSM's public parameters.
	latest := strings.TrimSpace(a.aws("ssm", "get-parameter", "--name",
		"/aws/service/eks/optimized-ami/"+cluster.Cluster.Version+"/amazon-linux-2023/x86_64/standard/recommended/release_version",
		"--query", "Parameter.Value", "--output", "text"))
	if latest == "" {
		t.Fatal("SSM has no recommended AL2023 release")
	}

	// A managed node group through EKS, on an older release than the latest.
	var images struct {
		Images []struct{ Name, ImageID string }
	}
	a.awsJSON(&images, "ec2", "describe-images", "--owners", "amazon", "--filters", "Name=name,Values=amazon-eks-node-al2023-x86_64-standard-"+cluster.Cluster.Version+"-*")
	if len(images.Images) < 2 {
		t.Fatalf("describe-images: %d AL2023 images, want at least 2", len(images.Images))
	}
	older := olderRelease(t, a, cluster.Cluster.Version, latest)
	a.aws("eks", "create-nodegroup", "--cluster-name", name, "--nodegroup-name", "ng1-public-ssh",
		"--scaling-config", "minSize=0,maxSize=10,desiredSize=1", "--subnets", cluster.Cluster.ResourcesVpcConfig.SubnetIDs[0], cluster.Cluster.ResourcesVpcConfig.SubnetIDs[1],
		"--node-role", "arn:aws:iam::"+caller.Account+":role/nodejoin-"+name+"-node", "--ami-type", "AL2023_x86_64_STANDARD",
		"--release-version", older, "--labels", "tier=aws-tools")
	describe := func() nodegroupJSON {
		var out struct{ Nodegroup nodegroupJSON }
		a.awsJSON(&out, "eks", "describe-nodegroup", "--cluster-name", name, "--nodegroup-name", "ng1-public-ssh")
		return out.Nodegroup
	}
	c.poll(kubeconfig, "ng1-public-ssh ACTIVE with 1 Ready node", 3*time.Minute, func() (bool, string) {
		ng := describe()
		return ng.Status == "ACTIVE" && len(c.readyNodes(kubeconfig)) == 1, fmt.Sprintf("%+v", ng)
	})
	// Rolling nodes here wait a second, not EKS's minute, after each drain: a
	// NodeGroup setting the EKS API does not have.
	c.kubectl(kubeconfig, "patch", "nodegroup", "ng1-public-ssh", "--type", "merge", "-p", `{"spec":{"timeouts":{"postDrainWait":"1s"}}}`)
	ng := describe()
	if ng.ReleaseVersion != older || ng.AmiType != "AL2023_x86_64_STANDARD" || ng.Labels["tier"] != "aws-tools" || len(ng.Subnets) != 2 ||
		len(ng.Resources.AutoScalingGroups) != 1 || !strings.HasPrefix(ng.CreatedAt, "20") {
		t.Errorf("describe-nodegroup: %+v", ng)
	}

	// eksctl get ng, and eksctl scale ng as seed 000 types it.
	out := a.eksctlRun("get", "ng", "--cluster="+name)
	if !strings.Contains(out, "ng1-public-ssh") || !strings.Contains(out, "ACTIVE") {
		t.Errorf("eksctl get ng:\n%s", out)
	}
	a.eksctlRun("scale", "ng", "--nodes=2", "--nodes-max=10", "--name=ng1-public-ssh", "--cluster="+name, "--wait")
	c.poll(kubeconfig, "2 Ready nodes after eksctl scale", 3*time.Minute, func() (bool, string) {
		n := c.readyNodes(kubeconfig)
		return len(n) == 2, fmt.Sprint(n)
	})
	if got := c.getNodeGroup(name, "ng1-public-ssh").Spec.Scaling.DesiredSize; got == nil || *got != 2 {
		t.Errorf("NodeGroup desiredSize after eksctl scale = %v, want 2", got)
	}

	// Each instance's user data, as seed 000 reads it (jq -r .UserData.Value | base64 -d).
	var reservations struct {
		Reservations []struct {
			Instances []struct {
				InstanceID string `json:"InstanceId"`
			}
		}
	}
	a.awsJSON(&reservations, "ec2", "describe-instances", "--filters", "Name=tag:eks:nodegroup-name,Values=ng1-public-ssh", "Name=instance-state-name,Values=running")
	var ids []string
	for _, r := range reservations.Reservations {
		for _, in := range r.Instances {
			ids = append(ids, in.InstanceID)
		}
	}
	if len(ids) != 2 {
		t.Fatalf("describe-instances tag:eks:nodegroup-name=ng1-public-ssh: %v", ids)
	}
	var attr struct{ UserData struct{ Value string } }
	a.awsJSON(&attr, "ec2", "describe-instance-attribute", "--instance-id", ids[0], "--attribute", "userData")
	ud, err := base64.StdEncoding.DecodeString(attr.UserData.Value)
	if err != nil || !strings.Contains(string(ud), "node.eks.aws") {
		t.Errorf("user data of %s: %v\n%s", ids[0], err, ud)
	}

	// Auto Scaling changed behind the node group's back: the node group owns the size.
	asg := ng.Resources.AutoScalingGroups[0].Name
	a.aws("autoscaling", "set-desired-capacity", "--auto-scaling-group-name", asg, "--desired-capacity", "3")
	c.poll(kubeconfig, "the Auto Scaling group back at the node group's size", 2*time.Minute, func() (bool, string) {
		var groups struct {
			AutoScalingGroups []struct{ DesiredCapacity int }
		}
		a.awsJSON(&groups, "autoscaling", "describe-auto-scaling-groups", "--auto-scaling-group-names", asg)
		return len(groups.AutoScalingGroups) == 1 && groups.AutoScalingGroups[0].DesiredCapacity == 2, fmt.Sprintf("%+v", groups)
	})

	// A managed upgrade to the latest release, followed through describe-update.
	var upd struct {
		Update struct{ ID, Status, Type string }
	}
	a.awsJSON(&upd, "eks", "update-nodegroup-version", "--cluster-name", name, "--nodegroup-name", "ng1-public-ssh", "--release-version", latest)
	if upd.Update.Type != "VersionUpdate" || upd.Update.ID == "" {
		t.Fatalf("update-nodegroup-version: %+v", upd.Update)
	}
	c.poll(kubeconfig, "the version update Successful", 6*time.Minute, func() (bool, string) {
		var d struct{ Update struct{ Status string } }
		a.awsJSON(&d, "eks", "describe-update", "--name", name, "--nodegroup-name", "ng1-public-ssh", "--update-id", upd.Update.ID)
		if d.Update.Status == "Failed" || d.Update.Status == "Cancelled" {
			t.Fatalf("update %s: %s", upd.Update.ID, a.aws("eks", "describe-update", "--name", name, "--nodegroup-name", "ng1-public-ssh", "--update-id", upd.Update.ID))
		}
		return d.Update.Status == "Successful", d.Update.Status
	})
	// The group's health follows its nodes: a replaced node's Node may still be going
	// for a few seconds after the update is Successful.
	c.poll(kubeconfig, "the group ACTIVE on the latest release", time.Minute, func() (bool, string) {
		ng := describe()
		return ng.ReleaseVersion == latest && ng.Status == "ACTIVE", fmt.Sprintf("%+v", ng)
	})
	// nodejoin's own describe is the same view of the same object.
	var own struct {
		Nodegroup struct {
			Status, ReleaseVersion, AmiType string
			Subnets                         []string
		}
	}
	c.runJSON(false, &own, "describe", "nodegroup", "--cluster", name, "--name", "ng1-public-ssh", "-o", "json")
	if ng := describe(); own.Nodegroup.ReleaseVersion != ng.ReleaseVersion || own.Nodegroup.AmiType != ng.AmiType ||
		!slices.Equal(own.Nodegroup.Subnets, ng.Subnets) {
		t.Errorf("nodejoin describe nodegroup = %+v; EKS says %+v", own.Nodegroup, ng)
	}
	var updates struct {
		UpdateIDs []string `json:"updateIds"`
	}
	a.awsJSON(&updates, "eks", "list-updates", "--name", name, "--nodegroup-name", "ng1-public-ssh")
	if !slices.Contains(updates.UpdateIDs, upd.Update.ID) {
		t.Errorf("list-updates: %v lacks %s", updates.UpdateIDs, upd.Update.ID)
	}

	// A self-managed group whose user data is seed 001's second sample: only the
	// cluster's name, the endpoint and CA found through DescribeCluster.
	userData := strings.ReplaceAll(`MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="==MYBOUNDARY=="

--==MYBOUNDARY==
Content-Type: text/x-shellscript; charset="us-ascii"

set -ex
/etc/eks/bootstrap.sh bys-dev-eks-main

--==MYBOUNDARY==--
`, "bys-dev-eks-main", name)
	ltData, _ := json.Marshal(map[string]any{
		"ImageId": images.Images[0].ImageID, "InstanceType": "m5.large",
		"IamInstanceProfile": map[string]string{"Name": "nodejoin-" + name + "-node"},
		"UserData":           base64.StdEncoding.EncodeToString([]byte(userData)),
	})
	a.aws("ec2", "create-launch-template", "--launch-template-name", "self-managed", "--launch-template-data", string(ltData))
	a.aws("autoscaling", "create-auto-scaling-group", "--auto-scaling-group-name", "self-managed",
		"--launch-template", "LaunchTemplateName=self-managed,Version=$Latest", "--min-size", "1", "--max-size", "1",
		"--vpc-zone-identifier", cluster.Cluster.ResourcesVpcConfig.SubnetIDs[0])
	c.poll(kubeconfig, "the self-managed node Ready", 3*time.Minute, func() (bool, string) {
		n := c.readyNodes(kubeconfig)
		return len(n) == 3, fmt.Sprint(n)
	})
	var selfManaged struct {
		AutoScalingGroups []struct {
			Instances []struct {
				InstanceID string `json:"InstanceId"`
			}
		}
	}
	a.awsJSON(&selfManaged, "autoscaling", "describe-auto-scaling-groups", "--auto-scaling-group-names", "self-managed")
	if len(selfManaged.AutoScalingGroups) != 1 || len(selfManaged.AutoScalingGroups[0].Instances) != 1 {
		t.Fatalf("the self-managed group: %+v", selfManaged)
	}
	id := selfManaged.AutoScalingGroups[0].Instances[0].InstanceID
	log, err := os.ReadFile(filepath.Join(c.state, "nodejoin", name, "instances", id, "nodeadm.log"))
	// Asked from inside the VPC, EKS gives the node the API server's private endpoint,
	// not the host's loopback one this test was given.
	if want := "cluster " + name + ": API server endpoint https://198.18.0.1:6443 and CA from EKS DescribeCluster"; err != nil || !strings.Contains(string(log), want) ||
		strings.Contains(string(log), cluster.Cluster.Endpoint) {
		t.Errorf("nodeadm of %s did not say %q: %v\n%s", id, want, err, log)
	}

	// Access entries for nodes, through EKS, as NodeAccessEntry objects. The AWS CLI 2.9
	// has no access-entry commands (2.15 added them) and eksctl creates entries through
	// CloudFormation stacks, so the SDK creates and deletes one, and eksctl lists it.
	principal := "arn:aws:iam::" + caller.Account + ":role/extra-nodes"
	eksc := a.eksClient()
	if _, err := eksc.CreateAccessEntry(t.Context(), &eks.CreateAccessEntryInput{ClusterName: &name, PrincipalArn: &principal, Type: aws.String("EC2_LINUX")}); err != nil {
		t.Fatalf("CreateAccessEntry: %v", err)
	}
	if out := a.eksctlRun("get", "accessentry", "--cluster", name, "-o", "json"); !strings.Contains(out, principal) {
		t.Errorf("eksctl get accessentry lacks %s:\n%s", principal, out)
	}
	if out := c.kubectl(kubeconfig, "get", "nodeaccessentries", "-o", "jsonpath={.items[*].spec.principalARN}"); !strings.Contains(out, principal) {
		t.Errorf("no NodeAccessEntry for %s: %s", principal, out)
	}
	if _, err := eksc.DeleteAccessEntry(t.Context(), &eks.DeleteAccessEntryInput{ClusterName: &name, PrincipalArn: &principal}); err != nil {
		t.Fatalf("DeleteAccessEntry: %v", err)
	}
	if out := a.eksctlRun("get", "accessentry", "--cluster", name, "-o", "json"); strings.Contains(out, principal) {
		t.Errorf("eksctl get accessentry after the delete still lists %s:\n%s", principal, out)
	}

	// Deleting the managed group through EKS removes its nodes.
	a.aws("eks", "delete-nodegroup", "--cluster-name", name, "--nodegroup-name", "ng1-public-ssh")
	c.poll(kubeconfig, "ng1-public-ssh gone", 3*time.Minute, func() (bool, string) {
		out, err := a.awsErr("eks", "describe-nodegroup", "--cluster-name", name, "--nodegroup-name", "ng1-public-ssh")
		return err != nil && strings.Contains(out, "ResourceNotFoundException"), out
	})
}

// nodegroupJSON is what the tests read of describe-nodegroup's nodegroup.
type nodegroupJSON struct {
	Status, ReleaseVersion, AmiType string
	Labels                          map[string]string
	Subnets                         []string
	// CreatedAt is as the AWS CLI prints EKS's epoch timestamps: 2026-11-27T16:03:23+00:00.
	CreatedAt string
	Resources struct {
		AutoScalingGroups []struct{ Name string }
	}
	// Health is in every failure message: it says why a group is DEGRADED.
	Health struct {
		Issues []struct {
			Code, Message string
			ResourceIDs   []string `json:"resourceIds"`
		}
	}
}

// olderRelease returns an AL2023 release of version other than latest, from the
// images' names and descriptions: amazon-eks-node-al2023-…-v20260915 described as
// "(k8s: 1.37.0, …)" is release 1.37.0-20260915.
func olderRelease(t *testing.T, a *awsTools, version, latest string) string {
	t.Helper()
	var images struct {
		Images []struct{ Name, Description string }
	}
	a.awsJSON(&images, "ec2", "describe-images", "--owners", "amazon", "--filters", "Name=name,Values=amazon-eks-node-al2023-x86_64-standard-"+version+"-*")
	for _, im := range images.Images {
		_, date, _ := strings.Cut(im.Name, "-"+version+"-v")
		_, kube, _ := strings.Cut(im.Description, "(k8s: ")
		kube, _, _ = strings.Cut(kube, ",")
		if r := kube + "-" + date; date != "" && kube != "" && r != latest {
			return r
		}
	}
	t.Fatalf("no AL2023 release but %s among %+v", latest, images.Images)
	return ""
}

// poll calls cond every 2 s until it says done, and fails the test with cond's last state
// and the cluster's nodes when timeout passes first.
func (c *cli) poll(kubeconfig, what string, timeout time.Duration, cond func() (done bool, state string)) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: not after %s; last: %s\nnodes:\n%s", what, timeout, state, c.kubectl(kubeconfig, "get", "nodes", "-o", "wide"))
		}
		time.Sleep(2 * time.Second)
	}
}
