package eksbackend

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/eksapi"
)

// An access entry is a NodeAccessEntry object. Its name is derived from the principal
// (an ARN is no object name) and the ARN itself is in its spec, so that entries made
// with kubectl under any name are found too.
const accessEntryTagsAnnotation = TagsAnnotation

// AccessEntryName is the object name the local EKS gives the entry of a principal
// (v1alpha1.EntryName).
func AccessEntryName(arn string) string { return v1alpha1.EntryName(arn) }

// principalName is the name of an IAM role or user ARN, without its path.
func principalName(arn string) string {
	canonical := v1alpha1.CanonicalPrincipalARN(arn)
	return canonical[strings.LastIndex(canonical, "/")+1:]
}

// principalKind is "role" or "user", as an access entry's ARN names it.
func principalKind(arn string) string {
	if strings.Contains(arn, ":user/") {
		return "user"
	}
	return "role"
}

// modifiedAtAnnotation records when UpdateAccessEntry last changed an entry.
const modifiedAtAnnotation = "nodejoin.io/modified-at"

// findEntry is the entry of principal, whatever its name.
func (b *Backend) findEntry(ctx context.Context, cluster, principal string) (*v1alpha1.NodeAccessEntry, error) {
	if err := b.cluster(cluster); err != nil {
		return nil, err
	}
	var l v1alpha1.NodeAccessEntryList
	if err := b.c.List(ctx, &l); err != nil {
		return nil, fmt.Errorf("listing NodeAccessEntries: %w", err)
	}
	for i := range l.Items {
		if l.Items[i].Spec.PrincipalARN == principal {
			return &l.Items[i], nil
		}
	}
	return nil, eksapi.NotFound("The specified principalArn could not be found: %s.", principal)
}

func (b *Backend) accessEntry(e *v1alpha1.NodeAccessEntry) eksapi.AccessEntry {
	t := string(e.Spec.Type)
	if t == "" {
		t = eksapi.AccessEntryEC2Linux
	}
	tags := map[string]string{}
	if raw, ok := e.Annotations[accessEntryTagsAnnotation]; ok {
		_ = jsonUnmarshal(raw, &tags)
	}
	groups, username := v1alpha1.GroupsFor(v1alpha1.AccessEntryType(t)), v1alpha1.NodeUsernameTemplate
	if t == eksapi.AccessEntryStandard {
		groups = append([]string{}, e.Spec.KubernetesGroups...)
		username = cmp.Or(e.Spec.Username, v1alpha1.DefaultUsername(e.Spec.PrincipalARN))
	}
	modified := e.CreationTimestamp.Time
	if raw := e.Annotations[modifiedAtAnnotation]; raw != "" {
		if m, err := time.Parse(time.RFC3339Nano, raw); err == nil {
			modified = m
		}
	}
	return eksapi.AccessEntry{
		ClusterName: b.info.Cluster.Name, PrincipalArn: e.Spec.PrincipalARN,
		KubernetesGroups: groups,
		AccessEntryArn: fmt.Sprintf("arn:aws:eks:%s:%s:access-entry/%s/%s/%s/%s/%s", b.info.Region, b.info.AccountID,
			b.info.Cluster.Name, principalKind(e.Spec.PrincipalARN), b.info.AccountID, principalName(e.Spec.PrincipalARN), e.UID),
		CreatedAt: eksapi.NewTime(e.CreationTimestamp.Time), ModifiedAt: eksapi.NewTime(modified),
		Tags: tags, Username: username, Type: t,
	}
}

// CreateAccessEntry creates the NodeAccessEntry of a node role or, of type STANDARD, of
// an IAM user or role with its username and groups (access policies are associated
// afterwards, as on EKS).
func (b *Backend) CreateAccessEntry(ctx context.Context, cluster string, in *eksapi.CreateAccessEntryRequest) (eksapi.AccessEntry, error) {
	if _, err := b.findEntry(ctx, cluster, in.PrincipalArn); err == nil {
		return eksapi.AccessEntry{}, eksapi.InUse("The specified access entry resource is already in use on this cluster: %s.", in.PrincipalArn)
	} else if e, ok := eksapi.AsError(err); !ok || e.Code != eksapi.CodeResourceNotFound {
		return eksapi.AccessEntry{}, err
	}
	e := &v1alpha1.NodeAccessEntry{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.NodeAccessEntryKind},
		ObjectMeta: metav1.ObjectMeta{Name: AccessEntryName(in.PrincipalArn)},
		Spec: v1alpha1.NodeAccessEntrySpec{PrincipalARN: in.PrincipalArn, Type: v1alpha1.AccessEntryType(in.Type),
			Username: in.Username, KubernetesGroups: in.KubernetesGroups},
	}
	if errs := e.Validate(); len(errs) > 0 {
		return eksapi.AccessEntry{}, eksapi.InvalidParameter("%s", eksEntryFields(errs.ToAggregate().Error()))
	}
	if len(in.Tags) > 0 {
		e.Annotations = map[string]string{accessEntryTagsAnnotation: jsonText(in.Tags)}
	}
	if err := b.c.Create(ctx, e); err != nil {
		switch {
		case apierrors.IsAlreadyExists(err):
			return eksapi.AccessEntry{}, eksapi.InUse("The specified access entry resource is already in use on this cluster: %s.", in.PrincipalArn)
		case apierrors.IsInvalid(err):
			return eksapi.AccessEntry{}, eksapi.InvalidParameter("the access entry is not valid: %s", invalidText(err))
		}
		return eksapi.AccessEntry{}, fmt.Errorf("creating NodeAccessEntry: %w", err)
	}
	return b.accessEntry(e), nil
}

// eksEntryFields names an entry's fields as EKS's API names them.
func eksEntryFields(msg string) string {
	return strings.NewReplacer("spec.principalARN", "principalArn", "spec.kubernetesGroups", "kubernetesGroups",
		"spec.username", "username", "spec.type", "type", "spec.accessPolicies", "accessPolicies", "spec: ", "").Replace(msg)
}

// DescribeAccessEntry maps the principal's NodeAccessEntry.
func (b *Backend) DescribeAccessEntry(ctx context.Context, cluster, principal string) (eksapi.AccessEntry, error) {
	e, err := b.findEntry(ctx, cluster, principal)
	if err != nil {
		return eksapi.AccessEntry{}, err
	}
	return b.accessEntry(e), nil
}

// ListAccessEntries lists the principals of the NodeAccessEntries, sorted.
func (b *Backend) ListAccessEntries(ctx context.Context, cluster string) ([]string, error) {
	if err := b.cluster(cluster); err != nil {
		return nil, err
	}
	var l v1alpha1.NodeAccessEntryList
	if err := b.c.List(ctx, &l); err != nil {
		return nil, fmt.Errorf("listing NodeAccessEntries: %w", err)
	}
	arns := make([]string, 0, len(l.Items))
	for _, e := range l.Items {
		arns = append(arns, e.Spec.PrincipalARN)
	}
	slices.Sort(arns)
	return slices.Compact(arns), nil
}

// DeleteAccessEntry deletes the principal's NodeAccessEntry.
func (b *Backend) DeleteAccessEntry(ctx context.Context, cluster, principal string) error {
	e, err := b.findEntry(ctx, cluster, principal)
	if err != nil {
		return err
	}
	if err := b.c.Delete(ctx, e, client.Preconditions{UID: &e.UID}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return eksapi.NotFound("The specified principalArn could not be found: %s.", principal)
		}
		return fmt.Errorf("deleting NodeAccessEntry %s: %w", e.Name, err)
	}
	return nil
}
