// Package bootstraptoken mints kube-apiserver bootstrap tokens for node groups and
// deletes them once expired. A token authenticates as system:bootstrap:<id> in groups
// system:bootstrappers and system:bootstrappers:<node group>, and may only be used
// for authentication (not for signing cluster-info).
package bootstraptoken

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Secret layout of bootstrap tokens (k8s.io/cluster-bootstrap).
const (
	SecretType    = "bootstrap.kubernetes.io/token" //nolint:gosec // G101: the Secret type name, not a credential.
	SecretPrefix  = "bootstrap-token-"
	GroupPrefix   = "system:bootstrappers:"
	NodeGroupKey  = "nodejoin.io/node-group"
	alphabet      = "0123456789abcdefghijklmnopqrstuvwxyz"
	maxLifetime   = 24 * time.Hour
	expirationFmt = time.RFC3339
)

var groupNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9:-]{0,200}[a-z0-9])?$`)

func random(n int) (string, error) {
	b := make([]byte, n)
	for i := range b {
		x, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			return "", err
		}
		b[i] = alphabet[x.Int64()]
	}
	return string(b), nil
}

// Mint creates a token for a node group, valid for ttl (at most 24 hours), and returns
// it as "<id>.<secret>". The token is a secret: callers must not log it.
func Mint(ctx context.Context, client kubernetes.Interface, nodeGroup string, ttl time.Duration, now time.Time) (string, error) {
	if !groupNameRE.MatchString(nodeGroup) {
		return "", fmt.Errorf("node group %q: use lower-case letters, digits, '-' and ':'", nodeGroup)
	}
	if ttl <= 0 || ttl > maxLifetime {
		return "", fmt.Errorf("token lifetime %s: want more than 0 and at most %s", ttl, maxLifetime)
	}
	for range 5 {
		id, err := random(6)
		if err != nil {
			return "", err
		}
		secret, err := random(16)
		if err != nil {
			return "", err
		}
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: SecretPrefix + id, Namespace: metav1.NamespaceSystem, Labels: map[string]string{NodeGroupKey: nodeGroup}},
			Type:       SecretType,
			StringData: map[string]string{
				"token-id":                       id,
				"token-secret":                   secret,
				"expiration":                     now.Add(ttl).UTC().Format(expirationFmt),
				"usage-bootstrap-authentication": "true",
				"auth-extra-groups":              GroupPrefix + nodeGroup,
				"description":                    "nodejoin bootstrap token for node group " + nodeGroup,
			},
		}
		_, err = client.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, s, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			continue // an ID collision: draw again
		}
		if err != nil {
			return "", fmt.Errorf("creating bootstrap token for node group %s: %w", nodeGroup, err)
		}
		return id + "." + secret, nil
	}
	return "", errors.New("could not draw an unused bootstrap token ID")
}

// Expired reports whether a token secret has expired at now; one whose expiration
// does not parse counts as expired, as kube-apiserver treats it.
func Expired(s *corev1.Secret, now time.Time) bool {
	exp, err := time.Parse(expirationFmt, string(s.Data["expiration"]))
	return err != nil || !now.Before(exp)
}

// Clean deletes the expired bootstrap tokens that nodejoin minted and returns how many.
// Each delete is conditioned on the secret's UID, so a token re-created meanwhile stays.
func Clean(ctx context.Context, client kubernetes.Interface, now time.Time) (int, error) {
	list, err := client.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: NodeGroupKey})
	if err != nil {
		return 0, fmt.Errorf("listing bootstrap tokens: %w", err)
	}
	n := 0
	for i := range list.Items {
		s := &list.Items[i]
		if s.Type != SecretType || !Expired(s, now) {
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
