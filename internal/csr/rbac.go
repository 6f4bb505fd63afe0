package csr

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// RBAC object names nodejoin owns.
const (
	NodeBootstrapperRole = "nodejoin:node-bootstrapper"
	ControllerRole       = "nodejoin:controller"
)

func group(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

// rbacObjects are the roles and bindings node joining needs:
//   - bootstrappers may create CSRs at all (upstream's system:node-bootstrapper role);
//   - nodes and bootstrappers may create certificatesigningrequests/selfnodeserver (the
//     equivalent of EKS's eks:node-bootstrapper), so that serving CSRs pass the review;
//   - bootstrappers may ask for a first client certificate (nodeclient), nodes for
//     renewals (selfnodeclient), binding upstream's roles;
//   - the controller's own least-privilege role.
func rbacObjects(controllerUser string) ([]*rbacv1.ClusterRole, []*rbacv1.ClusterRoleBinding) {
	roles := []*rbacv1.ClusterRole{
		{ObjectMeta: metav1.ObjectMeta{Name: NodeBootstrapperRole}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests/selfnodeserver"}, Verbs: []string{"create"},
		}}},
		{ObjectMeta: metav1.ObjectMeta{Name: ControllerRole}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests/approval", "certificatesigningrequests/status"}, Verbs: []string{"update"}},
			{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"signers"}, ResourceNames: []string{SignerKubeletServing, SignerKubeletClient}, Verbs: []string{"approve", "sign"}},
			{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
		}},
	}
	binding := func(name, role string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   subjects,
		}
	}
	bindings := []*rbacv1.ClusterRoleBinding{
		binding(NodeBootstrapperRole, NodeBootstrapperRole, group("system:bootstrappers"), group("system:nodes")),
		binding("nodejoin:kubelet-bootstrap", "system:node-bootstrapper", group("system:bootstrappers")),
		binding("nodejoin:nodeclient", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", group("system:bootstrappers")),
		binding("nodejoin:selfnodeclient", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", group("system:nodes")),
	}
	if controllerUser != "" {
		bindings = append(bindings, binding(ControllerRole, ControllerRole, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: controllerUser}))
	}
	return roles, bindings
}

// EnsureRBAC creates or updates nodejoin's roles and bindings; running it again changes
// nothing. controllerUser, when set, is bound to the controller's role.
func EnsureRBAC(ctx context.Context, client kubernetes.Interface, controllerUser string) error {
	roles, bindings := rbacObjects(controllerUser)
	for _, r := range roles {
		cur, err := client.RbacV1().ClusterRoles().Get(ctx, r.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = client.RbacV1().ClusterRoles().Create(ctx, r, metav1.CreateOptions{})
		case err == nil:
			cur.Rules = r.Rules
			_, err = client.RbacV1().ClusterRoles().Update(ctx, cur, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("ClusterRole %s: %w", r.Name, err)
		}
	}
	for _, b := range bindings {
		cur, err := client.RbacV1().ClusterRoleBindings().Get(ctx, b.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{})
		case err == nil && cur.RoleRef != b.RoleRef:
			// The role reference cannot change in place.
			if err = client.RbacV1().ClusterRoleBindings().Delete(ctx, b.Name, metav1.DeleteOptions{}); err == nil {
				_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{})
			}
		case err == nil:
			cur.Subjects = b.Subjects
			_, err = client.RbacV1().ClusterRoleBindings().Update(ctx, cur, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("ClusterRoleBinding %s: %w", b.Name, err)
		}
	}
	return nil
}
