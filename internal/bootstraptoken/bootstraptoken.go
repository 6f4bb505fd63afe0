// Package bootstraptoken mints kube-apiserver bootstrap tokens for node groups and
// deletes them once expired. A token authenticates as system:bootstrap:<id> in groups
// system:bootstrappers and system:bootstrappers:<node group>, and may only be used
// for authentication (not for signing cluster-info).
package bootstraptoken

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	bootstrapsecret "k8s.io/cluster-bootstrap/util/secrets"
	bootstraptokens "k8s.io/cluster-bootstrap/util/tokens"

	"github.com/nodejoin/nodejoin/internal/rbac"
)

// NodeGroupKey labels the token Secrets nodejoin mints with their node group.
const NodeGroupKey = "nodejoin.io/node-group"

// groupPrefix begins the group of a node group's bootstrappers.
const groupPrefix = bootstrapapi.BootstrapDefaultGroup + ":"

const maxLifetime = 24 * time.Hour

// groupNameRE is what nodejoin accepts as a node group name; the group it makes of it
// must also be a bootstrap group kube-apiserver accepts.
var groupNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9:-]{0,200}[a-z0-9])?$`)

// Mint creates a token for a node group, valid for ttl (at most 24 hours), and returns
// it as "<id>.<secret>". The token is a secret: callers must not log it.
func Mint(ctx context.Context, client kubernetes.Interface, nodeGroup string, ttl time.Duration, now time.Time) (string, error) {
	if !groupNameRE.MatchString(nodeGroup) || bootstraputil.ValidateBootstrapGroupName(groupPrefix+nodeGroup) != nil {
		return "", fmt.Errorf("node group %q: use lower-case letters, digits, '-' and ':'", nodeGroup)
	}
	if ttl <= 0 || ttl > maxLifetime {
		return "", fmt.Errorf("token lifetime %s: want more than 0 and at most %s", ttl, maxLifetime)
	}
	// The group's bootstrappers, and only they, may ask for a first client certificate.
	if err := rbac.ApplyNodeGroup(ctx, client, nodeGroup, "nodejoin"); err != nil {
		return "", fmt.Errorf("binding node group %s's bootstrappers to nodeclient: %w", nodeGroup, err)
	}
	for range 5 {
		token, err := bootstraputil.GenerateBootstrapToken()
		if err != nil {
			return "", fmt.Errorf("generating a bootstrap token: %w", err)
		}
		id, secret, err := bootstraptokens.ParseToken(token)
		if err != nil {
			return "", fmt.Errorf("generating a bootstrap token: %w", err)
		}
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: bootstraputil.BootstrapTokenSecretName(id), Namespace: metav1.NamespaceSystem,
				Labels: map[string]string{NodeGroupKey: nodeGroup},
			},
			Type: bootstrapapi.SecretTypeBootstrapToken,
			StringData: map[string]string{
				bootstrapapi.BootstrapTokenIDKey:               id,
				bootstrapapi.BootstrapTokenSecretKey:           secret,
				bootstrapapi.BootstrapTokenExpirationKey:       now.Add(ttl).UTC().Format(time.RFC3339),
				bootstrapapi.BootstrapTokenUsageAuthentication: "true",
				bootstrapapi.BootstrapTokenExtraGroupsKey:      groupPrefix + nodeGroup,
				bootstrapapi.BootstrapTokenDescriptionKey:      "nodejoin bootstrap token for node group " + nodeGroup,
			},
		}
		_, err = client.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, s, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			continue // an ID collision: draw again
		}
		if err != nil {
			return "", fmt.Errorf("creating bootstrap token for node group %s: %w", nodeGroup, err)
		}
		return token, nil
	}
	return "", errors.New("could not draw an unused bootstrap token ID")
}

// Expired reports whether a token secret has expired at now; one whose expiration does
// not parse counts as expired, as kube-apiserver treats it, and so does one without an
// expiration, which nodejoin never mints.
func Expired(s *corev1.Secret, now time.Time) bool {
	if bootstrapsecret.GetData(s, bootstrapapi.BootstrapTokenExpirationKey) == "" {
		return true
	}
	return bootstrapsecret.HasExpired(s, now)
}

// Clean deletes the expired bootstrap tokens that nodejoin minted and returns how many.
// Each delete is conditioned on the secret's UID, so a token re-created meanwhile stays.
func Clean(ctx context.Context, client kubernetes.Interface, now time.Time) (int, error) {
	list, err := client.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{
		LabelSelector: NodeGroupKey, FieldSelector: "type=" + string(bootstrapapi.SecretTypeBootstrapToken),
	})
	if err != nil {
		return 0, fmt.Errorf("listing bootstrap tokens: %w", err)
	}
	n := 0
	for i := range list.Items {
		s := &list.Items[i]
		if _, isToken := bootstrapsecret.ParseName(s.Name); !isToken || s.Type != bootstrapapi.SecretTypeBootstrapToken || !Expired(s, now) {
			continue
		}
		uid := s.UID
		err := client.CoreV1().Secrets(metav1.NamespaceSystem).Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return n, fmt.Errorf("deleting expired bootstrap token %s: %w", s.Name, err)
		}
		if err == nil {
			n++
		}
	}
	return n, nil
}
