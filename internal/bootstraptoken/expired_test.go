package bootstraptoken_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodejoin/nodejoin/internal/bootstraptoken"
)

func TestExpired(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		expiration string
		want       bool
	}{
		{"in the future", "2026-03-01T13:00:00Z", false},
		{"in another zone, in the future", "2026-03-01T13:30:00+01:00", false},
		{"at now", "2026-03-01T12:00:00Z", true},
		{"in the past", "2026-03-01T11:59:59Z", true},
		{"does not parse", "tomorrow", true},
		{"missing", "", true},
	} {
		s := &corev1.Secret{Data: map[string][]byte{}}
		if tc.expiration != "" {
			s.Data["expiration"] = []byte(tc.expiration)
		}
		if got := bootstraptoken.Expired(s, now); got != tc.want {
			t.Errorf("%s: Expired = %t, want %t", tc.name, got, tc.want)
		}
	}
}
