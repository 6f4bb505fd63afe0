package imagebuild

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The archive a source package is fetched from is the machine's own main Debian
// archive: not its security or updates suites, nor a disabled or source-only entry.
func TestArchiveURI(t *testing.T) {
	for _, tc := range []struct {
		name, sources, list, want string
	}{
		{"deb822 as Debian 12 images ship it",
			"Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n" +
				"Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\nComponents: main\n",
			"", "http://mirror.example/debian"},
		{"deb822: security first, disabled and deb-src entries skipped",
			"Types: deb\nURIs: http://a.example/debian-security\nSuites: bookworm-security\n\n" +
				"Enabled: no\nTypes: deb\nURIs: http://off.example/debian\nSuites: bookworm\n\n" +
				"# a comment\nTypes: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\n\n" +
				"Types: deb deb-src\nURIs: http://b.example/debian http://c.example/debian\nSuites: bookworm\n",
			"", "http://b.example/debian"},
		{"one-line list with options",
			"", "# deb http://old.example/debian buster main\ndeb http://x.example/debian-security bookworm-security main\ndeb [arch=amd64 signed-by=/k.gpg] http://y.example/debian bookworm main contrib\n",
			"http://y.example/debian"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.sources != "" {
				if err := os.WriteFile(filepath.Join(dir, "debian.sources"), []byte(tc.sources), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			list := filepath.Join(dir, "sources.list")
			if tc.list != "" {
				if err := os.WriteFile(list, []byte(tc.list), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := archiveURI(dir, list)
			if err != nil || got != tc.want {
				t.Errorf("archiveURI = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	// No archive at all: the error says where apt's sources were looked for.
	dir := t.TempDir()
	if _, err := archiveURI(dir, filepath.Join(dir, "sources.list")); err == nil {
		t.Error("no sources: no error")
	}
}

// A download is kept only when its hash is the pinned one; a kept file is not fetched
// again, and a refused one leaves nothing in the cache.
func TestDownloadChecksTheHash(t *testing.T) {
	cache := t.TempDir()
	body := []byte("pinned bytes\n")
	sum := "2d3fe2c8ea8f1da1a8c5fd3a43f3b7b3ffe6b14bcf1b2d3a43c1f1a5a8c2f3d0" // not body's
	fetches := 0
	get := func(data []byte) func(string) (string, error) {
		return func(tmp string) (string, error) {
			fetches++
			p := filepath.Join(tmp, "f")
			return p, os.WriteFile(p, data, 0o600)
		}
	}
	if _, err := download(cache, "f", sum, "pin f", get(body)); err == nil || !strings.Contains(err.Error(), "refusing it") || !strings.Contains(err.Error(), "pin f") {
		t.Fatalf("wrong hash: error %v", err)
	}
	if left, _ := os.ReadDir(cache); len(left) != 0 {
		t.Errorf("a refused download left %v in the cache", left)
	}
	want, err := FileSHA256(writeTemp(t, body))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		p, err := download(cache, "f", want, "pin f", get(body))
		if err != nil || filepath.Dir(p) != cache {
			t.Fatalf("download = %q, %v", p, err)
		}
	}
	if fetches != 2 {
		t.Errorf("%d fetches; want 2 (the refused one, then one kept and reused)", fetches)
	}
}

func writeTemp(t *testing.T, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "x")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
