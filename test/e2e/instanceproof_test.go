package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// A principal allowed to assume the node role assumes it through STS with the session
// name of a running instance, and gets a token with `aws eks get-token`. Where the
// node role's access entry requires no instance proof, that token is the instance's
// node (the gap aws-iam-authenticator leaves); once the entry requires one, it is
// denied with the reason, and a new instance, whose nodeadm sends its signed identity
// document, still joins.
func TestInstanceProofDeniesAnAssumedRoleNamingAnInstance(t *testing.T) {
	name := "e2e-iproof"
	c, kubeconfig, _ := upCluster(t, name, "--nodes", "1")
	a := newAWSTools(t, c, name)
	ctx := t.Context()
	admin, restCfg := adminClient(t, kubeconfig)
	nodes, err := admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 1 {
		t.Fatalf("nodes: %v, %v", nodes, err)
	}
	victim := nodes.Items[0]
	instanceID := victim.Spec.ProviderID[strings.LastIndex(victim.Spec.ProviderID, "/")+1:]

	var caller struct{ Account string }
	a.awsJSON(&caller, "sts", "get-caller-identity")
	role := "arn:aws:iam::" + caller.Account + ":role/nodejoin-" + name + "-node"
	var assumed struct {
		Credentials struct{ AccessKeyID, SecretAccessKey, SessionToken string }
	}
	a.awsJSON(&assumed, "sts", "assume-role", "--role-arn", role, "--role-session-name", instanceID)
	roleEnv := slices.DeleteFunc(slices.Clone(a.env), func(kv string) bool {
		return strings.HasPrefix(kv, "AWS_ACCESS_KEY_ID=") || strings.HasPrefix(kv, "AWS_SECRET_ACCESS_KEY=") || strings.HasPrefix(kv, "AWS_SESSION_TOKEN=")
	})
	roleEnv = append(roleEnv, "AWS_ACCESS_KEY_ID="+assumed.Credentials.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+assumed.Credentials.SecretAccessKey,
		"AWS_SESSION_TOKEN="+assumed.Credentials.SessionToken)
	// whoami presents a fresh token of the assumed role (never one the webhook cached).
	whoami := func() (string, error) {
		t.Helper()
		cmd := a.command(debianAWS, "--endpoint-url", a.endpoint, "--output", "json", "eks", "get-token", "--cluster-name", name)
		cmd.Env = roleEnv
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("aws eks get-token as the assumed role: %v\n%s", err, out)
		}
		var cred struct{ Status struct{ Token string } }
		if err := json.Unmarshal(out, &cred); err != nil || cred.Status.Token == "" {
			t.Fatalf("aws eks get-token: %v", err)
		}
		cfg := &rest.Config{Host: restCfg.Host, TLSClientConfig: rest.TLSClientConfig{CAData: restCfg.CAData}, BearerToken: cred.Status.Token}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		r, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			return "", err
		}
		return r.Status.UserInfo.Username, nil
	}
	if user, err := whoami(); err != nil || user != "system:node:"+victim.Name {
		t.Fatalf("without a required proof, the assumed role naming %s is %q (%v); want the instance's node (the gap this closes)", instanceID, user, err)
	}

	// The node role's entry now requires an instance proof.
	entries := c.kubectl(kubeconfig, "get", "nodeaccessentries", "-o", "jsonpath={range .items[*]}{.metadata.name} {.spec.principalARN}{\"\\n\"}{end}")
	entry := ""
	for _, line := range strings.Split(strings.TrimSpace(entries), "\n") {
		if n, arn, _ := strings.Cut(line, " "); arn == role {
			entry = n
		}
	}
	if entry == "" {
		t.Fatalf("no NodeAccessEntry of %s:\n%s", role, entries)
	}
	c.kubectl(kubeconfig, "annotate", "nodeaccessentry", entry, nodejoinv1alpha1.InstanceProofAnnotation+"=required")
	deadline := time.Now().Add(time.Minute)
	for {
		user, err := whoami()
		if apierrors.IsUnauthorized(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with a required proof, the assumed role naming %s is %q (%v); want Unauthorized", instanceID, user, err)
		}
		time.Sleep(time.Second)
	}
	logPath := filepath.Join(c.state, "nodejoin", name, "logs", "nodejoin-controller.log")
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	want := "NodeAccessEntry " + entry + " requires an instance proof of " + instanceID + ", and the token carries none"
	if !strings.Contains(string(log), want) {
		t.Errorf("%s lacks the denial %q", logPath, want)
	}
	if strings.Contains(string(log), assumed.Credentials.SessionToken) {
		t.Errorf("%s holds the assumed role's session token", logPath)
	}

	// A new instance proves itself: nodeadm's token carries its signed identity document.
	c.run("add", "node", "--name", name, "--timeout", "120s")
	if got := c.readyNodes(kubeconfig); len(got) != 2 {
		t.Errorf("Ready nodes = %v, want the new instance's too", got)
	}
}
