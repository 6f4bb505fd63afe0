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

// CachedAccessReview returns an AccessReview that remembers for ttl the reviews review
// allowed, and asks review once for identical reviews under way at the same time.
//
// Only allowed answers are kept, and only for ttl: a denial and an error are never
// remembered, so a requester given the right is approved at once, and one whose right
// is taken away (its ClusterRoleBinding deleted) is refused at the latest ttl later.
// kube-apiserver's own webhook authorizer keeps allowed answers for five minutes by
// default; a few seconds are enough here, since what repeats is a burst of nodes that
// share a bootstrap token (system:bootstrap:<id>), whose client CSRs all ask the same
// question. A review is identified by everything the SubjectAccessReview carries: user,
// UID, groups, extra and subresource. A ttl of zero or less returns review unchanged.
//
// Hand-written: client-go has no cache for SubjectAccessReviews made on behalf of
// others, and the apiserver's authorizer cache is internal to it.
func CachedAccessReview(review AccessReview, ttl time.Duration) AccessReview {
	if ttl <= 0 {
		return review
	}
	c := &reviewCache{review: review, ttl: ttl, now: time.Now, allowed: map[string]time.Time{}}
	return c.ask
}

type reviewCache struct {
	review AccessReview
	ttl    time.Duration
	now    func() time.Time
	group  singleflight.Group

	mu      sync.Mutex
	allowed map[string]time.Time // review key → when the answer expires
}

func (c *reviewCache) ask(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, subresource string) (bool, error) {
	key := reviewKey(csr, subresource)
	if c.hit(key) {
		return true, nil
	}
	// Callers that ask at once share one review; each still honours its own context.
	ch := c.group.DoChan(key, func() (any, error) {
		ok, err := c.review(context.WithoutCancel(ctx), csr, subresource)
		if err == nil && ok {
			c.store(key)
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

func (c *reviewCache) hit(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	exp, ok := c.allowed[key]
	if ok && c.now().Before(exp) {
		return true
	}
	delete(c.allowed, key)
	return false
}

func (c *reviewCache) store(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
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
