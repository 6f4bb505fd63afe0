package authn_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodejoin/nodejoin/internal/authn"
	"github.com/nodejoin/nodejoin/internal/identity"
)

// clock is a settable time for the webhook and its verifier.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// An accepted token's cached user never outlives the token: a token is refused as
// expired right after its 15 minutes even though the accepted-user cache (1 minute)
// would still hold it; within its life a cache hit answers, and the cache's own TTL
// still bounds an entry when it ends sooner than the token.
func TestCachedTokenExpiresWithTheToken(t *testing.T) {
	f := newSTSFixture(t)
	tok := f.mint(t, f.credentials(t, "i-0aaaaaaaaaaaaaaaa"))
	req, err := identity.Parse(tok, []string{f.host}, time.Now(), time.Minute)
	if err != nil {
		t.Fatalf("the minted token does not parse: %v", err)
	}
	end := req.Date.Add(identity.Lifetime) // the last instant Parse accepts it

	for _, tc := range []struct {
		name string
		// first is when the token is first reviewed (and cached), then each of later
		// is a review at that time; want is "" for accepted, else the denial's text.
		first time.Time
		later []time.Time
		want  []string
		hits  int // cache hits over the whole run
	}{
		{
			name: "refused right after its expiry although cached", first: end.Add(-30 * time.Second),
			later: []time.Time{end.Add(-10 * time.Second), end.Add(time.Second)},
			want:  []string{"", "X-Amz-Date parameter is expired (15 minute expiration)"}, hits: 1,
		},
		{
			name: "the cache's own minute still bounds it", first: req.Date.Add(time.Minute),
			later: []time.Time{req.Date.Add(90 * time.Second), req.Date.Add(3 * time.Minute)},
			want:  []string{"", ""}, hits: 1, // the second later review asks STS again
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{t: tc.first}
			v := f.verifier()
			v.Now = c.now
			w := &authn.Webhook{Verifier: v, Mappings: staticMappings, Instances: nodeInstances()}
			if _, err := w.Authenticate(t.Context(), tok); err != nil {
				t.Fatalf("first review at %s: %v", tc.first, err)
			}
			for i, at := range tc.later {
				c.set(at)
				u, err := w.Authenticate(t.Context(), tok)
				switch want := tc.want[i]; {
				case want == "" && err != nil:
					t.Errorf("review at token date + %s: %v, want accepted", at.Sub(req.Date), err)
				case want != "" && (err == nil || !errors.Is(err, authn.ErrDenied) || !strings.Contains(err.Error(), want)):
					t.Errorf("review at token date + %s: %+v, %v; want the denial %q", at.Sub(req.Date), u, err, want)
				}
			}
			if hits, _ := w.CacheHitRate(); hits != tc.hits {
				t.Errorf("%d cache hits, want %d", hits, tc.hits)
			}
		})
	}
}
