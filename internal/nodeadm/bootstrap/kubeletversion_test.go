package bootstrap

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeKubelet writes a kubelet that prints version and counts its runs in a file.
func fakeKubelet(t *testing.T, dir, version string) (bin, counter string) {
	t.Helper()
	bin, counter = filepath.Join(dir, "kubelet"), filepath.Join(dir, "runs")
	script := "#!/bin/sh\necho run >> " + counter + "\necho 'Kubernetes " + version + "'\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, counter
}

func runs(t *testing.T, counter string) int {
	t.Helper()
	data, err := os.ReadFile(counter)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "run")
}

func TestKubeletVersionCache(t *testing.T) {
	dir := t.TempDir()
	bin, counter := fakeKubelet(t, dir, "v1.37.1")
	cache := filepath.Join(dir, "state", "kubelet-version.json")
	ask := func(wantText string, wantCached bool, wantRuns int) {
		t.Helper()
		a, err := KubeletVersion(t.Context(), bin, cache)
		if err != nil || a.CacheErr != nil {
			t.Fatalf("KubeletVersion: %v, cache error %v", err, a.CacheErr)
		}
		if a.Text != wantText || a.Cached != wantCached || runs(t, counter) != wantRuns {
			t.Errorf("answer %q cached %v after %d run(s); want %q cached %v after %d", a.Text, a.Cached, runs(t, counter), wantText, wantCached, wantRuns)
		}
	}
	ask("Kubernetes v1.37.1\n", false, 1) // first boot: asked, recorded
	ask("Kubernetes v1.37.1\n", true, 1)  // unchanged binary: not asked
	ask("Kubernetes v1.37.1\n", true, 1)

	// A new kubelet (other content, size and time) is asked again.
	fakeKubelet(t, dir, "v1.38.0-alpha.1")
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(bin, later, later); err != nil {
		t.Fatal(err)
	}
	ask("Kubernetes v1.38.0-alpha.1\n", false, 2)
	ask("Kubernetes v1.38.0-alpha.1\n", true, 2)

	// Only the modification time changed: asked again too.
	earlier := later.Add(-time.Hour)
	if err := os.Chtimes(bin, earlier, earlier); err != nil {
		t.Fatal(err)
	}
	ask("Kubernetes v1.38.0-alpha.1\n", false, 3)

	// A corrupt cache file is a miss, not an error.
	if err := os.WriteFile(cache, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	ask("Kubernetes v1.38.0-alpha.1\n", false, 4)
	ask("Kubernetes v1.38.0-alpha.1\n", true, 4)

	// The cache is keyed by path too: the same kubelet (same size and time) under
	// another name is asked.
	link := filepath.Join(dir, "kubelet-link")
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	bin = link
	ask("Kubernetes v1.38.0-alpha.1\n", false, 5)
}

func TestKubeletVersionUnwritableCache(t *testing.T) {
	dir := t.TempDir()
	bin, counter := fakeKubelet(t, dir, "v1.37.1")
	// The cache's parent is a file: the answer is still given, the write error reported.
	blocker := filepath.Join(dir, "blocker")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := KubeletVersion(t.Context(), bin, filepath.Join(blocker, "kubelet-version.json"))
	if err != nil || a.Text != "Kubernetes v1.37.1\n" || a.CacheErr == nil || runs(t, counter) != 1 {
		t.Errorf("answer %+v, error %v, runs %d", a, err, runs(t, counter))
	}
	if _, err := KubeletVersion(t.Context(), filepath.Join(dir, "missing"), filepath.Join(dir, "c.json")); err == nil {
		t.Error("a missing kubelet gave no error")
	}
}
