package csr

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
)

// reviewer answers from a table of allowed users and counts the reviews it was asked.
type reviewer struct {
	calls   atomic.Int32
	allowed sync.Map // user → bool
	err     error
	gate    chan struct{} // when set, each review waits for it
}

func (r *reviewer) review(_ context.Context, csr *certificatesv1.CertificateSigningRequest, _ string) (bool, error) {
	r.calls.Add(1)
	if r.gate != nil {
		<-r.gate
	}
	if r.err != nil {
		return false, r.err
	}
	ok, _ := r.allowed.Load(csr.Spec.Username)
	return ok == true, nil
}

func reviewCSR(user string, groups ...string) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{Username: user, Groups: groups}}
}

func newTestCache(r *reviewer, now *time.Time) *ReviewCache {
	c := NewReviewCache(r.review, 10*time.Second)
	c.now = func() time.Time { return *now }
	return c
}

// An allowed review is remembered for the TTL and asked again after it; a denial, an
// error and a right taken away are never answered from the cache.
func TestCachedAccessReview(t *testing.T) {
	ctx := t.Context()
	now := time.Unix(1_800_000_000, 0)
	r := &reviewer{}
	c := newTestCache(r, &now)
	boot := reviewCSR("system:bootstrap:abcdef", "system:bootstrappers", "system:bootstrappers:ng-1")
	r.allowed.Store(boot.Spec.Username, true)

	for i := range 3 {
		if ok, err := c.Review(ctx, boot, "nodeclient"); !ok || err != nil {
			t.Fatalf("ask %d: %v, %v; want allowed", i, ok, err)
		}
	}
	if n := r.calls.Load(); n != 1 {
		t.Errorf("three identical allowed reviews within the TTL made %d SubjectAccessReviews, want 1", n)
	}
	// The same requester with its groups in another order is the same question.
	reordered := reviewCSR(boot.Spec.Username, "system:bootstrappers:ng-1", "system:bootstrappers")
	if ok, _ := c.Review(ctx, reordered, "nodeclient"); !ok || r.calls.Load() != 1 {
		t.Errorf("groups reordered: allowed %v after %d reviews; want a cache hit", ok, r.calls.Load())
	}
	// Another subresource, group set or user is another question.
	for _, q := range []struct {
		csr *certificatesv1.CertificateSigningRequest
		sub string
	}{
		{boot, "selfnodeclient"},
		{reviewCSR(boot.Spec.Username, "system:bootstrappers"), "nodeclient"},
		{reviewCSR("system:bootstrap:other", "system:bootstrappers", "system:bootstrappers:ng-1"), "nodeclient"},
	} {
		before := r.calls.Load()
		_, _ = c.Review(ctx, q.csr, q.sub)
		if r.calls.Load() != before+1 {
			t.Errorf("%s %v %s: answered from the cache, want a review", q.csr.Spec.Username, q.csr.Spec.Groups, q.sub)
		}
	}
	// Denials are not remembered: the same denied question is asked again.
	other := reviewCSR("system:bootstrap:other", "system:bootstrappers", "system:bootstrappers:ng-1")
	before := r.calls.Load()
	if ok, _ := c.Review(ctx, other, "nodeclient"); ok || r.calls.Load() != before+1 {
		t.Errorf("denied requester asked again: allowed %v after %d new reviews; want denied by a new review", ok, r.calls.Load()-before)
	}
	// The right taken away: still allowed within the TTL, refused once it has passed.
	r.allowed.Delete(boot.Spec.Username)
	now = now.Add(9 * time.Second)
	if ok, _ := c.Review(ctx, boot, "nodeclient"); !ok {
		t.Errorf("within the TTL: denied, want the remembered answer")
	}
	now = now.Add(2 * time.Second)
	if ok, _ := c.Review(ctx, boot, "nodeclient"); ok {
		t.Errorf("after the TTL, with the right taken away: allowed, want denied")
	}
	// Forget (an RBAC change) drops the remembered answers at once.
	r.allowed.Store(boot.Spec.Username, true)
	if ok, _ := c.Review(ctx, boot, "nodeclient"); !ok {
		t.Fatal("allowed again: denied")
	}
	r.allowed.Delete(boot.Spec.Username)
	c.Forget()
	if ok, _ := c.Review(ctx, boot, "nodeclient"); ok {
		t.Errorf("after Forget, with the right taken away: allowed, want denied")
	}
	// Errors are not remembered either.
	r.err = errors.New("apiserver unavailable")
	r.allowed.Store(boot.Spec.Username, true)
	if ok, err := c.Review(ctx, boot, "nodeclient"); ok || err == nil {
		t.Errorf("review failing: %v, %v; want the error", ok, err)
	}
	r.err = nil
	if ok, err := c.Review(ctx, boot, "nodeclient"); !ok || err != nil {
		t.Errorf("review working again: %v, %v; want allowed", ok, err)
	}
}

// Identical reviews asked at once make one SubjectAccessReview, whose answer they share.
func TestCachedAccessReviewSharesConcurrent(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	r := &reviewer{gate: make(chan struct{})}
	r.allowed.Store("system:bootstrap:abcdef", true)
	c := newTestCache(r, &now)
	boot := reviewCSR("system:bootstrap:abcdef", "system:bootstrappers")
	const callers = 20
	results := make(chan bool, callers)
	for range callers {
		go func() {
			ok, _ := c.Review(t.Context(), boot, "nodeclient")
			results <- ok
		}()
	}
	for r.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // let the other callers join the review under way
	close(r.gate)
	for range callers {
		if !<-results {
			t.Error("a caller was denied")
		}
	}
	if n := r.calls.Load(); n != 1 {
		t.Errorf("%d callers at once made %d reviews, want 1", callers, n)
	}
}

// A TTL of zero turns the cache off.
func TestCachedAccessReviewOff(t *testing.T) {
	r := &reviewer{}
	r.allowed.Store("u", true)
	review := NewReviewCache(r.review, 0)
	for range 2 {
		_, _ = review.Review(t.Context(), reviewCSR("u"), "nodeclient")
	}
	if n := r.calls.Load(); n != 2 {
		t.Errorf("TTL 0: %d reviews for 2 questions, want 2", n)
	}
}

// No two different reviews share a key.
func TestReviewKeyDistinct(t *testing.T) {
	csrs := []*certificatesv1.CertificateSigningRequest{
		reviewCSR("a", "b"),
		reviewCSR("ab"),
		reviewCSR("a", "b", "c"),
		reviewCSR("a", "bc"),
		{Spec: certificatesv1.CertificateSigningRequestSpec{Username: "a", UID: "b"}},
		{Spec: certificatesv1.CertificateSigningRequestSpec{Username: "a", Extra: map[string]certificatesv1.ExtraValue{"b": nil}}},
		{Spec: certificatesv1.CertificateSigningRequestSpec{Username: "a", Extra: map[string]certificatesv1.ExtraValue{"b": {"c"}}}},
		{Spec: certificatesv1.CertificateSigningRequestSpec{Username: "a", Extra: map[string]certificatesv1.ExtraValue{"b": {"c", "d"}}}},
		{Spec: certificatesv1.CertificateSigningRequestSpec{Username: "a", Extra: map[string]certificatesv1.ExtraValue{"b": {"c"}, "d": nil}}},
	}
	seen := map[string]int{}
	for i, c := range csrs {
		k := reviewKey(c, "nodeclient")
		if j, dup := seen[k]; dup {
			t.Errorf("reviews %d and %d share the key %q", j, i, k)
		}
		seen[k] = i
	}
}

// An answer to a review under way when Forget is called is not remembered: it may
// predate the RBAC change that called Forget.
func TestReviewCacheForgetDuringReview(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	r := &reviewer{gate: make(chan struct{})}
	r.allowed.Store("u", true)
	c := newTestCache(r, &now)
	done := make(chan bool)
	go func() {
		ok, _ := c.Review(t.Context(), reviewCSR("u"), "nodeclient")
		done <- ok
	}()
	for r.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	c.Forget()
	close(r.gate)
	if !<-done {
		t.Fatal("denied")
	}
	r.allowed.Delete("u")
	if ok, _ := c.Review(t.Context(), reviewCSR("u"), "nodeclient"); ok {
		t.Errorf("the answer of a review under way at Forget was remembered")
	}
}
