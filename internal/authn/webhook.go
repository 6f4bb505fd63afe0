package authn

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Webhook answers kube-apiserver's TokenReviews (authentication.k8s.io/v1).
type Webhook struct {
	Verifier  *Verifier
	Mappings  func(ctx context.Context) ([]RoleMapping, error)
	Instances Instances
	Log       *slog.Logger
	// CacheTTL keeps an accepted token's user this long (default 1 minute), keyed by the
	// token's hash; CacheSize bounds the entries (default 4096).
	CacheTTL  time.Duration
	CacheSize int
	// Limiter bounds the reviews that reach STS; nil allows 50 per second, bursts of 100.
	Limiter *rate.Limiter
	// Metrics, when set, records reviews, latencies and cache hits.
	Metrics *Metrics
	// OnAccepted, when set, is called with the username of every accepted token.
	OnAccepted func(username string)

	once  sync.Once
	mu    sync.Mutex
	cache map[[32]byte]cacheEntry
	hits  int
	total int
}

type cacheEntry struct {
	user    *User
	expires time.Time
}

func (w *Webhook) init() {
	w.once.Do(func() {
		w.cache = map[[32]byte]cacheEntry{}
		if w.CacheTTL == 0 {
			w.CacheTTL = time.Minute
		}
		if w.CacheSize == 0 {
			w.CacheSize = 4096
		}
		if w.Limiter == nil {
			w.Limiter = rate.NewLimiter(50, 100)
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

// Authenticate returns the user of a token, from the cache or by verifying it.
func (w *Webhook) Authenticate(ctx context.Context, token string) (*User, error) {
	w.init()
	key := sha256.Sum256([]byte(token))
	now := time.Now()
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
	w.mu.Unlock()
	if !w.Limiter.Allow() {
		return nil, ErrThrottled
	}
	caller, err := w.Verifier.Verify(ctx, token)
	if err != nil {
		return nil, err
	}
	mappings, err := w.Mappings(ctx)
	if err != nil {
		return nil, err
	}
	user, err := Map(ctx, caller, mappings, w.Instances)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	if len(w.cache) >= w.CacheSize {
		for k, e := range w.cache {
			if !now.Before(e.expires) || len(w.cache) >= w.CacheSize {
				delete(w.cache, k)
			}
		}
	}
	w.cache[key] = cacheEntry{user: user, expires: now.Add(w.CacheTTL)}
	w.mu.Unlock()
	return user, nil
}

// ServeHTTP implements the webhook: POST a TokenReview, get it back with its status.
// A denial is an answer (200, authenticated: false, with the reason); STS throttling is
// 429 so that kube-apiserver retries. Tokens are never logged.
func (w *Webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w.init()
	if r.Method != http.MethodPost {
		http.Error(rw, "expected POST", http.StatusMethodNotAllowed)
		return
	}
	var review authenticationv1.TokenReview
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&review); err != nil || review.Spec.Token == "" {
		http.Error(rw, "expected a request body to be a TokenReview", http.StatusBadRequest)
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
	default:
		out.Status.Error = err.Error()
		w.Log.Info("token denied", "reason", err.Error(), "latency", time.Since(start))
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
