package csr

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	certificatesv1 "k8s.io/api/certificates/v1"
)

// maxCachedReviews bounds the cache of allowed reviews. Requesters are few during a
// burst (every node of a group shares its bootstrap token); a cache that is full stores
// nothing more until entries expire.
const maxCachedReviews = 4096

// ReviewCache is an AccessReview that remembers for a while the reviews it allowed,
// and asks once for identical reviews under way at the same time.
//
// Only allowed answers are kept: a denial and an error are never remembered, so a
// requester given the right is approved at once. An allowed answer is forgotten after
// the TTL, and every answer at once when Forget is called: the manager calls it on
// every change of a ClusterRole or ClusterRoleBinding it watches (the only RBAC
// objects that can grant the cluster-scoped certificatesigningrequests), so a right
// taken away through RBAC stops approvals as soon as the controller sees the change,
// as soon as kube-apiserver's own authorizer, which watches the same objects, does.
// The TTL bounds how long a change made through another authorizer (a webhook) goes
// unseen. kube-apiserver keeps its webhook authorizer's allowed answers five minutes by
// default; a few seconds are enough here, since what repeats is a burst of nodes that
// share a bootstrap token (system:bootstrap:<id>), whose client CSRs all ask the same
// question. A review is identified by everything the SubjectAccessReview carries:
// user, UID, groups, extra and subresource.
//
// Hand-written: client-go has no cache for SubjectAccessReviews made on behalf of
// others, and kube-apiserver's authorizer cache is internal to it.
type ReviewCache struct {
	review AccessReview
	ttl    time.Duration
	now    func() time.Time
	group  singleflight.Group

	mu      sync.Mutex
	allowed map[string]time.Time // review key → when the answer expires
	// gen counts Forget calls: an answer asked for before one is not stored.
	gen uint64
}

// NewReviewCache returns a ReviewCache in front of review; a ttl of zero or less
// remembers nothing.
func NewReviewCache(review AccessReview, ttl time.Duration) *ReviewCache {
	return &ReviewCache{review: review, ttl: ttl, now: time.Now, allowed: map[string]time.Time{}}
}

// Forget drops every remembered answer, and the answers of reviews under way.
func (c *ReviewCache) Forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.allowed)
}

// Review is an AccessReview.
func (c *ReviewCache) Review(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, subresource string) (bool, error) {
	if c.ttl <= 0 {
		return c.review(ctx, csr, subresource)
	}
	key := reviewKey(csr, subresource)
	gen, hit := c.hit(key)
	if hit {
		return true, nil
	}
	// Callers that ask at once share one review; each still honours its own context.
	// A review asked for after a Forget does not share one started before it.
	ch := c.group.DoChan(strconv.FormatUint(gen, 10)+"/"+key, func() (any, error) {
		ok, err := c.review(context.WithoutCancel(ctx), csr, subresource)
		if err == nil && ok {
			c.store(key, gen)
		}
		return ok, err
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return false, r.Err
		}
		return r.Val.(bool), nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// hit reports whether an unexpired allowed answer is remembered for key, and the
// generation the answer of a review started now is stored under.
func (c *ReviewCache) hit(key string) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	exp, ok := c.allowed[key]
	if ok && c.now().Before(exp) {
		return c.gen, true
	}
	delete(c.allowed, key)
	return c.gen, false
}

// store remembers an allowed answer to a review started in generation gen, unless
// Forget was called since.
func (c *ReviewCache) store(key string, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	now := c.now()
	if len(c.allowed) >= maxCachedReviews {
		for k, exp := range c.allowed {
			if !now.Before(exp) {
				delete(c.allowed, k)
			}
		}
		if len(c.allowed) >= maxCachedReviews {
			return
		}
	}
	c.allowed[key] = now.Add(c.ttl)
}

// reviewKey identifies the SubjectAccessReview made for a CSR's requester. Every
// value is length-prefixed, so that no two different reviews share a key; groups and
// extra values are sorted, as their order does not change the answer.
func reviewKey(csr *certificatesv1.CertificateSigningRequest, subresource string) string {
	var b strings.Builder
	field := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	field(subresource)
	field(csr.Spec.Username)
	field(csr.Spec.UID)
	groups := slices.Sorted(slices.Values(csr.Spec.Groups))
	b.WriteString(strconv.Itoa(len(groups)))
	for _, g := range groups {
		field(g)
	}
	keys := slices.Sorted(maps.Keys(csr.Spec.Extra))
	b.WriteString(strconv.Itoa(len(keys)))
	for _, k := range keys {
		field(k)
		vals := slices.Sorted(slices.Values(csr.Spec.Extra[k]))
		b.WriteString(strconv.Itoa(len(vals)))
		for _, v := range vals {
			field(v)
		}
	}
	return b.String()
}
