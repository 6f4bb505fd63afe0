package authn

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/identity"
)

// Webhook answers kube-apiserver's TokenReviews (authentication.k8s.io/v1).
//
// kube-apiserver forwards every bearer token it does not recognise, so anyone who can
// reach the API server can make the webhook review garbage. Authenticate therefore
// spends STS budget only on well-formed tokens (the form check is free), answers a
// token STS refused from a short denial cache, and gives every access key that
// authenticated recently a budget of its own: a flood of forgeries can slow down
// identities never seen before, but not nodes that are already members.
type Webhook struct {
	Verifier  *Verifier
	Mappings  func(ctx context.Context) ([]RoleMapping, error)
	Instances Instances
	Log       *slog.Logger
	// CacheTTL keeps an accepted token's user this long (default 1 minute), keyed by the
	// token's hash, and never past the token's own expiry (its X-Amz-Date plus
	// identity.Lifetime); CacheSize bounds the entries (default 4096), and separately
	// the denials and the known access keys.
	CacheTTL  time.Duration
	CacheSize int
	// DenialTTL keeps STS's refusal of a well-formed token this long (default 10 s),
	// keyed by the token's hash, so that replaying a forgery costs no STS call.
	DenialTTL time.Duration
	// Limiter bounds the reviews of tokens from access keys not seen recently that reach
	// STS; nil allows 50 per second, bursts of 100.
	Limiter *rate.Limiter
	// KnownTTL is how long an access key that authenticated stays known (default 1
	// hour, an instance role's credential lifetime); each known key may reach STS
	// KnownRate times a second with bursts of KnownBurst (default 1 and 5) before it
	// falls back to Limiter.
	KnownTTL   time.Duration
	KnownRate  rate.Limit
	KnownBurst int
	// Metrics, when set, records reviews, latencies and cache hits.
	Metrics *Metrics
	// InstanceProofs, when set, checks nodes' instance proofs (nil: a proof is required
	// only by mappings that say so, and then cannot be checked: such nodes are denied).
	InstanceProofs *InstanceProofs
	// OnAccepted, when set, is called with the username of every accepted token.
	OnAccepted func(username string)

	once    sync.Once
	mu      sync.Mutex
	cache   map[[32]byte]cacheEntry
	denials map[[32]byte]denialEntry
	known   map[string]*knownKey
	hits    int
	total   int
}

type cacheEntry struct {
	user    *User
	expires time.Time
}

type denialEntry struct {
	err     error
	expires time.Time
}

type knownKey struct {
	limiter *rate.Limiter
	expires time.Time
}

func (w *Webhook) init() {
	w.once.Do(func() {
		w.cache = map[[32]byte]cacheEntry{}
		w.denials = map[[32]byte]denialEntry{}
		w.known = map[string]*knownKey{}
		if w.CacheTTL == 0 {
			w.CacheTTL = time.Minute
		}
		if w.CacheSize == 0 {
			w.CacheSize = 4096
		}
		if w.DenialTTL == 0 {
			w.DenialTTL = 10 * time.Second
		}
		if w.Limiter == nil {
			w.Limiter = rate.NewLimiter(50, 100)
		}
		if w.KnownTTL == 0 {
			w.KnownTTL = time.Hour
		}
		if w.KnownRate == 0 {
			w.KnownRate = 1
		}
		if w.KnownBurst == 0 {
			w.KnownBurst = 5
		}
		if w.Log == nil {
			w.Log = slog.New(slog.DiscardHandler)
		}
	})
}

// CacheHitRate returns cache hits and total reviews.
func (w *Webhook) CacheHitRate() (hits, total int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.hits, w.total
}

// evict makes room for one entry in m: expired entries go first, then arbitrary ones.
func evict[V any](m map[[32]byte]V, size int, expired func(V) bool) {
	if len(m) < size {
		return
	}
	for k, v := range m {
		if expired(v) {
			delete(m, k)
		}
	}
	for k := range m {
		if len(m) < size {
			return
		}
		delete(m, k)
	}
}

// allow spends STS budget for a well-formed token of accessKey: the key's own budget
// when it authenticated recently, else (or when that is spent) the shared one.
func (w *Webhook) allow(accessKey string, now time.Time) bool {
	w.mu.Lock()
	k, ok := w.known[accessKey]
	if ok && !now.Before(k.expires) {
		delete(w.known, accessKey)
		ok = false
	}
	w.mu.Unlock()
	if ok && k.limiter.AllowN(now, 1) {
		return true
	}
	return w.Limiter.AllowN(now, 1)
}

// remember marks accessKey as recently authenticated.
func (w *Webhook) remember(accessKey string, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if k, ok := w.known[accessKey]; ok {
		k.expires = now.Add(w.KnownTTL)
		return
	}
	if len(w.known) >= w.CacheSize {
		for key, k := range w.known {
			if !now.Before(k.expires) || len(w.known) >= w.CacheSize {
				delete(w.known, key)
			}
		}
	}
	w.known[accessKey] = &knownKey{limiter: rate.NewLimiter(w.KnownRate, w.KnownBurst), expires: now.Add(w.KnownTTL)}
}

// Authenticate returns the user of a token, from the cache or by verifying it. In
// order: the caches (accepted users, STS denials), the token's form (a malformed token
// is denied without spending any budget), the STS budget, STS, the mappings.
func (w *Webhook) Authenticate(ctx context.Context, token string) (*User, error) {
	w.init()
	key := sha256.Sum256([]byte(token))
	now := w.now()
	w.mu.Lock()
	w.total++
	if w.Metrics != nil {
		w.Metrics.CacheLookups.Inc()
	}
	if e, ok := w.cache[key]; ok && now.Before(e.expires) {
		w.hits++
		w.mu.Unlock()
		if w.Metrics != nil {
			w.Metrics.CacheHits.Inc()
		}
		return e.user, nil
	}
	if d, ok := w.denials[key]; ok && now.Before(d.expires) {
		w.mu.Unlock()
		return nil, d.err
	}
	w.mu.Unlock()
	req, err := w.Verifier.Parse(token)
	if err != nil {
		return nil, err
	}
	if !w.allow(req.AccessKeyID, now) {
		return nil, ErrThrottled
	}
	caller, err := w.Verifier.VerifyRequest(ctx, req)
	if errors.Is(err, ErrDenied) {
		w.mu.Lock()
		evict(w.denials, w.CacheSize, func(d denialEntry) bool { return !now.Before(d.expires) })
		w.denials[key] = denialEntry{err: err, expires: now.Add(w.DenialTTL)}
		w.mu.Unlock()
	}
	if err != nil {
		return nil, err
	}
	// A source of mappings that fails (aws-auth unreadable) does not stop the others:
	// its error is returned only for a role nothing else maps.
	mappings, mapErr := w.Mappings(ctx)
	if mapErr != nil && len(mappings) == 0 {
		return nil, mapErr
	}
	user, err := Map(ctx, caller, mappings, w.Instances)
	var unmapped unmappedError
	if mapErr != nil && errors.As(err, &unmapped) {
		return nil, mapErr
	}
	if err != nil {
		w.refusal(err)
		return nil, err
	}
	if err := w.InstanceProofs.checkInstanceProof(caller, user, req.Proof); err != nil {
		return nil, err
	}
	if user.Standard {
		w.standardMapping(caller, user)
	}
	w.remember(req.AccessKeyID, now)
	w.mu.Lock()
	evict(w.cache, w.CacheSize, func(e cacheEntry) bool { return !now.Before(e.expires) })
	w.cache[key] = cacheEntry{user: user, expires: cacheExpiry(now, w.CacheTTL, req.Date)}
	w.mu.Unlock()
	return user, nil
}

// now is the webhook's clock: the Verifier's, so that the cache and the token's date
// are judged against the same time.
func (w *Webhook) now() time.Time {
	if w.Verifier != nil && w.Verifier.Now != nil {
		return w.Verifier.Now()
	}
	return time.Now()
}

// cacheExpiry is when an accepted token's cached user expires: after ttl, but never
// later than the token itself (signed at date, refused by Parse once identity.Lifetime
// has passed). Without this bound a cache hit, which skips Parse, would let a token be
// accepted for up to ttl past its 15 minutes.
func cacheExpiry(now time.Time, ttl time.Duration, date time.Time) time.Time {
	exp := now.Add(ttl)
	if tokenEnd := date.Add(identity.Lifetime); tokenEnd.Before(exp) {
		return tokenEnd
	}
	return exp
}

// refusal logs and counts a denial because a mapping may not be used.
func (w *Webhook) refusal(err error) {
	var r RefusedError
	if !errors.As(err, &r) {
		return
	}
	w.Log.Warn("mapping refused", "source", r.Source, "reason", r.Reason)
	if w.Metrics != nil {
		w.Metrics.RefusedMappings.WithLabelValues(r.Source).Inc()
	}
}

// standardMapping logs and counts a caller mapped through a STANDARD access entry: who,
// through which entry, with which policies. Never the token.
func (w *Webhook) standardMapping(c *Caller, u *User) {
	w.Log.Info("access entry mapped", "principal", c.CanonicalARN, "arn", c.ARN, "entry", u.Mapping,
		"user", u.Username, "policies", u.Policies)
	if w.Metrics == nil {
		return
	}
	if len(u.Policies) == 0 {
		w.Metrics.StandardMappings.WithLabelValues("none").Inc()
	}
	for _, p := range u.Policies {
		w.Metrics.StandardMappings.WithLabelValues(strings.TrimPrefix(p, nodejoinv1alpha1.AccessPolicyARNPrefix)).Inc()
	}
}

// MaxReviewBytes bounds a TokenReview request body.
const MaxReviewBytes = 64 << 10

// DecodeReview reads the TokenReview a request carries: JSON of at most MaxReviewBytes,
// of kind TokenReview in authentication.k8s.io/v1 (or without apiVersion and kind),
// with a token. The error never quotes the body, which holds a token.
func DecodeReview(body io.Reader) (*authenticationv1.TokenReview, error) {
	var review authenticationv1.TokenReview
	data, err := io.ReadAll(io.LimitReader(body, MaxReviewBytes+1))
	switch {
	case err != nil:
		return nil, errors.New("reading the request body failed")
	case len(data) > MaxReviewBytes:
		return nil, fmt.Errorf("the request body exceeds %d bytes", MaxReviewBytes)
	}
	if err := json.Unmarshal(data, &review); err != nil {
		return nil, errors.New("expected a request body to be a TokenReview")
	}
	if (review.APIVersion != "" || review.Kind != "") && (review.APIVersion != "authentication.k8s.io/v1" || review.Kind != "TokenReview") {
		return nil, errors.New("expected an authentication.k8s.io/v1 TokenReview")
	}
	if review.Spec.Token == "" {
		return nil, errors.New("the TokenReview has no token")
	}
	return &review, nil
}

// ServeHTTP implements the webhook: POST a TokenReview, get it back with its status.
// A denial is an answer (200, authenticated: false, with the reason); STS throttling is
// 429 and any other failure (STS unreachable or 5xx, the inventory failing) 500, both of
// which kube-apiserver's webhook authenticator retries. Tokens are never logged.
func (w *Webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w.init()
	if r.Method != http.MethodPost {
		http.Error(rw, "expected POST", http.StatusMethodNotAllowed)
		return
	}
	review, err := DecodeReview(r.Body)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	start := time.Now()
	user, err := w.Authenticate(r.Context(), review.Spec.Token)
	out := authenticationv1.TokenReview{TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenReview"}}
	status := http.StatusOK
	switch {
	case err == nil:
		out.Status.Authenticated = true
		out.Status.User = authenticationv1.UserInfo{Username: user.Username, UID: user.UID, Groups: user.Groups, Extra: map[string]authenticationv1.ExtraValue{}}
		for k, v := range user.Extra {
			out.Status.User.Extra[k] = v
		}
		w.Log.Info("token accepted", "user", user.Username, "arn", user.Extra["arn"], "mapping", user.Mapping, "latency", time.Since(start))
		if w.OnAccepted != nil {
			w.OnAccepted(user.Username)
		}
	case errors.Is(err, ErrThrottled):
		status = http.StatusTooManyRequests
		out.Status.Error = err.Error()
		w.Log.Warn("token review throttled")
	case errors.Is(err, ErrDenied):
		out.Status.Error = err.Error()
		w.Log.Info("token denied", "reason", err.Error(), "latency", time.Since(start))
	default:
		// STS or the inventory failed: 500, which kube-apiserver retries. The errors name
		// hosts and causes only (never a token or presigned URL).
		status = http.StatusInternalServerError
		out.Status.Error = err.Error()
		w.Log.Warn("token review failed", "err", err.Error(), "latency", time.Since(start))
	}
	if w.Metrics != nil {
		outcome := "authenticated"
		switch {
		case errors.Is(err, ErrThrottled):
			outcome = "throttled"
		case errors.Is(err, ErrDenied):
			outcome = "denied"
		case err != nil:
			outcome = "error"
		}
		w.Metrics.Reviews.WithLabelValues(outcome).Inc()
		w.Metrics.Latency.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(status)
	_ = json.NewEncoder(rw).Encode(out)
}
