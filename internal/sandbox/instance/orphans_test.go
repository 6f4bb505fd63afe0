package instance

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestOrphansFindsOnlyThisClustersUnrecordedInstances(t *testing.T) {
	base, nsDir := t.TempDir(), t.TempDir()
	for _, d := range []string{"n1", "n2", "n10", NodesDir, "notes"} {
		if err := os.Mkdir(filepath.Join(base, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{
		"nodejoin-a",                       // the cluster's own namespace: the control plane's to remove
		"nodejoin-a-i-0d1963348110d6f0d",   // recorded below
		"nodejoin-a-i-0123456789abcdef0",   // left over
		"nodejoin-a-i-i-0123456789abcdef0", // cluster "a-i"'s instance
		"nodejoin-ab-i-0123456789abcdef0",  // cluster "ab"'s instance
		"nodejoin-a-i-nothex",
	} {
		if err := os.WriteFile(filepath.Join(nsDir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	recs := []*Record{{ID: "i-0d1963348110d6f0d", Namespace: "nodejoin-a-i-0d1963348110d6f0d", Root: filepath.Join(base, "n2")}}
	var got []string
	for _, r := range orphansIn(base, nsDir, "a", recs) {
		if r.Kubelet != KubeletReal {
			t.Errorf("orphan %s is not cleaned as a real instance", r.ID)
		}
		got = append(got, r.Root+r.Namespace)
	}
	slices.Sort(got)
	want := []string{filepath.Join(base, "n1"), filepath.Join(base, "n10"), "nodejoin-a-i-0123456789abcdef0"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("orphans = %v, want %v", got, want)
	}
}
