package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// The administrator is an IAM identity, as on EKS: `up` gives the local administrator's
// IAM user a STANDARD access entry with AmazonEKSClusterAdminPolicy; a kubeconfig
// written by `aws eks update-kubeconfig`, whose user runs `aws eks get-token`, is that
// administrator to kubectl; a role assumed through STS without an entry is
// Unauthorized, and with an entry and AmazonEKSViewPolicy it may list pods but not
// delete them.
func TestAdminIsAnIAMIdentity(t *testing.T) {
	name := "e2e-adminid"
	c, adminKubeconfig, _ := upCluster(t, name, "--nodes", "0")
	a := newAWSTools(t, c, name)

	var caller struct{ Arn, Account string }
	a.awsJSON(&caller, "sts", "get-caller-identity")
	admin := caller.Arn
	if !strings.HasSuffix(admin, ":user/nodejoin-admin") {
		t.Fatalf("get-caller-identity: %+v", caller)
	}
	const clusterAdminPolicy = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
	const viewPolicy = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"

	// The cluster creator's entry, as EKS makes it. The Debian AWS CLI (2.9) predates
	// access entries: aws-sdk-go-v2 and eksctl ask instead.
	eksc := a.eksClient()
	ctx := t.Context()
	entries, err := eksc.ListAccessEntries(ctx, &eks.ListAccessEntriesInput{ClusterName: aws.String(name)})
	if err != nil || !slices.Contains(entries.AccessEntries, admin) {
		t.Fatalf("ListAccessEntries: %+v, %v; want %s", entries, err, admin)
	}
	policies, err := eksc.ListAssociatedAccessPolicies(ctx, &eks.ListAssociatedAccessPoliciesInput{ClusterName: aws.String(name), PrincipalArn: aws.String(admin)})
	if err != nil || len(policies.AssociatedAccessPolicies) != 1 || aws.ToString(policies.AssociatedAccessPolicies[0].PolicyArn) != clusterAdminPolicy ||
		policies.AssociatedAccessPolicies[0].AccessScope.Type != ekstypes.AccessScopeTypeCluster {
		t.Fatalf("ListAssociatedAccessPolicies: %+v, %v", policies, err)
	}
	if out, err := a.command(a.eksctl, "get", "accessentry", "--cluster", name, "-o", "json").CombinedOutput(); err != nil ||
		!strings.Contains(string(out), admin) || !strings.Contains(string(out), "AmazonEKSClusterAdminPolicy") {
		t.Errorf("eksctl get accessentry: %v\n%s", err, out)
	}
	// No access entry may carry system:masters.
	_, err = eksc.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{ClusterName: aws.String(name), PrincipalArn: aws.String("arn:aws:iam::" + caller.Account + ":user/mallory"),
		KubernetesGroups: []string{"system:masters"}})
	if err == nil || !strings.Contains(err.Error(), "InvalidParameterException") || !strings.Contains(err.Error(), "system:masters") {
		t.Errorf("CreateAccessEntry with system:masters: %v", err)
	}

	// The kubeconfig the AWS CLI writes. DescribeCluster's endpoint is the one
	// instances reach (inside the cluster's network namespace); from the host the API
	// server is at the admin kubeconfig's address, so the test points the entry there.
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	a.aws("eks", "update-kubeconfig", "--name", name, "--kubeconfig", kubeconfig)
	clusterARN := strings.TrimSpace(c.kubectl(kubeconfig, "config", "view", "-o", "jsonpath={.clusters[0].name}"))
	server := strings.TrimSpace(c.kubectl(adminKubeconfig, "config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}"))
	c.kubectl(kubeconfig, "config", "set-cluster", clusterARN, "--server", server)

	// kubectl as a user of the AWS environment: the exec plugin is `aws`, which must be
	// /usr/bin/aws (version 2), whatever comes first in PATH.
	kubectl := func(env []string, args ...string) (string, error) {
		cmd := exec.CommandContext(t.Context(), filepath.Join(c.binDir, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Env = append(slices.Clone(env), "PATH=/usr/bin:"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	whoami := func(env []string) (string, []string) {
		t.Helper()
		out, err := kubectl(env, "auth", "whoami", "-o", "json")
		if err != nil {
			t.Fatalf("kubectl auth whoami: %v\n%s", err, out)
		}
		var r struct {
			Status struct {
				UserInfo struct {
					Username string
					Groups   []string
				} `json:"userInfo"`
			}
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("kubectl auth whoami: %v\n%s", err, out)
		}
		return r.Status.UserInfo.Username, r.Status.UserInfo.Groups
	}
	user, groups := whoami(a.env)
	if user != admin || !slices.Contains(groups, "nodejoin:access-policy:AmazonEKSClusterAdminPolicy") || slices.Contains(groups, "system:masters") {
		t.Errorf("whoami as the administrator: %s %v", user, groups)
	}
	if out, err := kubectl(a.env, "get", "nodes"); err != nil {
		t.Errorf("kubectl get nodes as the administrator: %v\n%s", err, out)
	}

	// A role assumed through STS, without an access entry: Unauthorized.
	role := "arn:aws:iam::" + caller.Account + ":role/nodejoin-" + name + "-node"
	var assumed struct {
		Credentials struct{ AccessKeyID, SecretAccessKey, SessionToken string }
	}
	a.awsJSON(&assumed, "sts", "assume-role", "--role-arn", role, "--role-session-name", "alice")
	roleEnv := slices.DeleteFunc(slices.Clone(a.env), func(kv string) bool {
		return strings.HasPrefix(kv, "AWS_ACCESS_KEY_ID=") || strings.HasPrefix(kv, "AWS_SECRET_ACCESS_KEY=") || strings.HasPrefix(kv, "AWS_SESSION_TOKEN=")
	})
	roleEnv = append(roleEnv, "AWS_ACCESS_KEY_ID="+assumed.Credentials.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+assumed.Credentials.SecretAccessKey,
		"AWS_SESSION_TOKEN="+assumed.Credentials.SessionToken)
	if out, err := kubectl(roleEnv, "get", "pods", "-A"); err == nil || !strings.Contains(out, "Unauthorized") {
		t.Errorf("kubectl as a role without an entry: %v\n%s", err, out)
	}

	// With a STANDARD entry and the view policy: it may list pods, not delete them.
	if _, err := eksc.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{ClusterName: aws.String(name), PrincipalArn: aws.String(role)}); err != nil {
		t.Fatal(err)
	}
	if _, err := eksc.AssociateAccessPolicy(ctx, &eks.AssociateAccessPolicyInput{ClusterName: aws.String(name), PrincipalArn: aws.String(role),
		PolicyArn: aws.String(viewPolicy), AccessScope: &ekstypes.AccessScope{Type: ekstypes.AccessScopeTypeCluster}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := kubectl(roleEnv, "get", "pods", "-A")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kubectl get pods as the viewer: %v\n%s", err, out)
		}
		time.Sleep(2 * time.Second)
	}
	if user, groups := whoami(roleEnv); user != "arn:aws:sts::"+caller.Account+":assumed-role/nodejoin-"+name+"-node/alice" ||
		!slices.Equal(groups, []string{"nodejoin:access-policy:AmazonEKSViewPolicy", "system:authenticated"}) {
		t.Errorf("whoami as the viewer: %s %v", user, groups)
	}
	if out, err := kubectl(roleEnv, "delete", "pod", "-n", "kube-system", "no-such-pod"); err == nil || !strings.Contains(out, "Forbidden") {
		t.Errorf("kubectl delete pod as the viewer: %v\n%s", err, out)
	}
}
