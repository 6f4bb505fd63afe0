package manager

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodejoin/nodejoin/internal/authn"
	"github.com/nodejoin/nodejoin/internal/testenv"
)

// Against a real kube-apiserver: the aws-auth informer's field-selected watch works, and
// the controller uses informers only when it may list and watch.
func TestAWSAuthInformersOnAPIServer(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	if _, err := env.Client.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "aws-auth"},
		Data: map[string]string{"mapRoles": "- rolearn: arn:aws:iam::111122223333:role/legacy\n  username: system:node:{{EC2PrivateDNSName}}\n  groups: [system:nodes, system:masters]\n"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ok, err := canWatchAWSAuth(ctx, env.Client); err != nil || !ok {
		t.Fatalf("an administrator may watch: %v, %v", ok, err)
	}
	if ok, err := canWatchAWSAuth(ctx, env.As(t, "nobody")); err != nil || ok {
		t.Fatalf("a user without roles may watch: %v, %v", ok, err)
	}
	// The least the informers need: list and watch of aws-auth by name (a field selector
	// on metadata.name authorizes against resourceNames) and of ClusterRoleBindings.
	rules := map[string]rbacv1.PolicyRule{
		"Role":        {APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"aws-auth"}, Verbs: []string{"list", "watch"}},
		"ClusterRole": {APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterrolebindings"}, Verbs: []string{"list", "watch"}},
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "aws-auth-reader"}}
	meta := metav1.ObjectMeta{Namespace: "kube-system", Name: "aws-auth-reader"}
	if _, err := env.Client.RbacV1().Roles("kube-system").Create(ctx, &rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{rules["Role"]}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.RbacV1().RoleBindings("kube-system").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: meta.Name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cmeta := metav1.ObjectMeta{Name: "aws-auth-reader"}
	if _, err := env.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: cmeta, Rules: []rbacv1.PolicyRule{rules["ClusterRole"]}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: cmeta, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cmeta.Name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	reader := env.As(t, "aws-auth-reader")
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		return canWatchAWSAuth(ctx, reader)
	}); err != nil {
		t.Fatalf("a user with list and watch of aws-auth and ClusterRoleBindings may not watch: %v", err)
	}

	var logs bytes.Buffer
	c := newAWSAuthCache(reader, slog.New(slog.NewTextHandler(&logs, nil)), authn.NewMetrics(prometheus.NewRegistry()))
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Start(cctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	var maps []authn.RoleMapping
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		maps, err = c.Mappings(ctx)
		return err == nil && len(maps) == 1, nil
	}); err != nil {
		t.Fatalf("aws-auth never served from the informer: %v\n%s", err, logs.String())
	}
	if want := "aws-auth mapRoles[0] grants group system:masters, a system: group other than system:bootstrappers and system:nodes"; maps[0].Refused != want {
		t.Errorf("Refused = %q, want %q", maps[0].Refused, want)
	}
	if admin := c.adminSubjects(rbacv1.GroupKind); admin["system:masters"] != "cluster-admin" {
		t.Errorf("groups bound to cluster-admin = %v; want system:masters by the cluster-admin binding", admin)
	}
}
