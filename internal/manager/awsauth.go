package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/nodejoin/nodejoin/internal/authn"
)

// awsAuthName is the ConfigMap (in kube-system) that maps roles the way EKS's does.
const awsAuthName = "aws-auth"

// errAWSAuthNotSynced is returned until the aws-auth and ClusterRoleBinding caches are
// filled: a role only aws-auth maps gets it (retryable), access entries are unaffected.
var errAWSAuthNotSynced = errors.New("aws-auth not loaded yet")

// awsAuthCache serves aws-auth and the groups bound to cluster-admin from informers
// (one watch each, never a GET per token review): the ConfigMap informer watches
// kube-system/aws-auth alone (a metadata.name field selector).
type awsAuthCache struct {
	configMaps, bindings cache.SharedIndexInformer
	factories            []informers.SharedInformerFactory
	source               authn.AWSAuth
}

// canWatchAWSAuth reports whether the controller may list and watch aws-auth and
// ClusterRoleBindings (SelfSubjectAccessReviews), which the informers need.
func canWatchAWSAuth(ctx context.Context, client kubernetes.Interface) (bool, error) {
	for _, attrs := range []authorizationv1.ResourceAttributes{
		{Namespace: metav1.NamespaceSystem, Verb: "list", Resource: "configmaps", Name: awsAuthName},
		{Namespace: metav1.NamespaceSystem, Verb: "watch", Resource: "configmaps", Name: awsAuthName},
		{Verb: "list", Group: rbacv1.GroupName, Resource: "clusterrolebindings"},
		{Verb: "watch", Group: rbacv1.GroupName, Resource: "clusterrolebindings"},
	} {
		r, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("asking whether the controller may %s %s: %w", attrs.Verb, attrs.Resource, err)
		}
		if !r.Status.Allowed {
			return false, nil
		}
	}
	return true, nil
}

// newAWSAuthCache watches aws-auth and ClusterRoleBindings; it runs as a manager runnable.
func newAWSAuthCache(client kubernetes.Interface, log *slog.Logger, metrics *authn.Metrics) *awsAuthCache {
	cmFactory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(metav1.NamespaceSystem),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + awsAuthName }))
	rbacFactory := informers.NewSharedInformerFactory(client, 0)
	c := &awsAuthCache{
		configMaps: cmFactory.Core().V1().ConfigMaps().Informer(),
		bindings:   rbacFactory.Rbac().V1().ClusterRoleBindings().Informer(),
		factories:  []informers.SharedInformerFactory{cmFactory, rbacFactory},
	}
	c.source = authn.AWSAuth{
		Get:         c.configMap,
		AdminGroups: func(context.Context) (map[string]string, error) { return c.adminSubjects(rbacv1.GroupKind), nil },
		AdminUsers:  func(context.Context) (map[string]string, error) { return c.adminSubjects(rbacv1.UserKind), nil },
		Invalid: func(err error) {
			log.Warn("aws-auth ignored in part", "err", err.Error())
			if metrics != nil {
				metrics.AWSAuthInvalid.Inc()
			}
		},
	}
	return c
}

// Start runs the informers until ctx ends (a manager runnable on every replica).
func (c *awsAuthCache) Start(ctx context.Context) error {
	for _, f := range c.factories {
		f.Start(ctx.Done())
	}
	<-ctx.Done()
	for _, f := range c.factories {
		f.Shutdown()
	}
	return nil
}

func (*awsAuthCache) NeedLeaderElection() bool { return false }

// Mappings implements the webhook's aws-auth source of role mappings.
func (c *awsAuthCache) Mappings(ctx context.Context) ([]authn.RoleMapping, error) {
	if !c.configMaps.HasSynced() || !c.bindings.HasSynced() {
		return nil, errAWSAuthNotSynced
	}
	return c.source.Mappings(ctx)
}

// configMap returns aws-auth from the cache, nil when there is none.
func (c *awsAuthCache) configMap(context.Context) (*corev1.ConfigMap, error) {
	obj, ok, err := c.configMaps.GetStore().GetByKey(metav1.NamespaceSystem + "/" + awsAuthName)
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading the aws-auth cache: %w", err)
	case !ok:
		return nil, nil
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("aws-auth cache holds a %T", obj))
	}
	return cm, nil
}

// adminSubjects returns the subjects of kind (Group or User) that ClusterRoleBindings
// bind to cluster-admin, each with the first such binding by name.
func (c *awsAuthCache) adminSubjects(kind string) map[string]string {
	objs := c.bindings.GetStore().List()
	bindings := make([]*rbacv1.ClusterRoleBinding, 0, len(objs))
	for _, o := range objs {
		if b, ok := o.(*rbacv1.ClusterRoleBinding); ok && b.RoleRef.Kind == "ClusterRole" && b.RoleRef.Name == "cluster-admin" {
			bindings = append(bindings, b)
		}
	}
	sort.Slice(bindings, func(i, j int) bool { return bindings[i].Name < bindings[j].Name })
	subjects := map[string]string{}
	for _, b := range bindings {
		for _, s := range b.Subjects {
			if s.Kind == kind && subjects[s.Name] == "" {
				subjects[s.Name] = b.Name
			}
		}
	}
	return subjects
}
