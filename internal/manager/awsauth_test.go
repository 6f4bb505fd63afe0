package manager

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodejoin/nodejoin/internal/authn"
)

// aws-auth and the groups bound to cluster-admin come from informers: no GET per
// review; a malformed ConfigMap is logged and counted, not an error; a mapping granting
// a group a ClusterRoleBinding binds to cluster-admin is refused with the binding's name.
func TestAWSAuthFromInformers(t *testing.T) {
	client := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "aws-auth"}, Data: map[string]string{"mapRoles": "- rolearn: ["}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ops-are-admins"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "ops"}, {Kind: rbacv1.UserKind, Name: "lead"}}},
	)
	var logs bytes.Buffer
	metrics := authn.NewMetrics(prometheus.NewRegistry())
	c := newAWSAuthCache(client, slog.New(slog.NewTextHandler(&logs, nil)), metrics)
	if _, err := c.Mappings(t.Context()); !errors.Is(err, errAWSAuthNotSynced) {
		t.Fatalf("before the caches are filled: %v, want %v", err, errAWSAuthNotSynced)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return c.configMaps.HasSynced() && c.bindings.HasSynced(), nil
	}); err != nil {
		t.Fatal(err)
	}
	maps, err := c.Mappings(ctx)
	if err != nil || len(maps) != 0 {
		t.Fatalf("malformed aws-auth: %v, %v; want no mappings and no error", maps, err)
	}
	if !strings.Contains(logs.String(), "aws-auth ignored in part") || testutil.ToFloat64(metrics.AWSAuthInvalid) != 1 {
		t.Errorf("the malformed aws-auth was not reported (metric %v):\n%s", testutil.ToFloat64(metrics.AWSAuthInvalid), logs.String())
	}

	if _, err := client.CoreV1().ConfigMaps("kube-system").Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "aws-auth"},
		Data: map[string]string{"mapRoles": "- rolearn: arn:aws:iam::111122223333:role/legacy\n  username: system:node:{{EC2PrivateDNSName}}\n  groups: [system:nodes, ops]\n"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		maps, err = c.Mappings(ctx)
		return err == nil && len(maps) == 1, err
	}); err != nil {
		t.Fatal(err)
	}
	if want := "aws-auth mapRoles[0] grants group ops, which is bound to cluster-admin by ClusterRoleBinding ops-are-admins"; maps[0].Refused != want {
		t.Errorf("Refused = %q, want %q", maps[0].Refused, want)
	}
	// A user the binding names is refused as a username too.
	if _, err := client.CoreV1().ConfigMaps("kube-system").Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "aws-auth"},
		Data: map[string]string{"mapRoles": "- rolearn: arn:aws:iam::111122223333:role/lead\n  username: lead\n"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "aws-auth mapRoles[0] maps to username lead, which is bound to cluster-admin by ClusterRoleBinding ops-are-admins"
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		maps, err = c.Mappings(ctx)
		return err == nil && len(maps) == 1 && maps[0].Refused == want, err
	}); err != nil {
		t.Errorf("mappings %+v: %v; want refused %q", maps, err, want)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "get" {
			t.Errorf("a GET reached the API server: %v", a)
		}
	}
}
