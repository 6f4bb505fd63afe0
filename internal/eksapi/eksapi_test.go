package eksapi

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// EKS timestamps travel as epoch seconds with milliseconds, the only form aws-sdk-go-v2
// reads for createdAt and modifiedAt; a string is refused as the SDK refuses it.
func TestTimeOnTheWire(t *testing.T) {
	at := NewTime(time.Date(2022, 9, 14, 9, 54, 36, 211_456_000, time.UTC))
	b, err := json.Marshal(struct {
		CreatedAt Time `json:"createdAt"`
	}{at})
	if err != nil || string(b) != `{"createdAt":1663149276.211}` {
		t.Fatalf("marshal = %s, %v", b, err)
	}
	var back struct {
		CreatedAt Time `json:"createdAt"`
	}
	if err := json.Unmarshal(b, &back); err != nil || !back.CreatedAt.Equal(at.Time) {
		t.Errorf("round trip = %v, %v; want %v", back.CreatedAt, err, at)
	}
	for _, in := range []string{`"2022-09-14T09:54:36Z"`, `true`, `{}`} {
		var got Time
		if err := json.Unmarshal([]byte(in), &got); err == nil || !strings.Contains(err.Error(), "epoch seconds") {
			t.Errorf("unmarshal %s = %v, %v; want a refusal naming epoch seconds", in, got, err)
		}
	}
	var zero Time
	if err := json.Unmarshal([]byte("null"), &zero); err != nil || !zero.IsZero() {
		t.Errorf("null = %v, %v", zero, err)
	}
}
