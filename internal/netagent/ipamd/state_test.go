package ipamd

import (
	"bytes"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/cloud"
	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/pool"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestStateGolden pins /v1/state, which `nodejoin diagnose node` decodes: a node with a
// second ENI, two pods of which one was deleted (its address cooling down), and the
// EC2 error of a refused first fill.
func TestStateGolden(t *testing.T) {
	n := newNode(t, pool.Limits{ENIs: 3, IPv4PerENI: 4})
	n.ec2.setFail("AssignPrivateIpAddresses", cloud.CodeUnauthorized)
	r := n.start(Knobs{Pool: pool.Config{WarmENITarget: 1}, Cooldown: 30 * time.Second})
	waitFor(t, "the refused fill", func() bool { return r.d.State().LastEC2Error != nil })
	n.ec2.setFail("AssignPrivateIpAddresses", "")
	c := r.ready(t)
	for i := range 2 {
		addRetrying(t, c, fmt.Sprintf("pod%d", i))
	}
	waitFor(t, "a second ENI", func() bool { return r.d.State().Pool.Total == 6 })
	if _, err := del(t.Context(), c, "pod1"); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	r.d.introspectionHandler().ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/v1/state", nil))
	got := rec.Body.Bytes()
	path := filepath.Join("testdata", "state.json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("/v1/state differs from %s (run with -update if the change is meant):\n%s", path, got)
	}
}
