package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// seed001AL2023 is seed 001's AL2023 user data as EKS injects it into a managed node
// group's launch template: MIME, one NodeConfig with spec.kubelet.config (featureGates
// DisableKubeletCloudCredentialProviders, maxPods 17, clusterDNS) and a node label flag.
const seed001AL2023 = "../../internal/userdata/testdata/seeds/006_seed001_al2023-mng-injected-mime-nodeconfig.mime"

// TestSeed001AL2023UserDataJoins launches, through the AWS CLI, one instance whose user
// data is seed 001's AL2023 MIME verbatim apart from the cluster fields, which point at the
// local cluster. Its feature gate DisableKubeletCloudCredentialProviders is no longer known
// to the pinned kubelet, which would refuse to start with it: nodeadm drops it with a
// warning, and the node joins with the rest of the seed's kubelet settings.
func TestSeed001AL2023UserDataJoins(t *testing.T) {
	name := "e2e-seed001"
	c, kubeconfig, _ := upCluster(t, name, "--nodes", "0", "--nodegroup-kubelet", "real")
	a := newAWSTools(t, c, name)

	var cluster struct {
		Cluster struct {
			Endpoint, Version       string
			CertificateAuthority    struct{ Data string }
			KubernetesNetworkConfig struct{ ServiceIpv4Cidr string }
			ResourcesVpcConfig      struct {
				SubnetIDs []string `json:"subnetIds"`
			}
		}
	}
	a.awsJSON(&cluster, "eks", "describe-cluster", "--name", name)
	cl := cluster.Cluster
	if cl.Endpoint == "" || cl.CertificateAuthority.Data == "" || len(cl.ResourcesVpcConfig.SubnetIDs) == 0 {
		t.Fatalf("describe-cluster: %+v", cl)
	}
	serviceCIDR, err := netip.ParsePrefix(cl.KubernetesNetworkConfig.ServiceIpv4Cidr)
	if err != nil || !serviceCIDR.Addr().Is4() {
		t.Fatalf("describe-cluster's serviceIpv4Cidr %q: %v", cl.KubernetesNetworkConfig.ServiceIpv4Cidr, err)
	}
	dns := serviceCIDR.Masked().Addr().As4()
	dns[3] = 10

	raw, err := os.ReadFile(seed001AL2023)
	if err != nil {
		t.Fatal(err)
	}
	userData := string(raw)
	replace := func(old, repl string) {
		t.Helper()
		if n := strings.Count(userData, old); n != 1 {
			t.Fatalf("seed 001's user data has %q %d time(s), want once", old, n)
		}
		userData = strings.Replace(userData, old, repl, 1)
	}
	replace("apiServerEndpoint: https://1111122222.sk1.ap-northeast-2.eks.amazonaws.com", "apiServerEndpoint: "+cl.Endpoint)
	_, ca, _ := strings.Cut(userData, "certificateAuthority: ")
	ca, _, _ = strings.Cut(ca, "\n")
	replace("certificateAuthority: "+ca+"\n", "certificateAuthority: "+cl.CertificateAuthority.Data+"\n")
	replace("cidr: 172.20.0.0/16", "cidr: "+serviceCIDR.String())
	replace("name: my-cluster", "name: "+name)
	replace("- 172.20.0.10", "- "+netip.AddrFrom4(dns).String())
	if !strings.Contains(userData, "DisableKubeletCloudCredentialProviders: true") {
		t.Fatalf("the seed's feature gate is gone from the user data:\n%s", userData)
	}

	var images struct{ Images []struct{ ImageID string } }
	a.awsJSON(&images, "ec2", "describe-images", "--owners", "amazon", "--filters", "Name=name,Values=amazon-eks-node-al2023-x86_64-standard-"+cl.Version+"-*")
	if len(images.Images) == 0 {
		t.Fatalf("no AL2023 image for Kubernetes %s", cl.Version)
	}
	ltData, err := json.Marshal(map[string]any{
		"ImageId": images.Images[0].ImageID, "InstanceType": "m5.large",
		"IamInstanceProfile": map[string]string{"Name": "nodejoin-" + name + "-node"},
		"UserData":           base64.StdEncoding.EncodeToString([]byte(userData)),
	})
	if err != nil {
		t.Fatal(err)
	}
	a.aws("ec2", "create-launch-template", "--launch-template-name", "seed001-al2023", "--launch-template-data", string(ltData))
	a.aws("autoscaling", "create-auto-scaling-group", "--auto-scaling-group-name", "seed001-al2023",
		"--launch-template", "LaunchTemplateName=seed001-al2023,Version=$Latest", "--min-size", "1", "--max-size", "1",
		"--vpc-zone-identifier", cl.ResourcesVpcConfig.SubnetIDs[0])

	var id string
	deadline := time.Now().Add(4 * time.Minute)
	for {
		var groups struct {
			AutoScalingGroups []struct {
				Instances []struct {
					InstanceID string `json:"InstanceId"`
				}
			}
		}
		a.awsJSON(&groups, "autoscaling", "describe-auto-scaling-groups", "--auto-scaling-group-names", "seed001-al2023")
		if len(groups.AutoScalingGroups) == 1 && len(groups.AutoScalingGroups[0].Instances) == 1 {
			id = groups.AutoScalingGroups[0].Instances[0].InstanceID
		}
		if id != "" && len(c.readyNodes(kubeconfig)) == 1 {
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(c.state, "nodejoin", name, "instances", id, "nodeadm.log"))
			t.Fatalf("no Ready node from seed 001's user data after 4m (instance %q)\nnodes:\n%s\nnodeadm.log:\n%s",
				id, c.kubectl(kubeconfig, "get", "nodes", "-o", "wide"), log)
		}
		time.Sleep(2 * time.Second)
	}

	log, err := os.ReadFile(filepath.Join(c.state, "nodejoin", name, "instances", id, "nodeadm.log"))
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(c.kubectl(kubeconfig, "get", "nodes", "-o", "jsonpath={.items[0].status.nodeInfo.kubeletVersion}"))
	want := fmt.Sprintf("kubelet %s does not know feature gate DisableKubeletCloudCredentialProviders (removed upstream in v1.33); dropped from spec.kubelet.config.featureGates", version)
	if !strings.Contains(string(log), want) {
		t.Errorf("nodeadm of %s did not warn %q:\n%s", id, want, log)
	}
	// The rest of the seed's kubelet settings reached the kubelet: maxPods 17 from the
	// drop-in, the node group label from the flags.
	if pods := c.kubectl(kubeconfig, "get", "nodes", "-o", "jsonpath={.items[0].status.capacity.pods}"); strings.TrimSpace(pods) != "17" {
		t.Errorf("node capacity pods = %q, want the seed's maxPods 17", pods)
	}
	if group := c.kubectl(kubeconfig, "get", "nodes", "-o", `jsonpath={.items[0].metadata.labels.eks\.amazonaws\.com/nodegroup}`); strings.TrimSpace(group) != "ng-al2023" {
		t.Errorf("node label eks.amazonaws.com/nodegroup = %q, want the seed's ng-al2023", group)
	}
}
