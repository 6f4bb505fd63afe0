package bootstraptoken_test

import (
	"context"
	"regexp"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodejoin/nodejoin/internal/bootstraptoken"
	"github.com/nodejoin/nodejoin/internal/testenv"
)

// A minted token authenticates at the real kube-apiserver as its node group's
// bootstrapper until it expires; Clean removes it then.
func TestMintAuthenticateClean(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	token, err := bootstraptoken.Mint(ctx, env.Client, "workers", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`).MatchString(token) {
		t.Fatalf("token has the wrong form")
	}
	whoami := func(tok string) (*authenticationv1.SelfSubjectReview, error) {
		c, err := kubernetes.NewForConfig(&rest.Config{Host: env.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAFile: env.Cluster.CAFile()}, BearerToken: tok})
		if err != nil {
			return nil, err
		}
		return c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	}
	r, err := whoami(token)
	if err != nil {
		t.Fatal(err)
	}
	u := r.Status.UserInfo
	if u.Username != "system:bootstrap:"+token[:6] || !slices.Contains(u.Groups, "system:bootstrappers") || !slices.Contains(u.Groups, "system:bootstrappers:workers") {
		t.Errorf("user = %+v", u)
	}
	if _, err := whoami(token[:7] + "0000000000000000"); !apierrors.IsUnauthorized(err) {
		t.Errorf("wrong secret: %v, want Unauthorized", err)
	}

	if n, err := bootstraptoken.Clean(ctx, env.Client, time.Now()); err != nil || n != 0 {
		t.Errorf("Clean before expiry removed %d (%v)", n, err)
	}
	if n, err := bootstraptoken.Clean(ctx, env.Client, time.Now().Add(2*time.Hour)); err != nil || n != 1 {
		t.Errorf("Clean after expiry removed %d (%v), want 1", n, err)
	}
	// kube-apiserver caches successful authentications for a few seconds.
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, err := whoami(token)
		return apierrors.IsUnauthorized(err), nil
	}); err != nil {
		t.Error("the cleaned token still authenticates")
	}

	for _, bad := range []struct {
		group string
		ttl   time.Duration
	}{{"Workers", time.Hour}, {"workers", 48 * time.Hour}, {"workers", 0}} {
		if _, err := bootstraptoken.Mint(ctx, env.Client, bad.group, bad.ttl, time.Now()); err == nil {
			t.Errorf("Mint(%q, %s) succeeded", bad.group, bad.ttl)
		}
	}
}
