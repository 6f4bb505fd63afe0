package rbac

import (
	"net/http"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/nodejoin/nodejoin/internal/testenv"
)

// classifiedAs makes a request as the impersonated user and returns the FlowSchema and
// priority level kube-apiserver's priority and fairness put it in (the response
// headers it sets on every answer, a 403 included).
func classifiedAs(t *testing.T, cfg *rest.Config, user string, groups ...string) (flowSchema, priorityLevel types.UID) {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, c.Host+"/api/v1/namespaces/kube-system/configmaps", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return types.UID(resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID)),
		types.UID(resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID))
}

// deploy/flowschema.yaml on a real kube-apiserver: the controller's requests, as a user
// or as the deployed service account, land at workload-high through nodejoin's
// FlowSchema; other service accounts' do not.
func TestFlowSchemaClassifiesTheController(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	fc := env.Client.FlowcontrolV1()
	high, err := fc.PriorityLevelConfigurations().Get(ctx, "workload-high", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const user = "nodejoin-test-controller"
	sa := "system:serviceaccount:" + ServiceAccount.Namespace + ":" + ServiceAccount.Name
	saGroups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ServiceAccount.Namespace}
	other := "system:serviceaccount:" + ServiceAccount.Namespace + ":someone-else"
	for _, tt := range []struct {
		subject       rbacv1.Subject
		matched, lost string
	}{
		{User(user), user, sa},
		{ServiceAccount, sa, user},
	} {
		// Twice: applying again changes nothing.
		for range 2 {
			if err := ApplyFlowSchema(ctx, env.Client, &tt.subject, "test-admin"); err != nil {
				t.Fatal(err)
			}
		}
		fs, err := fc.FlowSchemas().Get(ctx, FlowSchemaName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if fs.Spec.PriorityLevelConfiguration.Name != high.Name {
			t.Fatalf("flow schema's priority level %q", fs.Spec.PriorityLevelConfiguration.Name)
		}
		groupsOf := func(u string) []string {
			if u == user {
				return []string{"system:authenticated"}
			}
			return append(saGroups, "system:authenticated")
		}
		// kube-apiserver's priority and fairness reads FlowSchemas through an informer.
		deadline := time.Now().Add(30 * time.Second)
		for {
			f, p := classifiedAs(t, env.Config, tt.matched, groupsOf(tt.matched)...)
			if f == fs.UID && p == high.UID {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: requests of %s matched flow schema %q, priority level %q; want %q (%s) and %q (workload-high)", tt.subject.Kind, tt.matched, f, p, fs.UID, FlowSchemaName, high.UID)
			}
			time.Sleep(200 * time.Millisecond)
		}
		for _, u := range []string{tt.lost, other} {
			if f, _ := classifiedAs(t, env.Config, u, groupsOf(u)...); f == fs.UID {
				t.Errorf("%s: requests of %s matched nodejoin's flow schema", tt.subject.Kind, u)
			}
		}
	}
}
