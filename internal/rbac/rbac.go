// Package rbac holds the roles and bindings node joining needs, installs them with
// server-side apply, and renders them for deploy/rbac.yaml.
package rbac

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	sigsyaml "sigs.k8s.io/yaml"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// Object names nodejoin owns.
const (
	NodeBootstrapperRole = "nodejoin:node-bootstrapper"
	ControllerRole       = "nodejoin:controller"
	// LeaseName is the leader-election Lease in kube-system.
	LeaseName = "nodejoin-controller"
	// IssuedConfigMapName is the kube-system ConfigMap recording the instances that got
	// a client certificate through a bootstrap token (csr.IssuedConfigMapName).
	IssuedConfigMapName = "nodejoin-bootstrap-client-certificates"
)

// ServiceAccount is the controller's identity when deployed from deploy/.
var ServiceAccount = rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "nodejoin-system", Name: "nodejoin-controller"}

// User returns a subject for a user name (the controller's, when it runs with a
// certificate rather than as a service account).
func User(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

func group(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

// Objects are roles and bindings.
type Objects struct {
	ClusterRoles        []*rbacv1.ClusterRole
	ClusterRoleBindings []*rbacv1.ClusterRoleBinding
	Roles               []*rbacv1.Role
	RoleBindings        []*rbacv1.RoleBinding
	// ConfigMaps are created empty when missing (never overwritten): the ones the
	// controller may only read and update by name, since create cannot be limited to one.
	ConfigMaps []*corev1.ConfigMap
}

// For returns the roles and bindings node joining needs:
//   - bootstrappers may create CSRs at all (upstream's system:node-bootstrapper role);
//   - nodes and bootstrappers may create certificatesigningrequests/selfnodeserver (the
//     equivalent of EKS's eks:node-bootstrapper), so that serving CSRs pass the review;
//   - nodes may renew their client certificates (selfnodeclient), binding upstream's
//     role; a first client certificate (nodeclient) is bound per node group, by
//     NodeGroupBinding, never to every bootstrapper;
//   - the controller's own least-privilege roles, bound to controller when it is set:
//     cluster-wide what CSRs, access entries and reviews need; in kube-system only its
//     Lease and, by name, the aws-auth ConfigMap and its record of issued client
//     certificates (created here, empty, so that the controller needs no create). No
//     Secrets: kube-controller-manager's tokencleaner deletes expired bootstrap tokens.
func For(controller *rbacv1.Subject) Objects {
	cr := func(name string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
		return &rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}, ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	}
	crb := func(name, role string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   subjects,
		}
	}
	o := Objects{
		ClusterRoles: []*rbacv1.ClusterRole{
			cr(NodeBootstrapperRole, rbacv1.PolicyRule{
				APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests/selfnodeserver"}, Verbs: []string{"create"},
			}),
			cr(ControllerRole,
				rbacv1.PolicyRule{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"get", "list", "watch"}},
				rbacv1.PolicyRule{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests/approval", "certificatesigningrequests/status"}, Verbs: []string{"update"}},
				rbacv1.PolicyRule{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"signers"},
					ResourceNames: []string{certificatesv1.KubeletServingSignerName, certificatesv1.KubeAPIServerClientKubeletSignerName}, Verbs: []string{"approve", "sign"}},
				rbacv1.PolicyRule{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
				rbacv1.PolicyRule{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
				rbacv1.PolicyRule{APIGroups: []string{nodejoinv1alpha1.GroupName}, Resources: []string{nodejoinv1alpha1.NodeAccessEntryResource.Resource}, Verbs: []string{"get", "list", "watch"}},
				// The role's unique ID, pinned on an entry's first use (an annotation).
				rbacv1.PolicyRule{APIGroups: []string{nodejoinv1alpha1.GroupName}, Resources: []string{nodejoinv1alpha1.NodeAccessEntryResource.Resource}, Verbs: []string{"patch"}},
				// Whether a Node is registered already: a bootstrap token's client CSR
				// for one is denied. Read only.
				rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
				// Which groups are bound to cluster-admin: an aws-auth mapping to one is
				// refused. And when RBAC changes, so that the CSR controller forgets the
				// SubjectAccessReviews it remembered. Watched through informers.
				rbacv1.PolicyRule{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterrolebindings", "clusterroles"}, Verbs: []string{"list", "watch"}},
			),
		},
		ClusterRoleBindings: []*rbacv1.ClusterRoleBinding{
			crb(NodeBootstrapperRole, NodeBootstrapperRole, group("system:bootstrappers"), group("system:nodes")),
			crb("nodejoin:kubelet-bootstrap", "system:node-bootstrapper", group("system:bootstrappers")),
			crb("nodejoin:selfnodeclient", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", group("system:nodes")),
			// kube-proxy on Windows nodes runs with the node's identity, which EC2_WINDOWS
			// entries put in this group (EKS binds it the same way).
			crb(nodejoinv1alpha1.KubeProxyWindowsGroup, "system:node-proxier", group(nodejoinv1alpha1.KubeProxyWindowsGroup)),
		},
	}
	if controller == nil {
		return o
	}
	o.ClusterRoleBindings = append(o.ClusterRoleBindings, crb(ControllerRole, ControllerRole, *controller))
	o.Roles = []*rbacv1.Role{{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: ControllerRole},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{LeaseName}, Verbs: []string{"get", "update"}},
			// aws-auth: watched through an informer limited to its name (get is the
			// fallback where list and watch are not granted).
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"aws-auth"}, Verbs: []string{"get", "list", "watch"}},
			// The record of instances that got a client certificate through a bootstrap
			// token: created with these roles (ConfigMaps below), then read and updated
			// by name only. No create: RBAC cannot limit it to a name.
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{IssuedConfigMapName}, Verbs: []string{"get", "update"}},
			// No Secrets. Expired bootstrap tokens are deleted by kube-controller-manager's
			// tokencleaner (kubeadm turns it on); deleting them here would need list and
			// delete of every Secret in kube-system, since RBAC cannot limit a rule by
			// field selector and token Secrets' names are random.
		},
	}}
	o.ConfigMaps = []*corev1.ConfigMap{{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: IssuedConfigMapName},
	}}
	o.RoleBindings = []*rbacv1.RoleBinding{{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: ControllerRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: ControllerRole},
		Subjects:   []rbacv1.Subject{*controller},
	}}
	return o
}

// NodeClientRole is upstream's role that allows asking for a first kubelet client
// certificate (certificatesigningrequests/nodeclient).
const NodeClientRole = "system:certificates.k8s.io:certificatesigningrequests:nodeclient"

// NodeGroupBindingName is the name of a node group's nodeclient binding.
func NodeGroupBindingName(nodeGroup string) string { return "nodejoin:nodeclient:" + nodeGroup }

// NodeGroupBinding binds NodeClientRole to the bootstrappers of one node group,
// system:bootstrappers:<nodeGroup>: the extra group of the bootstrap tokens minted for
// it. RBAC matches group names exactly (no patterns), so each node group has a binding
// of its own, applied when a token is minted for it (ApplyNodeGroup); a bootstrap token
// of no node group (kubeadm's default group alone) may not ask for a client certificate.
func NodeGroupBinding(nodeGroup string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: NodeGroupBindingName(nodeGroup), Labels: map[string]string{"nodejoin.io/node-group": nodeGroup}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: NodeClientRole},
		Subjects:   []rbacv1.Subject{group("system:bootstrappers:" + nodeGroup)},
	}
}

// ApplyNodeGroup applies NodeGroupBinding(nodeGroup) with server-side apply.
func ApplyNodeGroup(ctx context.Context, client kubernetes.Interface, nodeGroup, fieldManager string) error {
	b := NodeGroupBinding(nodeGroup)
	if err := apply(ctx, b, client.RbacV1().ClusterRoleBindings().Apply, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
		return fmt.Errorf("cluster role binding %s: %w", b.Name, err)
	}
	return nil
}

// YAML renders the objects as one multi-document manifest, in a stable order.
func (o Objects) YAML() ([]byte, error) {
	var docs []any
	for _, x := range o.ClusterRoles {
		docs = append(docs, x)
	}
	for _, x := range o.ClusterRoleBindings {
		docs = append(docs, x)
	}
	for _, x := range o.Roles {
		docs = append(docs, x)
	}
	for _, x := range o.RoleBindings {
		docs = append(docs, x)
	}
	for _, x := range o.ConfigMaps {
		docs = append(docs, x)
	}
	return manifest("# Generated by `go test ./internal/rbac -update` from internal/rbac/rbac.go; do not edit.\n", docs...)
}

// manifest renders objects as one multi-document YAML manifest after a header comment,
// without the empty fields the API types always marshal (creationTimestamp, status).
func manifest(header string, docs ...any) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(header)
	for _, d := range docs {
		y, err := sigsyaml.Marshal(d)
		if err != nil {
			return nil, err
		}
		buf.WriteString("---\n")
		y = bytes.ReplaceAll(y, []byte("  creationTimestamp: null\n"), nil)
		buf.Write(bytes.ReplaceAll(y, []byte("\nstatus: {}\n"), []byte("\n")))
	}
	return buf.Bytes(), nil
}

// Apply applies the objects of For(controller) with server-side apply under
// fieldManager, taking over fields another manager set; running it again changes
// nothing. A binding whose role reference changed (which cannot change in place) is
// deleted and applied again.
func Apply(ctx context.Context, client kubernetes.Interface, controller *rbacv1.Subject, fieldManager string) error {
	return ApplyObjects(ctx, client, For(controller), fieldManager)
}

// ApplyObjects applies o as Apply does.
func ApplyObjects(ctx context.Context, client kubernetes.Interface, o Objects, fieldManager string) error {
	opts := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
	rbac := client.RbacV1()
	for _, r := range o.ClusterRoles {
		if err := apply(ctx, r, rbac.ClusterRoles().Apply, opts); err != nil {
			return fmt.Errorf("cluster role %s: %w", r.Name, err)
		}
	}
	for _, b := range o.ClusterRoleBindings {
		err := apply(ctx, b, rbac.ClusterRoleBindings().Apply, opts)
		if apierrors.IsInvalid(err) {
			if err = rbac.ClusterRoleBindings().Delete(ctx, b.Name, metav1.DeleteOptions{}); err == nil {
				err = apply(ctx, b, rbac.ClusterRoleBindings().Apply, opts)
			}
		}
		if err != nil {
			return fmt.Errorf("cluster role binding %s: %w", b.Name, err)
		}
	}
	for _, r := range o.Roles {
		if err := apply(ctx, r, rbac.Roles(r.Namespace).Apply, opts); err != nil {
			return fmt.Errorf("role %s/%s: %w", r.Namespace, r.Name, err)
		}
	}
	for _, b := range o.RoleBindings {
		err := apply(ctx, b, rbac.RoleBindings(b.Namespace).Apply, opts)
		if apierrors.IsInvalid(err) {
			if err = rbac.RoleBindings(b.Namespace).Delete(ctx, b.Name, metav1.DeleteOptions{}); err == nil {
				err = apply(ctx, b, rbac.RoleBindings(b.Namespace).Apply, opts)
			}
		}
		if err != nil {
			return fmt.Errorf("role binding %s/%s: %w", b.Namespace, b.Name, err)
		}
	}
	for _, cm := range o.ConfigMaps {
		if _, err := client.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{FieldManager: fieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("config map %s/%s: %w", cm.Namespace, cm.Name, err)
		}
	}
	return nil
}

// apply sends obj, a typed object with its apiVersion and kind set, as the apply
// configuration AC it converts to field for field.
func apply[AC, Out any](ctx context.Context, obj any, fn func(context.Context, *AC, metav1.ApplyOptions) (Out, error), opts metav1.ApplyOptions) error {
	js, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	ac := new(AC)
	if err := json.Unmarshal(js, ac); err != nil {
		return err
	}
	_, err = fn(ctx, ac, opts)
	return err
}
